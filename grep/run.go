package grep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// Run is one grep command over many files: the matcher its patterns
// compile to and the scan its options ask for. Files are scanned in any
// order (Scan is safe for concurrent use) and printed in order by an
// Output.
type Run struct {
	opts *Options
	m    *Matcher
	mode Mode
	scan scanOptions
}

// NewRun compiles o's patterns; warn gets GNU's warnings (a stray
// backslash, a leading repetition operator). o must not change while
// the run is in use.
func NewRun(o *Options, warn func(string)) (*Run, error) {
	mo := o.Match
	mo.NullData = o.NullData
	m, err := Compile(o.Patterns, mo, warn)
	if err != nil {
		return nil, err
	}
	r := &Run{opts: o, m: m, mode: ModeLines,
		scan: scanOptions{max: o.MaxCount, keepBad: true, text: o.Text || o.NullData, skipBinary: o.SkipBinary}}
	switch o.Mode {
	case OutCount:
		r.mode = ModeCount
	case OutFilesWith, OutFilesWithout, OutQuiet:
		r.mode = ModeFiles
	}
	if !o.MaxSet || o.Mode == OutQuiet || o.Mode == OutFilesWith || o.Mode == OutFilesWithout {
		r.scan.max = -1 // one line decides
	}
	return r, nil
}

// Matcher returns the run's matcher (its IndexQuery narrows the files).
func (r *Run) Matcher() *Matcher { return r.m }

// ReadsNothing reports when GNU grep sees that no line can be selected
// and exits 1 without reading a file or printing anything (not even -c's
// counts): -m 0, or -v of the empty pattern alone (repeated or not)
// without -x or -w. With -L it reads on (and lists every file).
func (r *Run) ReadsNothing() bool {
	if r.opts.Mode == OutFilesWithout {
		return false
	}
	return r.opts.MaxSet && r.opts.MaxCount == 0 || r.invertsEmpty()
}

// invertsEmpty reports -v of only empty patterns, without -x or -w:
// every line matches, so none is selected.
func (r *Run) invertsEmpty() bool {
	mo := r.opts.Match
	if !mo.Invert || mo.Line || mo.Word || len(r.opts.Patterns) == 0 {
		return false
	}
	for _, p := range r.opts.Patterns {
		if p != "" {
			return false
		}
	}
	return true
}

// Scan returns GNU grep's verdict on one file's content, read with GNU's
// initial buffer (Output.File rescans when an earlier file grew it and it
// matters). With -z it rewrites data in place (records become lines):
// give Output.File the same bytes. It stops with ctx's error once ctx
// is done.
func (r *Run) Scan(ctx context.Context, data []byte) (FileResult, error) {
	if r.opts.NullData {
		swapNul(data)
	}
	if r.opts.MaxSet && r.opts.MaxCount == 0 {
		return FileResult{}, nil // -L -m 0: no line read, every file listed
	}
	if r.m.cannotMatch(data) {
		// No match possible: GNU grep would read it and print nothing;
		// only its long lines still matter (Output.Grow).
		return FileResult{Grown: BufferGrowth(data)}, nil
	}
	return r.m.scan(ctx, data, r.mode, BufSize, r.scan)
}

// Output prints a run's files in order as GNU grep does: selected lines
// (with context, -o, --color, ...), -c counts, -l/-L names, and
// diagnostics in their place on the error stream. It keeps what GNU
// keeps from file to file: whether a group was printed (separators) and
// the read buffer, grown by long lines, which decides where a later
// file's late NUL byte is seen.
type Output struct {
	run       *Run
	pr        *printer
	buf       bytes.Buffer
	out, errw io.Writer
	bufSize   int

	Matched bool // some line was selected
	Errors  int  // files or operands that could not be searched
}

// NewOutput returns the run's output to out (lines) and errw
// (diagnostics); withName prints file names before lines and counts.
func (r *Run) NewOutput(withName bool, out, errw io.Writer) *Output {
	o := &Output{run: r, out: out, errw: errw, bufSize: BufSize}
	o.pr = newPrinter(r.opts, r.m, withName, &o.buf, o.Flush)
	return o
}

// Flush writes out what is buffered.
func (o *Output) Flush() error {
	if o.buf.Len() == 0 {
		return nil
	}
	_, err := o.out.Write(o.buf.Bytes())
	o.buf.Reset()
	return err
}

// diag writes a diagnostic after the lines before it.
func (o *Output) diag(format string, args ...any) error {
	if err := o.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(o.errw, format, args...)
	return nil
}

// Failed reports an operand or file that could not be searched: msg (if
// any) goes to the error stream in its place. A warning (a directory
// loop met by -R) leaves the exit status as it is.
func (o *Output) Failed(msg string, warning bool) error {
	if !warning {
		o.Errors++
	}
	if msg == "" {
		return nil
	}
	return o.diag("%s\n", msg)
}

// FileError reports a file that could not be read or scanned. An
// *UnsupportedError is the whole run's (returned as it is); any other
// error is that file's, printed in its place.
func (o *Output) FileError(display string, err error) error {
	var ue *UnsupportedError
	if errors.As(err, &ue) {
		return err
	}
	o.Errors++
	return o.diag("%s: %s: %v\n", o.run.opts.ErrPrefix, display, err)
}

// Grow records a file passed by without being read (it cannot match)
// whose long lines grow GNU grep's read buffer to size bytes.
func (o *Output) Grow(size int) { o.bufSize = max(o.bufSize, size) }

// File prints one file: data as Scan left it and Scan's verdict. done
// says the run's answer is known (-q and a match): nothing more is read.
// ctx stops a rescan (see Grow).
func (o *Output) File(ctx context.Context, display string, data []byte, fr FileResult) (done bool, err error) {
	r := o.run
	if fr.LateNul && o.bufSize != BufSize {
		// GNU grep's read buffer persists across files: a late NUL's
		// verdict depends on the long lines of the files before it.
		if fr, err = r.m.scan(ctx, data, r.mode, o.bufSize, r.scan); err != nil {
			return false, err
		}
	}
	o.Grow(fr.Grown)
	if fr.Count > 0 {
		o.Matched = true
	}
	switch r.opts.Mode {
	case OutQuiet:
		if o.Matched {
			return true, o.Flush()
		}
	case OutFilesWith:
		if fr.Count > 0 {
			o.pr.nameLine(display)
		}
	case OutFilesWithout:
		if fr.Count == 0 {
			o.pr.nameLine(display)
		}
	case OutCount:
		o.pr.count(display, fr.Count)
	default:
		binary := len(fr.Lines) > 0 && o.pr.file(display, data, fr) || fr.Binary
		if o.pr.err != nil {
			return false, o.pr.err
		}
		if binary && !r.opts.SkipBinary { // -I: GNU says nothing of a binary file
			if err := o.diag("grep: %s: binary file matches\n", display); err != nil {
				return false, err
			}
		}
	}
	if o.pr.err != nil {
		return false, o.pr.err // a line-buffered write failed
	}
	if o.buf.Len() > 64<<10 {
		return false, o.Flush()
	}
	return false, nil
}
