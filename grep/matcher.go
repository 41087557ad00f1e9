package grep

import (
	"bytes"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"context"
	"github.com/padfs/padfs/search/trigram"
)

// MatchOptions are the grep options that decide which lines match.
type MatchOptions struct {
	Syntax     Syntax
	IgnoreCase bool // -i
	Word       bool // -w
	Line       bool // -x
	Invert     bool // -v
	// NullData (-z): the data is read with NUL and newline bytes
	// swapped (see swapNul); sets hold NUL where GNU's hold a newline.
	NullData bool
}

// Matcher decides matching lines exactly as GNU grep does in a UTF-8
// locale, for the patterns it was compiled from. It is safe for
// concurrent use.
type Matcher struct {
	opts  MatchOptions
	nodes []*node
	// spanNodes are the patterns as glibc's regex reads them, where it
	// reads a construct otherwise than GNU's dfa (else nodes').
	spanNodes    []*node
	glibcDiffers bool           // some spanNodes differ
	valid        *regexp.Regexp // for files that are valid UTF-8
	invalidM     sync.Once
	invalid      *regexp.Regexp // for files with encoding errors (see render)
	invErr       error
	trees        [2]*syntax.Regexp // parsed GoSyntax (valid, invalid) for boundaries
	treeOnce     [2]sync.Once
	// GoSyntax is the translated pattern (for -v debugging and tests).
	GoSyntax string
	// Query is the trigram query a matching file's bytes must satisfy
	// (over folded bytes with -i).
	Query *trigram.Query
	// IndexQuery is the query over folded trigrams, for the index.
	IndexQuery *trigram.Query
	// lineNeedle is a string every matching line contains (a trigram the
	// query's top-level AND requires, else a literal the pattern
	// requires): lines without it are not run through the regexp.
	lineNeedle string
	// Boundary reports that the pattern uses \b \B \< or \>, which Go
	// evaluates with ASCII word characters.
	Boundary bool
	// lineStart reports that every match starts at a line start (the
	// program's start condition holds EmptyBeginLine: ^..., -x). Such a
	// pattern is run line by line without (?m), where it is anchored: Go
	// tries one start position per line (often with its one-pass matcher)
	// instead of every byte of the file, about ten times faster.
	lineStart bool
	lineRes   [2]*regexp.Regexp // without (?m): valid, invalid
	lineErrs  [2]error
	lineOnce  [2]sync.Once
	// spans finds the matches -o and --color print (see Spans).
	spans    [2]spanRes
	spanOnce [2]sync.Once
	edges    bool // a \< or \> that \b does not render exactly (edges.go)
	// twoReadings: a construct GNU's two engines read differently;
	// -o and --color refuse it (see parser.twoReadings).
	twoReadings bool
	hasAssert   bool // a node is an assertion (^ $ \b ..., or -P's raw syntax)
	// wordLoop: -w (BRE/ERE, no -x) as GNU's regex loop finds its
	// matches (wordloop.go); wordConfirm: the loop confirms the lines
	// the wrapper selects, which may be more (an empty match);
	// wordBufEnd: a \' the loop may see hold short of the line's end,
	// so it decides every line alone.
	wordLoop, wordConfirm, wordBufEnd bool
	// gateNodes: where glibc's reading differs and glibc's regex
	// selects the lines (GNU's dfa cannot decide -w's wrapper, \w, a
	// word anchor ... in UTF-8: parser.defers), a line must also pass
	// the dfa's superset of its own reading (gateSuperset); nil if
	// there is none (GNU builds none without an exact character).
	gateNodes []*node
	gateRes   [2]*regexp.Regexp
	gateErrs  [2]error
	gateOnce  [2]sync.Once
	// eolInMatch: GNU grep 3.8 -x -w (BRE/ERE) takes a matched line's
	// end into the match, which -o and --color print (see prline).
	eolInMatch bool
	// freePats are the patterns of a -v -x (BRE/ERE) matcher: GNU finds
	// the matches -o and --color print in a line without its -x check,
	// which shows in a context line with no whole-line match (prline).
	// freeMatcher compiles them without -x when such a line is met.
	freePats []string
	freeOnce sync.Once
	free     *Matcher
}

// freeMatcher returns the matcher without -x of a -v -x (BRE/ERE)
// matcher, compiled at the first call, or nil for any other matcher.
func (m *Matcher) freeMatcher() *Matcher {
	if m.freePats == nil {
		return nil
	}
	m.freeOnce.Do(func() {
		fo := m.opts
		fo.Line = false
		m.free, _ = Compile(m.freePats, fo, nil) // compiles, as it did with -x
	})
	return m.free
}

// spanRes are the per-line regexps of one variant for Spans: search finds
// the leftmost-longest match (leftmost-first for -P, as PCRE); anchored,
// for -w, the longest one at the start of its input.
type spanRes struct {
	search, anchored *regexp.Regexp
	// perlWord: -P -w's wrapper, from the line's start and from the
	// character before a later search's start (perlWordSpans).
	perlWord [2]*regexp.Regexp
	tree     *syntax.Regexp // search's, for the backtracker
	err      error
}

// Compile translates GNU grep patterns (one per element; GNU's newline-
// separated list already split) into a Matcher. warn receives GNU's
// warnings ("* at start of expression"); it may be nil.
func Compile(patterns []string, o MatchOptions, warn func(string)) (*Matcher, error) {
	if warn == nil {
		warn = func(string) {}
	}
	// GNU drops a repeated pattern (its warnings come once), and runs
	// BRE or ERE patterns that are all literal as -F, whose -w, -x and
	// -o are its own: regex is glibc's matcher.
	seen := map[string]bool{}
	patterns = slices.DeleteFunc(slices.Clone(patterns), func(p string) bool {
		dup := seen[p]
		seen[p] = true
		return dup
	})
	regex := (o.Syntax == Basic || o.Syntax == Extended) && !fixedStrings(patterns, o.Syntax, o.IgnoreCase) ||
		// and -F -i as a BRE where a pattern folds past ASCII
		o.Syntax == Fixed && o.IgnoreCase && slices.ContainsFunc(patterns, func(p string) bool { return strings.ContainsFunc(p, foldsPastASCII) })
	m := &Matcher{opts: o, eolInMatch: o.Line && o.Word && regex, wordLoop: o.Word && !o.Line && regex}
	if o.Line && !o.Word && o.Invert && regex {
		m.freePats = patterns
	}
	defers := false // see parser.defers
	for _, p := range patterns {
		n, flags, err := parsePattern(p, o.Syntax, o.IgnoreCase, o.NullData, warn)
		if err != nil && o.Syntax == Perl && (o.Word || o.Line) {
			// GNU grep wraps a -P pattern for -w and -x in (?:...):
			// a stray ) or ( may pair with the wrapper's (")(").
			if _, werr := perlToGo("(?:" + p + ")"); werr == nil {
				return nil, &UnsupportedError{"unbalanced parenthesis", "with -w or -x GNU grep wraps a -P pattern in (?:...), which pairs with it"}
			}
		}
		if err != nil {
			return nil, err
		}
		// span is glibc's reading, in which GNU finds the matches -o and
		// --color print and -w checks (see parser.glibc).
		span := n
		if flags.twoReadings {
			var g *node
			if !o.Line || !o.Word { // -x -w's whole-line quirk (eolInMatch): not modelled
				g, _ = glibcReading(p, o.Syntax, o.IgnoreCase, o.NullData) // nil if it fails
			}
			if g == nil {
				if o.Word {
					return nil, errTwoReadings
				}
				m.twoReadings = true
			} else {
				span = g
			}
		}
		if flags.strayClose && (o.Word || o.Line) {
			return nil, &UnsupportedError{"unmatched )", "with -w or -x GNU grep wraps the pattern in parentheses, which a ) that closes no group closes instead (write \\) for the character)"}
		}
		m.Boundary = m.Boundary || flags.boundary
		defers = defers || flags.defers
		if m.wordLoop {
			m.wordBufEnd = markBufEnds(span) || m.wordBufEnd
			markBufEnds(n)
			// The wrapper is the dfa's; the loop reads glibc's span.
			m.wordConfirm = m.wordBufEnd || nullable(span) || span != n || m.wordConfirm
		}
		if flags.boundary {
			word, _ := classSet("word")
			m.edges = resolveEdges(n, word) || m.edges
			if span != n {
				m.edges = resolveEdges(span, word) || m.edges
			}
		}
		if o.Syntax == Perl {
			t, err := syntax.Parse(n.alts[0][0].text, syntax.Perl)
			m.hasAssert = m.hasAssert || err != nil || goHasAssert(t)
		} else {
			m.hasAssert = m.hasAssert || hasAssert(n) || hasAssert(span)
		}
		m.nodes = append(m.nodes, n)
		m.spanNodes = append(m.spanNodes, span)
		m.glibcDiffers = m.glibcDiffers || span != n
	}
	if m.glibcDiffers && (m.wordLoop || defers) {
		// glibc's regex selects the lines, in its reading, among those
		// the dfa's superset passes.
		if slices.ContainsFunc(m.nodes, hasChar) {
			for _, n := range m.nodes {
				m.gateNodes = append(m.gateNodes, gateSuperset(n))
			}
		}
		m.nodes = m.spanNodes
	}
	src := m.goSyntax(false, false)
	re, err := regexp.Compile(src)
	if err != nil {
		return nil, translateGoError(err)
	}
	m.valid, m.GoSyntax = re, src
	// The plan reads the same translated syntax tree Go compiled.
	tree, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return nil, translateGoError(err)
	}
	if prog, err := syntax.Compile(tree.Simplify()); err == nil {
		c := prog.StartCond()
		m.lineStart = c != ^syntax.EmptyOp(0) && c&syntax.EmptyBeginLine != 0
	}
	if o.NullData {
		// The index holds the unswapped bytes: read every file (the
		// query still holds for the swapped data MayMatch sees).
		defer func() { m.IndexQuery = &trigram.Query{Op: trigram.All} }()
	}
	if o.Invert {
		m.Query, m.IndexQuery = &trigram.Query{Op: trigram.All}, &trigram.Query{Op: trigram.All} // any file may have a non-matching line
	} else {
		simple := tree.Simplify()
		m.Query, m.IndexQuery = trigram.Plan(simple, o.IgnoreCase), trigram.Plan(simple, true)
		m.lineNeedle = lineTrigram(m.Query, o.IgnoreCase)
		if m.lineNeedle == "" && !o.IgnoreCase && !m.lineStart {
			// No trigram (literals of one or two bytes, as in
			// [0-9]+\.[0-9]+): a shorter required literal still spares
			// the regexp most lines. (Line-start patterns are fast
			// line by line already.)
			m.lineNeedle = mustLiteral(simple)
		}
	}
	return m, nil
}

// errTwoReadings: GNU grep selects the lines of such a pattern by one
// reading of it and checks -w and finds -o's matches by another (see
// parser.twoReadings).
var errTwoReadings = &UnsupportedError{"construct read two ways",
	"with -x -w GNU grep reads * + ? or {n} right after ^ or $, a { that starts an ERE, and with -i a backslash before a lowercase letter one way to select lines (as padfs does) and another for -w, -o and --color (write \\^, \\$, \\{ for the character, drop the operator or the backslash)"}

func translateGoError(err error) error {
	var se *syntax.Error
	if e, ok := err.(*syntax.Error); ok {
		se = e
	}
	if se != nil && se.Code == syntax.ErrLarge {
		return &UnsupportedError{"pattern size", "the expression is too large for Go's regexp engine"}
	}
	if se != nil && se.Code == syntax.ErrNestingDepth {
		return &UnsupportedError{"nesting depth", "the expression nests too deeply for Go's regexp engine"}
	}
	return &UnsupportedError{"expression", err.Error()}
}

// goSyntax renders the patterns in Go's syntax, for content that is (or
// is not) valid UTF-8, and for matching a whole buffer (with (?m)) or one
// line at a time.
func (m *Matcher) goSyntax(invalid, perLine bool) string {
	var b strings.Builder
	if !perLine {
		b.WriteString("(?m)")
	}
	word, _ := classSet("word")
	nonWord := word.negate().remove('\n').goClass()
	if m.opts.Syntax == Perl {
		// PCRE's \w without UCP, as GNU grep 3.8 -w -P; on a line a
		// newline is an invalid byte's barrier (see GrepBuf), no word.
		nonWord = `[^0-9A-Za-z_\n]`
		if perLine {
			nonWord = `[^0-9A-Za-z_]`
		}
	}
	switch {
	case m.opts.Line:
		b.WriteString("^(?:")
	case m.opts.Word:
		b.WriteString("(?:^|" + nonWord + ")(?:")
	}
	if m.opts.Syntax == Perl && invalid && perLine {
		var inner strings.Builder
		body(&inner, m.nodes, invalid)
		b.WriteString(newlineProof(inner.String()))
	} else {
		body(&b, m.nodes, invalid)
	}
	switch {
	case m.opts.Line:
		b.WriteString(")$")
	case m.opts.Word:
		b.WriteString(")(?:" + nonWord + "|$)")
	}
	return b.String()
}

// body renders the patterns' alternation.
func body(b *strings.Builder, nodes []*node, invalid bool) {
	for i, n := range nodes {
		if i > 0 {
			b.WriteByte('|')
		}
		render(b, n, invalid)
	}
}

func hasAssert(n *node) bool {
	switch n.kind {
	case nAssert:
		return true
	case nRepeat:
		return hasAssert(n.sub)
	case nGroup:
		for _, seq := range n.alts {
			for _, x := range seq {
				if hasAssert(x) {
					return true
				}
			}
		}
	}
	return false
}

// spansUnicode is Spans for a line with non-ASCII text and a pattern with
// word boundaries: at each start, from the last match's end, the longest
// match the backtracker finds (it gives up past its step budget).
func spansUnicode(tree *syntax.Regexp, line []byte) ([][2]int, error) {
	if tree == nil {
		return nil, errTooComplex
	}
	word, _ := classSet("word")
	b := &backtracker{line: line, word: word, split: -1}
	var out [][2]int
	for s := 0; s < len(line); {
		best := -1
		b.m(tree, s, func(e int) bool {
			best = max(best, e)
			return false // every path: the longest end
		})
		if b.steps > backtrackBudget {
			return nil, errTooComplex
		}
		if best > s {
			out = append(out, [2]int{s, best})
			s = best
			continue
		}
		_, w := utf8.DecodeRune(line[s:])
		s += w
	}
	return out, nil
}

// newlineProof rewrites Go syntax so that nothing in it matches a
// newline (classes and . leave it out, a literal newline matches
// nothing); it returns src unchanged if it does not parse.
func newlineProof(src string) string {
	return rewriteSyntax(src, func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpAnyChar:
			re.Op = syntax.OpAnyCharNotNL
		case syntax.OpCharClass:
			set := runeSet(re.Rune).remove('\n')
			if len(set) == 0 {
				re.Op, re.Rune = syntax.OpNoMatch, nil
			} else {
				re.Rune = set
			}
		case syntax.OpLiteral:
			if slices.Contains(re.Rune, '\n') {
				re.Op, re.Rune = syntax.OpNoMatch, nil
			}
		}
	})
}

// rewriteSyntax parses Go syntax src, calls fix on every node of its tree
// (a node before those below it) and returns the tree as syntax again; it
// returns src unchanged if it does not parse.
func rewriteSyntax(src string, fix func(re *syntax.Regexp)) string {
	t, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return src
	}
	var walk func(re *syntax.Regexp)
	walk = func(re *syntax.Regexp) {
		fix(re)
		for _, sub := range re.Sub {
			walk(sub)
		}
	}
	walk(t)
	return t.String()
}

// invalidToNewline appends line to dst with each byte of an encoding
// error replaced by a newline (the offsets stay).
func invalidToNewline(dst, line []byte) []byte {
	for i := 0; i < len(line); {
		r, w := utf8.DecodeRune(line[i:])
		if r == utf8.RuneError && w == 1 {
			dst = append(dst, '\n')
		} else {
			dst = append(dst, line[i:i+w]...)
		}
		i += w
	}
	return dst
}

func goHasAssert(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText, syntax.OpEndText,
		syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return true
	}
	for _, sub := range re.Sub {
		if goHasAssert(sub) {
			return true
		}
	}
	return false
}

func (m *Matcher) spanRe(v int) *spanRes {
	m.spanOnce[v].Do(func() {
		sr := &m.spans[v]
		var b strings.Builder
		body(&b, m.spanNodes, v == 1)
		inner := b.String()
		if v == 1 && m.opts.Syntax == Perl {
			inner = newlineProof(inner)
		}
		src := inner
		if m.opts.Line && (m.opts.Word || !m.glibcDiffers) {
			// GNU's -x -w takes glibc's match only if it is the whole
			// line; -x alone takes any (the same on a line the dfa
			// selects, where both readings agree).
			src = "^(?:" + inner + ")$"
		}
		compile := func(src string) *regexp.Regexp {
			re, err := regexp.Compile(src)
			if err != nil {
				sr.err = translateGoError(err)
				return nil
			}
			if m.opts.Syntax != Perl {
				re.Longest()
			}
			return re
		}
		sr.search = compile(src)
		if t, err := syntax.Parse(src, syntax.Perl); err == nil {
			sr.tree = t.Simplify()
		}
		if m.opts.Word && !m.opts.Line {
			sr.anchored = compile("^(?:" + inner + ")")
			if m.opts.Syntax == Perl {
				// The match is group 1; the character before it, if
				// any, is not a word character (at the line's start, or
				// from the character before a search's start).
				const nw, end = `[^0-9A-Za-z_]`, `)(?:[^0-9A-Za-z_]|$)`
				sr.perlWord = [2]*regexp.Regexp{compile(`(?:^|` + nw + `)(` + inner + end), compile(nw + `(` + inner + end)}
			}
		}
	})
	return &m.spans[v]
}

// Spans returns the non-empty matches in line (a selected or context
// line, without its newline) that grep -o prints and --color marks, as
// GNU grep finds them: each search starts where the last match ended; -w
// shortens a match, or looks further on, until it is a whole word.
// invalid is the file's variant (not valid UTF-8).
func (m *Matcher) Spans(line []byte, invalid bool) ([][2]int, error) {
	v := 0
	if invalid {
		v = 1
	}
	if m.opts.Syntax == Perl {
		// As in GrepBuf: invalid bytes are barriers no match crosses.
		if utf8.Valid(line) {
			v = 0
		} else {
			v, line = 1, invalidToNewline(nil, line)
		}
	}
	if m.twoReadings {
		return nil, errTwoReadings
	}
	sr := m.spanRe(v)
	if sr.err != nil {
		return nil, sr.err
	}
	// Go's \b sees ASCII words only, and no edge (edges.go): the
	// backtracker finds the leftmost-longest matches with GNU's word
	// characters.
	backtrack := m.Boundary && (m.edges || !isASCII(line))
	if backtrack && sr.anchored == nil {
		return spansUnicode(sr.tree, line)
	}
	if sr.anchored == nil {
		var out [][2]int
		for _, loc := range sr.search.FindAllIndex(line, -1) {
			if loc[1] > loc[0] {
				out = append(out, [2]int{loc[0], loc[1]})
			}
		}
		return out, nil
	}
	if m.opts.Syntax == Perl {
		return perlWordSpans(sr, line), nil
	}
	ws := m.newWordSearch(sr, line)
	var out [][2]int
	for cur, from := 0, 0; cur < len(line); {
		c := cur
		if !m.wordLoop {
			c = 0 // GNU's -F has its own loop, without the short cut
		}
		s, e, ok, err := ws.first(c, from)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if e == s {
			cur, from = s+1, ws.next(s) // GNU moves on by one byte
			continue
		}
		out = append(out, [2]int{s, e})
		cur, from = e, e
	}
	return out, nil
}

// perlWordSpans is Spans for -P -w: GNU grep wraps the pattern in
// (?<!\w)(?:...)(?!\w), so a match is PCRE's first that is a whole word
// (no shortening loop). Go's wrapper reads the character before the
// match, the one before the search's start once a match has been found.
func perlWordSpans(sr *spanRes, line []byte) [][2]int {
	var out [][2]int
	for from := 0; from < len(line); {
		re, p := sr.perlWord[0], 0
		if from > 0 {
			_, n := utf8.DecodeLastRune(line[:from])
			re, p = sr.perlWord[1], from-n
		}
		loc := re.FindSubmatchIndex(line[p:])
		if loc == nil {
			break
		}
		s, e := p+loc[2], p+loc[3]
		if e == s {
			if s >= len(line) {
				break
			}
			_, n := utf8.DecodeRune(line[s:])
			from = s + n
			continue
		}
		out = append(out, [2]int{s, e})
		from = e
	}
	return out
}

// lineTrigram picks the trigram eachSelected looks for to find the lines
// worth running the regexp on: one the top-level AND requires, from the
// middle of the pattern. With -i it must be one found in ASCII-lowered
// text (see trigram.FoldsInASCII); "" if there is none.
func lineTrigram(q *trigram.Query, fold bool) string {
	if q.Op != trigram.And {
		return ""
	}
	best, bestScore := "", -1
	for _, t := range q.Trigram {
		if fold && !(trigram.FoldsInASCII(t[0]) && trigram.FoldsInASCII(t[1]) && trigram.FoldsInASCII(t[2])) {
			continue
		}
		// The rarest-looking trigram leaves the fewest lines to the regexp.
		score := 0
		for i := 0; i < 3; i++ {
			score += rarity(t[i])
		}
		if score > bestScore {
			best, bestScore = t, score
		}
	}
	return best
}

// mustLiteral returns the rarest-looking literal that every match of re
// contains (from the parts of a concatenation, at any depth, and the
// bodies of repetitions of at least one), or "".
func mustLiteral(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		if re.Flags&syntax.FoldCase != 0 || slices.Contains(re.Rune, utf8.RuneError) {
			return "" // Go matches invalid bytes as U+FFFD: no bytes to look for
		}
		return string(re.Rune)
	case syntax.OpCapture, syntax.OpPlus:
		return mustLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return mustLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		best, bestScore := "", 0
		for _, sub := range re.Sub {
			lit := mustLiteral(sub)
			score := 0
			for i := 0; i < len(lit); i++ {
				score += rarity(lit[i]) + 1
			}
			if score > bestScore {
				best, bestScore = lit, score
			}
		}
		return best
	}
	return ""
}

// commonBytes lists bytes from the most to the least frequent in source
// code and prose (a rough order: it only steers lineTrigram's choice).
const commonBytes = " \te\nt_a.osirn(l),cdh\"upm:f=g*;b/y{}w-v[]k0x1&2!q<>j+z"

// rarity ranks byte c: higher for bytes less frequent in text.
func rarity(c byte) int {
	if 'A' <= c && c <= 'Z' {
		return len(commonBytes) // capitals are rare in most lines
	}
	if i := strings.IndexByte(commonBytes, c); i >= 0 {
		return i
	}
	return len(commonBytes) + 1
}

// tree returns the parsed syntax of a variant (0 valid, 1 invalid).
func (m *Matcher) tree(v int) (*syntax.Regexp, error) {
	var err error
	m.treeOnce[v].Do(func() {
		var t *syntax.Regexp
		if t, err = syntax.Parse(m.goSyntax(v == 1, false), syntax.Perl); err == nil {
			m.trees[v] = t.Simplify()
		}
	})
	if err != nil {
		return nil, translateGoError(err)
	}
	return m.trees[v], nil
}

// re returns the regexp for content that is (or is not) valid UTF-8.
func (m *Matcher) re(data []byte) (*regexp.Regexp, error) {
	if utf8.Valid(data) {
		return m.valid, nil
	}
	m.invalidM.Do(func() {
		m.invalid, m.invErr = regexp.Compile(m.goSyntax(true, false))
		if m.invErr != nil {
			m.invErr = translateGoError(m.invErr)
		}
	})
	return m.invalid, m.invErr
}

// lineRe returns the per-line regexp of a variant (0 valid, 1 invalid)
// when every match starts at a line start, else nil.
func (m *Matcher) lineRe(v int) (*regexp.Regexp, error) {
	if !m.lineStart && m.opts.Syntax != Perl {
		return nil, nil
	}
	m.lineOnce[v].Do(func() {
		src := m.goSyntax(v == 1, true)
		m.lineRes[v], m.lineErrs[v] = regexp.Compile(src)
		if m.lineErrs[v] != nil {
			m.lineErrs[v] = translateGoError(m.lineErrs[v])
		}
	})
	return m.lineRes[v], m.lineErrs[v]
}

// MayMatch reports whether data can hold a match at all, by the trigram
// query: a fast filter for files the index did not narrow (too large to
// index, or changed since), run before the regexp. False is definite.
func (m *Matcher) MayMatch(data []byte) bool {
	if m.Query.Op == trigram.All {
		return true
	}
	if m.opts.IgnoreCase {
		data = trigram.Fold(make([]byte, 0, len(data)), data)
	}
	return m.Query.Eval(func(t string) bool { return bytes.Contains(data, []byte(t)) })
}

// cannotMatch reports whether MayMatch rules data out where scan would
// not do it faster itself: with a line prefilter (a trigram every line
// with a match holds), scan skips the whole-file check.
func (m *Matcher) cannotMatch(data []byte) bool {
	return m.lineNeedle == "" && !m.MayMatch(data)
}

// Mode is what grep reports per file.
type Mode int

const (
	ModeLines Mode = iota // matching lines (the default)
	ModeCount             // -c
	ModeFiles             // -l, -L, -q: does the file match at all
)

// FileResult is GNU grep's verdict on one file.
type FileResult struct {
	Lines  []Line // lines to print (ModeLines)
	Count  int    // selected lines (all of them for ModeCount; for the other modes at least the printed ones)
	Binary bool   // print "binary file matches" after Lines
	// Grown is GNU grep's read buffer size after this file; LateNul says
	// the result depends on the buffer size (a NUL past the first read).
	Grown   int
	LateNul bool
	// TextEnd is where the text part ends (binary mode starts: GNU grep
	// prints no line past it); BinMatch says a line past it was selected.
	TextEnd    int
	BinMatch   bool
	BinSkipped bool // -I gave the file up at TextEnd
}

// Line is one line to print: its 1-based number and its bytes (without
// the newline).
type Line struct {
	Num   int
	Text  []byte
	Start int // byte offset of the line in the file
}

// scanOptions are scan's refinements for the grep command's output.
type scanOptions struct {
	max     int  // stop after this many selected lines (-1: no limit)
	keepBad bool // keep lines with encoding errors (the printer suppresses them)
	text    bool // -a, -z: no binary part (NUL bytes are text)
	// skipBinary (-I): where the NUL is read, GNU grep gives up the file
	// as matching nothing (lines printed before it stay printed).
	skipBinary bool
}

// BufSize is GNU grep's initial read size: NUL bytes (and with them
// binary mode) are discovered one read buffer at a time.
const BufSize = 96 << 10

// readPage is GNU grep's page size: reads are page-aligned.
const readPage = 4096

// MayGrow reports whether a file of size bytes can grow GNU grep's read
// buffer: only a line longer than the buffer (less a page) does.
func MayGrow(size uint64) bool { return size > BufSize-readPage }

// BufferGrowth returns the size GNU grep's read buffer, starting at
// BufSize, grows to while reading data (long lines grow it).
func BufferGrowth(data []byte) int {
	_, grown := readModel(data, BufSize)
	return grown
}

// readModel simulates GNU grep's reads of data with a buffer of size
// bytes (GNU keeps the buffer, grown by long lines, from one file to the
// next). It returns where binary mode starts (the first line GNU reads
// after discovering a NUL byte; -1 for a text file) and the buffer size
// after reading the whole file.
func readModel(data []byte, size int) (binStart, grown int) {
	const page = readPage
	nul := bytes.IndexByte(data, 0)
	binStart = -1
	start, save := 0, 0 // start of the current read; bytes carried over
	for start < len(data) || start == 0 {
		if save+page > size {
			for size < save+page {
				size *= 2
			}
			// GNU does not allocate past what the file still holds.
			if rest := save + len(data) - start; rest >= save+page && rest < size {
				size = rest
			}
		}
		read := size + page - page*((save+16+page)/page)
		if read < page {
			read = page
		}
		end := min(start+read, len(data))
		if binStart < 0 && nul >= 0 && nul < end {
			// Lines complete before this read were grepped as text.
			binStart = bytes.LastIndexByte(data[:start], '\n') + 1
		}
		if end >= len(data) {
			break
		}
		last := bytes.LastIndexByte(data[:end], '\n')
		save = end - (last + 1)
		start = end
	}
	return binStart, size
}

// Grep runs the matcher over one file's content as GNU grep would.
func (m *Matcher) Grep(data []byte, mode Mode) (FileResult, error) {
	return m.GrepBuf(data, mode, BufSize)
}

// GrepBuf is Grep with GNU grep's read buffer at bufSize bytes (grown by
// a long line in an earlier file of the same run).
func (m *Matcher) GrepBuf(data []byte, mode Mode, bufSize int) (res FileResult, err error) {
	return m.scan(context.Background(), data, mode, bufSize, scanOptions{max: -1})
}

// scan is GrepBuf with the grep command's refinements. It stops with
// ctx's error once ctx is done (a FUSE INTERRUPT, a client gone): it
// looks every few lines, so one long line of a slow pattern is the most
// it runs on after that.
func (m *Matcher) scan(ctx context.Context, data []byte, mode Mode, bufSize int, o scanOptions) (res FileResult, err error) {
	if o.max == 0 {
		return res, nil
	}
	re, err := m.re(data)
	if err != nil {
		return res, err
	}
	textEnd := len(data)
	bin, grown := readModel(data, bufSize)
	res.Grown = grown
	res.LateNul = bin > 0
	if o.text {
		bin = -1
		res.LateNul = false
	}
	if bin >= 0 {
		textEnd = bin
	}
	res.TextEnd = textEnd
	variant := 0
	if re != m.valid {
		variant = 1
	}
	lineMatch, lineErr, err := m.lineMatcher(re, data, variant)
	if err != nil {
		return res, err
	}
	defer func() {
		if *lineErr != nil {
			err = *lineErr
		}
	}()
	stop := false
	lineNo, counted := 1, 0
	// Text part: lines are printed (unless an encoding error is met).
	err = m.eachSelected(ctx, re, lineMatch, data[:textEnd], func(s, e int) bool {
		res.Count++
		if mode == ModeFiles || res.Count == o.max {
			stop = true
		}
		if mode == ModeFiles {
			return false
		}
		if mode == ModeCount {
			return !stop
		}
		line := data[s:e]
		if !o.keepBad && !utf8.Valid(line) {
			// GNU grep 3.8 suppresses a line with an encoding error and
			// reports "binary file matches" at the end.
			res.Binary = true
			return true
		}
		lineNo += bytes.Count(data[counted:s], []byte{'\n'})
		counted = s
		res.Lines = append(res.Lines, Line{Num: lineNo, Text: line, Start: s})
		return !stop
	})
	if err != nil {
		return FileResult{}, err
	}
	if stop || bin < 0 {
		return res, nil
	}
	if o.skipBinary {
		res.Count, res.BinSkipped = 0, true
		return res, nil
	}
	if err := m.scanBinary(ctx, re, lineMatch, data[textEnd:], mode, o.max, &res); err != nil {
		return FileResult{}, err
	}
	return res, nil
}

// lineMatcher returns the line-by-line matcher scan needs where re over
// the whole buffer cannot decide (nil: it can), and where it keeps the
// first error it meets.
func (m *Matcher) lineMatcher(re *regexp.Regexp, data []byte, variant int) (lineMatch func([]byte) bool, lineErr *error, err error) {
	lineErr = new(error)
	switch {
	case m.Boundary && (m.edges || !isASCII(data)):
		tree, err := m.tree(variant)
		if err != nil {
			return nil, nil, err
		}
		word, _ := classSet("word")
		lineMatch = func(line []byte) bool {
			if isASCII(line) {
				// Go's \b is GNU's on ASCII text, and a superset of an
				// edge's lines (edges.go): only its lines need checking.
				if ok := re.Match(line); !ok || !m.edges {
					return ok
				}
			}
			ok, err := matchLineUnicode(tree, word, line)
			if err != nil {
				*lineErr = err
			}
			return ok
		}
	case m.opts.Syntax == Perl || m.lineStart && (m.lineNeedle == "" || m.opts.Invert):
		// (-P's classes may hold a newline: it runs line by line.)
		lre, err := m.lineRe(variant)
		if err != nil {
			return nil, nil, err
		}
		lineMatch = lre.Match
		if m.opts.Syntax == Perl && variant == 1 {
			// PCRE2 (GNU grep 3.8 sets PCRE2_MATCH_INVALID_UTF) matches
			// nothing on an invalid byte, and no match crosses one: the
			// invalid bytes become newlines, which the newline-proof
			// variant cannot match.
			vre, err := m.lineRe(0)
			if err != nil {
				return nil, nil, err
			}
			var scratch []byte
			lineMatch = func(line []byte) bool {
				if utf8.Valid(line) {
					return vre.Match(line)
				}
				scratch = invalidToNewline(scratch[:0], line)
				return lre.Match(scratch)
			}
		}
	}
	if m.wordConfirm {
		// The wrapper selects a superset of GNU's -w lines (wordloop.go).
		sr := m.spanRe(variant)
		if sr.err != nil {
			return nil, nil, sr.err
		}
		wrapper := lineMatch
		if wrapper == nil {
			wrapper = re.Match
		}
		if m.wordBufEnd || m.gateNodes != nil {
			// The gate (below) decides, or the loop alone: it accepts
			// only where the pattern matches, if not as a whole word
			// (a \' at the cut).
			wrapper = func([]byte) bool { return true }
		}
		lineMatch = func(line []byte) bool {
			if !wrapper(line) {
				return false
			}
			_, _, ok, err := m.newWordSearch(sr, line).first(0, 0)
			if err != nil {
				*lineErr = err
			}
			return ok
		}
	}
	if m.gateNodes != nil {
		m.gateOnce[variant].Do(func() {
			var b strings.Builder
			body(&b, m.gateNodes, variant == 1)
			src := b.String()
			if m.opts.Line {
				src = "^(?:" + src + ")$"
			}
			m.gateRes[variant], m.gateErrs[variant] = regexp.Compile(src)
		})
		if m.gateErrs[variant] != nil {
			return nil, nil, translateGoError(m.gateErrs[variant])
		}
		gate, selects := m.gateRes[variant], lineMatch
		if selects == nil {
			selects = re.Match
		}
		lineMatch = func(line []byte) bool { return gate.Match(line) && selects(line) }
	}
	return lineMatch, lineErr, nil
}

// scanBinary scans a file's binary part (from the first line GNU reads
// after finding a NUL byte): NUL bytes end lines, and output stops at the
// first match.
func (m *Matcher) scanBinary(ctx context.Context, re *regexp.Regexp, lineMatch func([]byte) bool, bin []byte, mode Mode, maxCount int, res *FileResult) error {
	zapped := make([]byte, len(bin))
	for i, c := range bin {
		if c == 0 {
			c = '\n' // a byte loop: bytes.ReplaceAll is slow on NUL-dense data
		}
		zapped[i] = c
	}
	return m.eachSelected(ctx, re, lineMatch, zapped, func(s, e int) bool {
		res.Count++
		res.BinMatch = true
		if mode == ModeLines {
			res.Binary = true
		}
		return mode == ModeCount && res.Count != maxCount
	})
}

// eachSelected calls fn(start, end) for every selected line of buf (a
// matching line, or with -v a non-matching one), in order, until fn
// returns false. Lines end at '\n'; a final line without one counts. It
// returns ctx's error once ctx is done, looking every checkLines lines
// (or, searching the whole buffer, every chunk of checkBytes).
func (m *Matcher) eachSelected(ctx context.Context, re *regexp.Regexp, lineMatch func([]byte) bool, buf []byte, fn func(s, e int) bool) error {
	n := 0
	canceled := func() bool {
		n++
		return n%checkLines == 0 && ctx.Err() != nil
	}
	if m.opts.Invert || lineMatch != nil {
		if lineMatch == nil {
			lineMatch = re.Match
		}
		for s := 0; s < len(buf); {
			if canceled() {
				return ctx.Err()
			}
			_, e := lineAt(buf, s)
			if lineMatch(buf[s:e]) != m.opts.Invert && !fn(s, e) {
				return nil
			}
			s = e + 1
		}
		return nil
	}
	if m.lineNeedle != "" {
		// Every match lies on a line holding the needle (the planner's
		// query, or the required literal, holds for the matched text
		// itself): find those lines by substring search and run the
		// regexp on them only.
		hay := buf
		if m.opts.IgnoreCase {
			hay = trigram.ASCIILower(make([]byte, 0, len(buf)), buf) // same offsets
		}
		needle := []byte(m.lineNeedle)
		for pos := 0; pos < len(buf); {
			if canceled() {
				return ctx.Err()
			}
			i := bytes.Index(hay[pos:], needle)
			if i < 0 {
				return nil
			}
			ls, le := lineAt(buf, pos+i)
			if re.Match(buf[ls:le]) && !fn(ls, le) {
				return nil
			}
			pos = le + 1
		}
		return nil
	}
	// No match crosses a line: the regexp runs over chunks of whole
	// lines, so ctx is looked at between them.
	for pos := 0; pos <= len(buf); {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := len(buf)
		if pos+checkBytes < len(buf) {
			if nl := bytes.IndexByte(buf[pos+checkBytes:], '\n'); nl >= 0 {
				end = pos + checkBytes + nl // the chunk ends before a newline
			}
		}
		loc := re.FindIndex(buf[pos:end])
		if loc == nil {
			if end == len(buf) {
				return nil
			}
			pos = end + 1
			continue
		}
		s := pos + loc[0]
		if s == len(buf) && (len(buf) == 0 || buf[len(buf)-1] == '\n') {
			return nil // the empty "line" after the final newline
		}
		ls, le := lineAt(buf, s)
		if !fn(ls, le) {
			return nil
		}
		pos = le + 1
	}
	return nil
}

// checkLines and checkBytes are how often a scan looks whether it was
// canceled: often enough for a slow pattern, seldom enough to cost
// nothing on short lines.
const (
	checkLines = 32
	checkBytes = 16 << 10
)

// lineAt returns where the line of buf holding offset i starts and ends
// (at its newline, or the end of buf).
func lineAt(buf []byte, i int) (start, end int) {
	start = bytes.LastIndexByte(buf[:i], '\n') + 1
	if end = bytes.IndexByte(buf[i:], '\n'); end < 0 {
		return start, len(buf)
	}
	return start, i + end
}
