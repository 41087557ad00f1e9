package search

import (
	"bytes"
	"path"
	"strings"

	"github.com/padfs/padfs/search/codetok"
)

// commentBlocks calls fn with each block of comment text of a file:
// consecutive line comments (//, or # in shell and Python, either in a
// file of another kind the ranker names: .rules, .yaml) as one block,
// each /* */ comment, each paragraph of a multi-line string (Go's raw
// strings: help and usage text; Python's docstrings), and for prose
// (Markdown, text, a README) each paragraph. A concept query ("wait for a collection of goroutines to
// finish") is answered in prose: a doc comment says what the code does.
func commentBlocks(p string, data []byte, fn func(start, end int)) {
	lang := codetok.LangOf(p)
	prose := lang == codetok.LangMarkdown || lang == codetok.LangNone && isProseName(p)
	// A file of a kind the ranker names (kindWords) that codetok has no
	// rules for (rewrite rules, config, make fragments, protobuf) has
	// comments of one of the two usual kinds: both are read.
	other := lang == codetok.LangNone && !prose && kindWords[strings.ToLower(path.Ext(p))] != nil
	hash := lang == codetok.LangShell || lang == codetok.LangPython || other
	slashes := !prose && lang != codetok.LangShell && lang != codetok.LangPython && lang != codetok.LangNone || other
	bs, be := -1, -1 // the current block, data[bs:be]
	flush := func() {
		if bs >= 0 && be > bs {
			fn(bs, be)
		}
		bs, be = -1, -1
	}
	extend := func(start, end int) {
		if bs < 0 {
			bs = start
		}
		be = end
	}
	inBlockComment := false
	// closeStr ends the multi-line string being read (Go's raw strings:
	// help text, usage; Python's docstrings), read as prose.
	var closeStr []byte
	pos := 0
	for pos < len(data) {
		end := bytes.IndexByte(data[pos:], '\n')
		if end < 0 {
			end = len(data)
		} else {
			end += pos
		}
		line := data[pos:end]
		i := 0
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		t := line[i:] // bytes.TrimLeft(line, " \t"), without its set per call
		tOff := pos + len(line) - len(t)
		switch {
		case prose:
			if len(bytes.TrimSpace(t)) == 0 {
				flush()
			} else {
				extend(pos, end)
			}
		case closeStr != nil:
			if i := bytes.Index(line, closeStr); i >= 0 {
				extend(pos, pos+i)
				closeStr = nil
				flush()
			} else if len(bytes.TrimSpace(t)) == 0 {
				flush() // a paragraph
			} else {
				extend(pos, end)
			}
		case inBlockComment:
			if i := bytes.Index(t, []byte("*/")); i >= 0 {
				extend(pos, tOff+i)
				inBlockComment = false
				flush()
			} else {
				extend(pos, end)
			}
		case hash && len(t) > 0 && t[0] == '#' && !bytes.HasPrefix(t, []byte("#!")):
			extend(tOff, end)
		case slashes && bytes.HasPrefix(t, []byte("//")):
			extend(tOff, end)
		case slashes && bytes.HasPrefix(t, []byte("/*")):
			flush()
			if i := bytes.Index(t[2:], []byte("*/")); i >= 0 {
				fn(tOff+2, tOff+2+i)
			} else {
				inBlockComment = true
				extend(tOff, end)
			}
		case lang == codetok.LangGo && bytes.IndexByte(line, '`') >= 0 && bytes.Count(line, []byte("`"))%2 == 1:
			flush()
			closeStr = []byte("`")
			if at := pos + bytes.LastIndexByte(line, '`') + 1; len(bytes.TrimSpace(data[at:end])) > 0 {
				extend(at, end)
			}
		case lang == codetok.LangPython && (bytes.HasPrefix(t, []byte(`"""`)) || bytes.HasPrefix(t, []byte("'''"))):
			flush()
			q := t[:3]
			if i := bytes.Index(t[3:], q); i >= 0 {
				fn(tOff+3, tOff+3+i)
			} else {
				closeStr = q
				if len(bytes.TrimSpace(t[3:])) > 0 {
					extend(tOff+3, end)
				}
			}
		default:
			flush()
		}
		pos = end + 1
	}
	flush()
}

// isProseName: a file without a language whose name says it is prose
// (README, README.vendor, CONTRIBUTING, notes.txt).
func isProseName(p string) bool {
	base := p[bytes.LastIndexByte([]byte(p), '/')+1:]
	lower := bytes.ToLower([]byte(base))
	for _, pre := range []string{"readme", "contributing", "hacking", "install", "changelog", "license"} {
		if bytes.HasPrefix(lower, []byte(pre)) {
			return true
		}
	}
	return bytes.HasSuffix(lower, []byte(".txt")) || bytes.HasSuffix(lower, []byte(".rst"))
}

// docScore is the comment ranker (re-rank): the largest share of the
// query's words that one comment block holds, each word at the start of
// a word of the comment (its stem: "goroutines" for goroutine), squared,
// 0.8 of it; and 0.2 for the number of blocks that hold half the words
// or more (at least two), saturated at five: a file about the query
// discusses it in many comments, one that mentions it in one. low is the
// file's content lowercased (the same offsets as data).
func docScore(p string, data, low []byte, r *rq) float64 {
	return docScoreOcc(p, data, low, nil, r)
}

// docScoreOcc is docScore given the needles' occurrences in low (nil:
// found here).
func docScoreOcc(p string, data, low []byte, o *occs, r *rq) float64 {
	if len(r.needles) == 0 {
		return 0
	}
	if len(low) != len(data) {
		// Lowercasing changed lengths (some non-ASCII letters): fold
		// ASCII only, so that offsets into data hold.
		low, o = lowerASCII(data), nil
	}
	if o == nil {
		o = r.occurrences(low)
	}
	if o.none {
		return 0 // no block holds a word
	}
	best, good := 0, 0
	half := (len(r.needles) + 1) / 2
	commentBlocks(p, data, func(start, end int) {
		n := 0
		for i, nd := range r.needles {
			if o.inBlock(i, len(nd), start, end) {
				n++
			}
		}
		best = max(best, n)
		if n >= half && n >= 2 {
			good++
		}
	})
	f := float64(best) / float64(len(r.needles))
	return 0.8*f*f + 0.2*min(1, float64(good)/5)
}

func isASCIIAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
