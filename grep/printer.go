package grep

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"unicode/utf8"
)

// swapNul swaps NUL and newline bytes in place: grep -z's records are
// then lines, and the printer swaps them back.
func swapNul(data []byte) {
	for i, c := range data {
		switch c {
		case 0:
			data[i] = '\n'
		case '\n':
			data[i] = 0
		}
	}
}

// GNU grep's default GREP_COLORS and SGR sequences.
const (
	colorMatch    = "01;31" // ms, mc
	colorFile     = "35"    // fn
	colorLineNum  = "32"    // ln
	colorByteOff  = "32"    // bn
	colorSep      = "36"    // se
	sgrEnd        = "\x1b[m\x1b[K"
	defaultSepStr = "--"
)

// printer writes the lines of files as GNU grep 3.8 does (grep.c's
// prtext, prpending, prline): context before and after selected lines,
// group separators between groups that are not adjacent, -o's matches,
// the line head (-H -n -b -T -Z) and --color's marks. It keeps, from file
// to file, whether anything was printed (no separator before the first
// group).
type printer struct {
	req      *Options
	m        *Matcher
	withName bool
	ctx      bool // -A, -B or -C given (even 0): groups are separated
	sep      string
	noSep    bool
	used     bool
	eol      byte
	buf      *bytes.Buffer
	flush    func() error
	err      error // Spans' error (an unsupported combination), or a write error

	// per file
	display       string
	data          []byte
	fr            FileResult
	invalid       bool
	lastout       int // offset past the last line printed; -1: none in this file
	bufbeg        int // where GNU's buffer starts (see residue); lastout -1 stands for it
	pending       int // trailing context lines still to print
	numOff, num   int // line num starts at offset numOff
	width         int // -T: the width of numbers
	bad           bool
	before, after int
}

func newPrinter(req *Options, m *Matcher, withName bool, buf *bytes.Buffer, flush func() error) *printer {
	p := &printer{req: req, m: m, withName: withName, buf: buf, flush: flush, eol: '\n',
		ctx: req.Context, sep: defaultSepStr, noSep: req.NoGroupSep,
		before: max(req.Before, 0), after: max(req.After, 0)}
	if req.GroupSep != nil {
		p.sep = *req.GroupSep
	}
	if req.NullData {
		p.eol = 0
	}
	return p
}

// sgr writes text in color (with --color), as file content (-z swaps
// its newlines back) or not.
func (p *printer) sgr(color string, text []byte, content bool) {
	if p.req.Color {
		p.buf.WriteString("\x1b[" + color + "m\x1b[K")
	}
	if content {
		p.write(text)
	} else {
		p.buf.Write(text)
	}
	if p.req.Color {
		p.buf.WriteString(sgrEnd)
	}
}

// write copies content bytes (with -z, the newlines swapped back).
func (p *printer) write(text []byte) {
	if !p.req.NullData {
		p.buf.Write(text)
		return
	}
	for _, c := range text {
		switch c {
		case '\n':
			c = 0
		case 0:
			c = '\n'
		}
		p.buf.WriteByte(c)
	}
}

func (p *printer) sepChar(c byte) {
	if p.req.Color {
		p.buf.WriteString("\x1b[" + colorSep + "m\x1b[K")
		p.buf.WriteByte(c)
		p.buf.WriteString(sgrEnd)
		return
	}
	p.buf.WriteByte(c)
}

// name writes a file name and what follows it: sep, or a NUL with -Z.
func (p *printer) name(display string, sep byte) {
	p.sgr(colorFile, []byte(display), false)
	if p.req.Null {
		p.buf.WriteByte(0)
	} else {
		p.sepChar(sep)
	}
}

// nameLine writes a file name alone on its line (-l, -L).
func (p *printer) nameLine(display string) {
	p.sgr(colorFile, []byte(display), false)
	if p.req.Null {
		p.buf.WriteByte(0)
	} else {
		p.buf.WriteByte('\n')
	}
	p.lineDone()
}

// count writes -c's line.
func (p *printer) count(display string, n int) {
	if p.withName {
		p.name(display, ':')
	}
	p.buf.WriteString(strconv.Itoa(n))
	p.buf.WriteByte('\n')
	p.lineDone()
}

func (p *printer) lineDone() {
	if p.req.LineBuffered && p.err == nil {
		p.err = p.flush()
	}
}

// lineEnd returns the end of the line at s (its terminator's offset, or
// the end of the data). Past the text part NUL bytes end lines too.
func (p *printer) lineEnd(s int) int {
	d := p.data[s:]
	e := bytes.IndexByte(d, '\n')
	if s >= p.fr.TextEnd {
		if z := bytes.IndexByte(d, 0); z >= 0 && (e < 0 || z < e) {
			e = z
		}
	}
	if e < 0 {
		return len(p.data)
	}
	return s + e
}

// lineNum returns the number of the line starting at s (s at or after
// the last one asked for).
func (p *printer) lineNum(s int) int {
	if s > p.numOff {
		t := min(s, p.fr.TextEnd)
		if t > p.numOff {
			p.num += bytes.Count(p.data[p.numOff:t], []byte{'\n'})
		}
		for _, c := range p.data[max(p.numOff, t):s] {
			if c == '\n' || c == 0 {
				p.num++
			}
		}
		p.numOff = s
	}
	return p.num
}

// head writes the line head: file name, line number, byte offset, tab.
func (p *printer) head(lineStart, off, n int, sep byte) {
	if p.withName {
		p.name(p.display, sep)
	}
	num := func(v int, color string) {
		s := strconv.Itoa(v)
		if len(s) < p.width {
			s = strings.Repeat(" ", p.width-len(s)) + s
		}
		p.sgr(color, []byte(s), false)
		p.sepChar(sep)
	}
	if p.req.LineNumbers {
		num(p.lineNum(lineStart), colorLineNum)
	}
	if p.req.ByteOffset {
		num(off, colorByteOff)
	}
	if p.req.InitialTab && (p.withName || p.req.LineNumbers || p.req.ByteOffset) && n != 0 {
		p.buf.WriteByte('\t')
	}
}

// prline prints the line [s, e) (e its terminator) as a selected (':')
// or context ('-') line. A line (or with -o a match) with an encoding
// error is not printed, and the file then reports "binary file matches";
// as in GNU grep, lastout then stays where it was.
func (p *printer) prline(s, e int, sep byte) {
	line := p.data[s:e]
	matching := (sep == ':') != p.m.opts.Invert
	// With -x -w the match is the whole line and its end, even an empty
	// line's (Matcher.eolInMatch). With -v a context line matches, but
	// for the trailing context after -m's last line: that may be a line
	// that would have been selected, which has no whole-line match.
	eolIn := matching && p.m.eolInMatch && !(p.m.opts.Invert && p.selected(line))
	var spans [][2]int
	switch {
	case eolIn:
		spans = [][2]int{{0, len(line)}}
	case matching && (p.req.OnlyMatching || p.req.Color):
		sm := p.m
		if free := sm.freeMatcher(); free != nil && sep == '-' && p.selected(line) {
			sm = free // -v -x: GNU skips -x's check here (Matcher.freePats)
		}
		var err error
		if spans, err = sm.Spans(line, p.invalid); err != nil && p.err == nil {
			p.err = err
		}
	}
	if p.req.OnlyMatching {
		osep := byte(':')
		if p.m.opts.Invert {
			osep = '-'
		}
		for _, sp := range spans {
			mt := line[sp[0]:sp[1]]
			if eolIn {
				mt = append(mt[:len(mt):len(mt)], '\n') // (data's terminator, a NUL for -z); then the match's own end
			}
			if !p.req.Text && !utf8.Valid(mt) {
				p.bad = true
				return
			}
			p.head(s, s+sp[0], len(mt), osep)
			p.sgr(colorMatch, mt, true)
			p.buf.WriteByte(p.eol)
			p.lineDone()
		}
		p.lastout = e + 1
		return
	}
	if !p.req.Text && !utf8.Valid(line) {
		p.bad = true
		return
	}
	p.head(s, s, len(line), sep)
	if eolIn && p.req.Color {
		// The colored match ends the line.
		p.sgr(colorMatch, append(line[:len(line):len(line)], '\n'), true)
		p.lastout = e + 1
		p.lineDone()
		return
	}
	cur := 0
	for _, sp := range spans {
		p.write(line[cur:sp[0]])
		p.sgr(colorMatch, line[sp[0]:sp[1]], true)
		cur = sp[1]
	}
	p.write(line[cur:])
	p.buf.WriteByte(p.eol)
	p.lastout = e + 1
	p.lineDone()
}

// selected reports whether line alone is a selected line.
func (p *printer) selected(line []byte) bool {
	one := append(line[:len(line):len(line)], '\n') // an empty line is a line too
	r, err := p.m.scan(context.Background(), one, ModeCount, BufSize, scanOptions{max: 1, keepBad: true, text: true})
	return err == nil && r.Count > 0
}

// prpending prints pending trailing context up to lim.
func (p *printer) prpending(lim int) {
	if p.lastout < 0 {
		p.lastout = p.bufbeg
	}
	for ; p.pending > 0 && p.lastout < lim; p.pending-- {
		p.prline(p.lastout, p.lineEnd(p.lastout), '-')
	}
}

// residueStart is where a file's last line starts when no newline ends
// it, else len(data).
func residueStart(data []byte) int {
	if len(data) == 0 || data[len(data)-1] == '\n' {
		return len(data)
	}
	return bytes.LastIndexByte(data, '\n') + 1
}

// residue moves to GNU grep's last pass over a file: a last line that no
// newline ends is read into a buffer of its own, after the lines kept for
// leading context (up to -B lines, not past the last line printed). Where
// the last line printed does not end right at that buffer's start, GNU
// forgets it: the next group is separated, and trailing context owed after
// a line it could not print (an encoding error) starts at the buffer's
// start rather than at the file's.
func (p *printer) residue(res int) {
	b := res
	for i := 0; i < p.before && b > 0 && b != p.lastout; i++ {
		b = bytes.LastIndexByte(p.data[:b-1], '\n') + 1
	}
	if p.lastout != b {
		p.lastout, p.bufbeg = -1, b
	}
}

// file prints one file's selected lines and their context; it reports
// whether the file says "binary file matches".
func (p *printer) file(display string, data []byte, fr FileResult) bool {
	p.display, p.data, p.fr = display, data, fr
	p.invalid = !utf8.Valid(data)
	p.lastout, p.bufbeg, p.pending, p.numOff, p.num, p.bad = -1, 0, 0, 0, 1, false
	res, inRes := residueStart(data), false
	p.width = 0
	if p.req.InitialTab {
		// GNU sizes numbers by the file's size (plus one with -n).
		n := len(data)
		if p.req.LineNumbers {
			n++
		}
		p.width = len(strconv.Itoa(n))
	}
	prevEnd := -2
	for _, l := range fr.Lines {
		s, e := l.Start, l.Start+len(l.Text)
		if p.m.opts.Invert && s == prevEnd+1 && (inRes || s < res) {
			// GNU prints a run of non-matching lines in one go (a run
			// does not go on into the last pass, see residue).
			p.prline(s, e, ':')
			prevEnd = e
			continue
		}
		prevEnd = e
		if !inRes && s >= res {
			if p.pending > 0 {
				p.prpending(res)
			}
			p.residue(res)
			inRes = true
		}
		if p.pending > 0 {
			p.prpending(s)
		}
		b, bp := s, p.lastout
		if bp < 0 {
			bp = p.bufbeg
		}
		for i := 0; i < p.before && b > bp; i++ {
			b = bytes.LastIndexByte(data[:b-1], '\n') + 1
		}
		if p.ctx && p.used && b != p.lastout && !p.noSep {
			p.sgr(colorSep, []byte(p.sep), false)
			p.buf.WriteByte('\n')
			p.lineDone()
		}
		for b < s {
			be := p.lineEnd(b)
			p.prline(b, be, '-')
			b = be + 1
		}
		p.prline(s, e, ':')
		p.pending = p.after
		p.used = true
	}
	if p.pending > 0 {
		lim := len(data)
		if fr.BinMatch || fr.BinSkipped {
			lim = fr.TextEnd // GNU stops at the binary part's match, quiet
		}
		if !inRes && res < lim {
			p.prpending(res)
			p.residue(res)
		}
		p.prpending(lim)
	}
	p.data = nil
	return p.bad || fr.Binary
}
