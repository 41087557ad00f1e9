package grep

import (
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// GNU grep's -w for BRE and ERE (EGexecute in dfasearch.c; its dfa
// cannot decide -w in a UTF-8 locale, so glibc's regex always does): the
// leftmost match from where the search begins, the longest there; while
// it is no whole word, the longest match at that start in the line cut
// one byte short of it; a shorter match that is empty, or none, gives
// the start up and the search goes on from the next character. Two
// quirks of that cut show: glibc's re_match is given the cut counted
// from where the search began, not from the line's start, so after a
// first -o match the cut falls that much short (the shorter matches
// past it are never tried); and at the cut glibc sees the end of its
// string, where \' holds (but not $) and which is no word character.
// A pattern that can match the empty string selects a line GNU does not
// where only an empty match is a whole word at a start that also has a
// longer match (grep -w ' \|' on " 0"); such patterns, and those with
// \', have their lines confirmed by this loop.

// wordSearch runs that loop over one line.
type wordSearch struct {
	line []byte
	word runeSet
	// Without anchors or boundaries in the pattern, Go's regexps
	// (search, anchored) find the matches; else the backtracker reads
	// tree with the line cut where glibc's string ends.
	sr    *spanRes
	tree  *syntax.Regexp
	steps int
}

func (m *Matcher) newWordSearch(sr *spanRes, line []byte) *wordSearch {
	word, _ := classSet("word")
	w := &wordSearch{line: line, word: word}
	if m.hasAssert || m.Boundary && (m.edges || !isASCII(line)) {
		w.tree = sr.tree
	} else {
		w.sr = sr
	}
	return w
}

// first returns the first match the loop accepts in a search that
// began at byte cur and looks for matches from from (a character start:
// cur, or after an empty match the character after it); ok is false if
// it finds none. A match may be empty.
func (w *wordSearch) first(cur, from int) (s, e int, ok bool, err error) {
	if w.sr == nil && w.tree == nil {
		return 0, 0, false, errTooComplex
	}
	s, e, ok, err = w.find(from)
	for ok && err == nil {
		if w.bounded(s, e) {
			return s, e, true, nil
		}
		if cut := e - 1 - cur; e > s && cut >= s {
			var e2 int
			if e2, err = w.longest(s, cut, true); err != nil {
				break
			}
			if e2 > s {
				e = e2
				continue
			}
		}
		if s >= len(w.line) {
			break
		}
		s, e, ok, err = w.find(w.next(s))
	}
	return 0, 0, false, err
}

// find returns the leftmost match at or after from and its longest end.
func (w *wordSearch) find(from int) (s, e int, ok bool, err error) {
	if w.sr != nil {
		loc := w.sr.search.FindIndex(w.line[from:])
		if loc == nil {
			return 0, 0, false, nil
		}
		return from + loc[0], from + loc[1], true, nil
	}
	for s := from; s <= len(w.line); s = w.next(s) {
		e, err := w.longest(s, len(w.line), false)
		if err != nil || e >= 0 {
			return s, e, err == nil, err
		}
	}
	return 0, 0, false, nil
}

// longest returns the end of the longest match at s in the line cut at
// byte cut (with glibc's not_eol if notEOL), or -1. Go's regexps see
// the whole line only in find.
func (w *wordSearch) longest(s, cut int, notEOL bool) (int, error) {
	// c: the last character start at or before the cut.
	c := s
	for c < cut {
		_, n := utf8.DecodeRune(w.line[c:])
		if c+n > cut {
			break
		}
		c += n
	}
	if w.sr != nil {
		// No assertion sees the cut; a character it splits matches
		// nothing.
		if loc := w.sr.anchored.FindIndex(w.line[s:c]); loc != nil {
			return s + loc[1], nil
		}
		return -1, nil
	}
	split := -1
	if c < cut {
		split = c
	}
	gw, _ := classSet("word")
	b := &backtracker{line: w.line[:cut], word: gw, notEOL: notEOL, split: split, steps: w.steps}
	best := -1
	b.m(w.tree, s, func(e int) bool {
		best = max(best, e)
		return false // every path: the longest end
	})
	w.steps = b.steps
	if w.steps > backtrackBudget {
		return -1, errTooComplex
	}
	return best, nil
}

func (w *wordSearch) next(s int) int {
	if s >= len(w.line) {
		return len(w.line) + 1
	}
	_, n := utf8.DecodeRune(w.line[s:])
	return s + n
}

// bounded: no word character before s or at e (-w sees none in an
// encoding error).
func (w *wordSearch) bounded(s, e int) bool {
	isWord := func(r rune, n int) bool { return n > 0 && r != utf8.RuneError && w.word.has(r) }
	return !isWord(utf8.DecodeLastRune(w.line[:s])) && !isWord(utf8.DecodeRune(w.line[e:]))
}

// nullable: n can match the empty string (assertions count as empty).
func nullable(n *node) bool {
	switch n.kind {
	case nAssert:
		return true
	case nRepeat:
		return n.min == 0 || nullable(n.sub)
	case nGroup:
		for _, seq := range n.alts {
			if !slices.ContainsFunc(seq, func(x *node) bool { return !nullable(x) }) {
				return true
			}
		}
	}
	return false
}

// markBufEnds renders every \' in n as a named capture of $, which the
// backtracker reads as glibc's buffer end, and reports whether n has one.
func markBufEnds(n *node) bool {
	found := false
	switch n.kind {
	case nAssert:
		if n.bufEnd {
			n.text, found = `(?P<`+bufEndCapture+`>$)`, true
		}
	case nRepeat:
		found = markBufEnds(n.sub)
	case nGroup:
		for _, seq := range n.alts {
			for _, x := range seq {
				found = markBufEnds(x) || found
			}
		}
	}
	return found
}

// fixedStrings reports whether GNU grep 3.8 runs BRE or ERE patterns as
// -F (try_fgrep_pattern: two or more distinct patterns, each only
// literal characters; with -i none that folds to or from a character
// past ASCII), whose -w is its own (kwsearch.c).
func fixedStrings(patterns []string, syn Syntax, fold bool) bool {
	if len(slices.Compact(slices.Sorted(slices.Values(patterns)))) < 2 {
		return false
	}
	for _, p := range patterns {
		if fold && strings.ContainsFunc(p, foldsPastASCII) {
			return false
		}
		for i := 0; i < len(p); i++ {
			switch c := p[i]; c {
			case '$', '*', '.', '[', '^':
				return false
			case '(', '+', '?', '{', '|':
				if syn != Basic {
					return false
				}
			case '\\':
				if i+1 < len(p) {
					switch q := p[i+1]; q {
					case 'B', 'S', 'W', '\'', '<', 'b', 's', 'w', '`', '>', '1', '2', '3', '4', '5', '6', '7', '8', '9':
						return false
					case '(', '+', '?', '{', '|', ')':
						if syn == Basic {
							return false
						}
					}
					i++
				}
			}
		}
	}
	return true
}

// foldsPastASCII: -i's case counterparts of r include a character past
// ASCII (fgrep_icase_charlen): glibc's ſ and ı upper-case to S and I.
func foldsPastASCII(r rune) bool {
	if r < utf8.RuneSelf {
		return strings.ContainsRune("sSiI", r)
	}
	return unicode.ToUpper(r) != r || unicode.ToLower(r) != r || unicode.SimpleFold(r) != r
}

// gateSuperset is GNU's dfa superset of n in a UTF-8 locale (dfassbuild),
// which gates the lines glibc's regex selects: word anchors hold
// anywhere, and a set it cannot read exactly (node.superAny) is any
// text.
func gateSuperset(n *node) *node {
	c := *n
	switch n.kind {
	case nAssert:
		if n.text != "^" && n.text != "$" && !n.bufEnd {
			c.text = ""
		}
	case nSet:
		if n.superAny {
			return &node{kind: nAssert, text: `(?s:.*)`}
		}
	case nRepeat:
		c.sub = gateSuperset(n.sub)
	case nGroup:
		c.alts = nil
		for _, seq := range n.alts {
			var cs []*node
			for _, x := range seq {
				cs = append(cs, gateSuperset(x))
			}
			c.alts = append(c.alts, cs)
		}
	}
	return &c
}

// hasChar: n holds a set the superset reads exactly; GNU builds no
// superset without one (every line passes).
func hasChar(n *node) bool {
	switch n.kind {
	case nSet:
		return !n.superAny
	case nRepeat:
		return hasChar(n.sub)
	case nGroup:
		for _, seq := range n.alts {
			if slices.ContainsFunc(seq, hasChar) {
				return true
			}
		}
	}
	return false
}
