package grep

import (
	"regexp/syntax"
	"unicode"
	"unicode/utf8"
)

// Word boundaries (\b \B \< \>) in Go's engine see only ASCII letters,
// digits and _ as word characters; GNU grep in a UTF-8 locale sees every
// letter and digit. On a line of pure ASCII the two agree. For other lines
// the matcher evaluates the same syntax tree with this small backtracking
// interpreter, whose boundaries use GNU's word characters. It is only used
// for such lines of patterns with boundaries, and it gives up (an error,
// never a guess) past a step budget.

const backtrackBudget = 1 << 20

type backtracker struct {
	line []byte
	word runeSet
	// notEOL: line is cut short of its end (glibc's not_eol), where $
	// does not hold but \' does; split is where a character the cut
	// splits starts, which matches nothing (see wordSearch), else -1.
	notEOL bool
	split  int
	steps  int
}

// errTooComplex is returned when the budget runs out.
var errTooComplex = &UnsupportedError{"word boundary", "the pattern is too complex to evaluate \\b, \\< or \\> next to non-ASCII letters"}

func (b *backtracker) isWord(i int) bool {
	if i < 0 || i >= len(b.line) {
		return false
	}
	// Find the rune that contains byte i: step back to a rune start.
	s := i
	for s > 0 && i-s < utf8.UTFMax && !utf8.RuneStart(b.line[s]) {
		s--
	}
	r, w := utf8.DecodeRune(b.line[s:])
	if r == utf8.RuneError && w == 1 || s+w <= i {
		// An encoding error: glibc's regex reads its byte as the code
		// point of the same value (\xc3 is Ã, a word character; \x80
		// a control, none), while -w sees no word character in it.
		return b.word.has(rune(b.line[i]))
	}
	return b.word.has(r)
}

// prevWord and nextWord look at the runes before and at byte offset i.
func (b *backtracker) prevWord(i int) bool { return i > 0 && b.isWord(i-1) }
func (b *backtracker) nextWord(i int) bool { return i < len(b.line) && b.isWord(i) }

func (b *backtracker) m(re *syntax.Regexp, i int, k func(int) bool) bool {
	b.steps++
	if b.steps > backtrackBudget {
		return false
	}
	switch re.Op {
	case syntax.OpNoMatch:
		return false
	case syntax.OpEmptyMatch:
		return k(i)
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if i >= len(b.line) {
				return false
			}
			c, w := utf8.DecodeRune(b.line[i:])
			if c != r && (re.Flags&syntax.FoldCase == 0 || !sameFold(c, r)) || i == b.split {
				return false
			}
			i += w
		}
		return k(i)
	case syntax.OpCharClass:
		if i >= len(b.line) {
			return false
		}
		c, w := utf8.DecodeRune(b.line[i:])
		if !runeSet(re.Rune).has(c) || i == b.split {
			return false
		}
		return k(i + w)
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		if i >= len(b.line) {
			return false
		}
		c, w := utf8.DecodeRune(b.line[i:])
		if c == '\n' && re.Op == syntax.OpAnyCharNotNL || i == b.split {
			return false
		}
		return k(i + w)
	case syntax.OpBeginLine, syntax.OpBeginText:
		return i == 0 && k(i)
	case syntax.OpEndLine, syntax.OpEndText:
		return i == len(b.line) && !b.notEOL && k(i)
	case syntax.OpWordBoundary:
		return b.prevWord(i) != b.nextWord(i) && k(i)
	case syntax.OpNoWordBoundary:
		return b.prevWord(i) == b.nextWord(i) && k(i)
	case syntax.OpCapture:
		switch re.Name { // word edges (edges.go)
		case wordStartCapture:
			return !b.prevWord(i) && b.nextWord(i) && k(i)
		case wordEndCapture:
			return b.prevWord(i) && !b.nextWord(i) && k(i)
		case bufEndCapture:
			return i == len(b.line) && k(i)
		}
		return b.m(re.Sub[0], i, k)
	case syntax.OpConcat:
		return b.concat(re.Sub, i, k)
	case syntax.OpAlternate:
		for _, s := range re.Sub {
			if b.m(s, i, k) {
				return true
			}
		}
		return false
	case syntax.OpStar:
		return b.rep(re.Sub[0], 0, -1, i, k)
	case syntax.OpPlus:
		return b.rep(re.Sub[0], 1, -1, i, k)
	case syntax.OpQuest:
		return b.rep(re.Sub[0], 0, 1, i, k)
	case syntax.OpRepeat:
		return b.rep(re.Sub[0], re.Min, re.Max, i, k)
	}
	return false
}

func (b *backtracker) concat(subs []*syntax.Regexp, i int, k func(int) bool) bool {
	if len(subs) == 0 {
		return k(i)
	}
	return b.m(subs[0], i, func(j int) bool { return b.concat(subs[1:], j, k) })
}

// rep matches sub between min and max (-1: unbounded) times, greedily;
// an iteration that consumes nothing ends the loop.
func (b *backtracker) rep(sub *syntax.Regexp, min, max, i int, k func(int) bool) bool {
	if max != 0 {
		if b.m(sub, i, func(j int) bool {
			if j == i && min <= 0 {
				return false
			}
			nmax := max
			if nmax > 0 {
				nmax--
			}
			return b.rep(sub, min-1, nmax, j, k)
		}) {
			return true
		}
	}
	return min <= 0 && k(i)
}

// sameFold reports whether c is in r's case-folding orbit: Go's parser
// turns a class that is exactly such an orbit ([Aa], as -i writes it)
// into a FoldCase literal.
func sameFold(c, r rune) bool {
	for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
		if f == c {
			return true
		}
	}
	return false
}

// matchLine reports whether re matches somewhere in line, with GNU's word
// boundaries.
func matchLineUnicode(re *syntax.Regexp, word runeSet, line []byte) (bool, error) {
	b := &backtracker{line: line, word: word, split: -1}
	for s := 0; s <= len(line); {
		if b.m(re, s, func(int) bool { return true }) {
			return true, nil
		}
		if b.steps > backtrackBudget {
			return false, errTooComplex
		}
		if s == len(line) {
			break
		}
		_, w := utf8.DecodeRune(line[s:])
		s += w
	}
	return false, nil
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}
