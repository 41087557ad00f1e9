package grep

import (
	"cmp"
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Pattern syntax: padfs grep reads patterns as GNU grep does in a UTF-8
// locale and translates them into Go regexp syntax (RE2), spelling out
// what the two engines would otherwise read differently:
//
//   - BRE operators \( \) \{ \} \| \+ \? and ERE ( ) { } | + ? per POSIX
//     and GNU (in a BRE, ( ) { } | + ? are literals; a leading * is a
//     literal; ^ and $ anchor only at the ends of a pattern or group);
//   - bracket expressions per POSIX: a backslash is literal inside [ ],
//     ] first is literal, [:class:] [=c=] [.c.] are understood;
//   - POSIX classes, \w \W \s \S, -w and . use the character sets of
//     glibc's C.UTF-8 locale (posix_classes.go), not RE2's ASCII ones;
//   - -i uses GNU's case counterparts, not RE2's case folding;
//   - ERE oddities GNU accepts: a leading * + ? {n} is ignored (with
//     GNU's warning), a** nests, a{1,x} is a literal brace, a{,n} is
//     {0,n}, an unmatched ) is literal.
//
// What cannot be honoured is an *UnsupportedError that names the construct
// (back-references above all): never a silently different answer.

// Syntax selects how a pattern is read.
type Syntax int

const (
	Basic    Syntax = iota // POSIX basic regular expression, GNU flavour (grep -G, the default)
	Extended               // POSIX extended regular expression, GNU flavour (grep -E)
	Fixed                  // fixed strings (grep -F)
	Perl                   // Perl-compatible (grep -P): the part of PCRE that RE2 evaluates
)

// UnsupportedError reports syntax that GNU grep accepts but padfs grep
// cannot evaluate exactly.
type UnsupportedError struct {
	Construct string
	Why       string
}

func (e *UnsupportedError) Error() string {
	return fmt.Sprintf("unsupported %s: %s", e.Construct, e.Why)
}

// SyntaxError is a malformed pattern (GNU grep rejects it too), with GNU's
// wording.
type SyntaxError struct{ Msg string }

func (e *SyntaxError) Error() string { return e.Msg }

// maxRepeat is RE2's limit on counted repetition.
const maxRepeat = 1000

type nodeKind int

const (
	nSet    nodeKind = iota // one character from a set
	nAssert                 // zero-width assertion (Go syntax in text)
	nGroup                  // alternation of sequences
	nRepeat                 // sub{min,max}; max -1 = unbounded
)

type node struct {
	kind    nodeKind
	set     runeSet // nSet
	literal bool    // nSet came from a literal character (keeps U+FFFD)
	// startBrace: an ERE '{' at an expression's start that opens no
	// interval; glibc skips it there, so what follows is at the start too.
	startBrace bool
	text       string // nAssert
	// edge: an nAssert from \< or \> ('<' or '>'), rendered as \b where
	// its neighbour in the sequence makes that exact (see resolveEdges).
	edge rune
	// bufEnd: an nAssert from \' (glibc's buffer end), rendered as $;
	// -w tells it apart (see markBufEnds).
	bufEnd   bool
	alts     [][]*node
	sub      *node
	min, max int
	interval bool // an nRepeat from {...}
	// superAny: GNU's dfa superset reads this set as any text (., \w,
	// a bracket the dfa leaves to glibc's regex; see gateSuperset).
	superAny bool
}

// parser reads one pattern (one line of a grep pattern list).
type parser struct {
	src      []rune
	pos      int
	syn      Syntax
	fold     bool
	warn     func(string)
	depth    int
	boundary bool // uses \b \B \< \>
	// twoReadings: a construct GNU grep's dfa, which decides which lines
	// match, reads one way, and glibc's regex, which checks -w and finds
	// the matches -o prints, another: an ERE repetition right after ^ or
	// $ (^*a, a$?, ^{2}a: the dfa repeats the anchor, glibc skips the
	// operator, or the brace alone, reading the rest as text), a { where
	// an ERE starts ({, ^{x: a literal to the dfa, skipped by glibc; {1}a
	// is "a" to the dfa, "1}a" to glibc), and with -i a backslash before
	// a lowercase ASCII letter (\a: the letter to the dfa, nothing glibc
	// ever matches). The matcher reads the pattern twice (see glibc).
	twoReadings bool
	// glibc: read the constructs of twoReadings as glibc's regex does
	// (it skips a * + ? or { right after ^ or $, and a { where an ERE
	// starts, reading what follows as it comes: ^*a is ^a, {1}a is
	// "1}a"; -i's \a matches nothing), for the matches -o and --color
	// print and -w checks.
	glibc    bool
	nullData bool // grep -z: see zset
	// glibc's regcomp, which decides GNU's verdict on an ERE, skips a
	// * + ? where an expression starts (gStart: a branch's start, after
	// an anchor or a skipped one) and reads a ) right after such a
	// skipped one (gSkipped) as a literal: (*) is "Unmatched ( or \(",
	// (*)) is a group holding ")". pending counts the groups glibc still
	// sees open at that point (GNU's dfa, which selects the lines, reads
	// the ) as a close, as this parser does).
	gStart, gSkipped bool
	// defers: a construct GNU's dfa cannot decide in UTF-8 (\w \W \s
	// \S, a negated bracket, a range, [:class:], [=e=], [.c.], or a word
	// anchor), which leaves the line to glibc's regex.
	defers bool
	// bracketDefers: the last bracket parsed is such a construct.
	bracketDefers bool
	// dfaStart is GNU's dfa's laststart, which its "* at start of
	// expression" warnings read: true where a branch starts, kept by
	// anchors and * + ?, false after anything else (an interval too).
	dfaStart bool
	pending  int
	// strayClose: an ERE ) that closes no group (a literal). With -w or
	// -x GNU grep wraps the pattern in parentheses for its dfa, which
	// such a ) closes: (|) selects an empty line, -x (|) does not.
	strayClose bool
}

// zset is set as grep -z reads swapped data (NUL bytes are line ends,
// newlines are NULs): it holds NUL if it held a newline, and no newline.
func zset(s runeSet) runeSet {
	nl := s.has('\n')
	s = s.remove('\n').remove(0)
	if nl {
		s = s.add(0, 0).norm()
	}
	return s
}

// spaceSet is [:space:] with the newline (the table leaves it out: no
// line holds one, but a grep -z record does).
func spaceSet() runeSet {
	s, _ := classSet("space")
	return append(slices.Clone(s), '\n', '\n').norm()
}

// zclass is p.class for a set that may hold a newline.
func (p *parser) zclass(s runeSet) *node {
	if p.nullData {
		s = zset(s)
	}
	return p.class(s)
}

func (p *parser) eof() bool  { return p.pos >= len(p.src) }
func (p *parser) peek() rune { return p.src[p.pos] }
func (p *parser) peekAt(i int) (rune, bool) {
	if p.pos+i < len(p.src) {
		return p.src[p.pos+i], true
	}
	return 0, false
}

// parsePattern parses one pattern into a group node.
// With nullData (grep -z) the matcher reads data with NUL and newline
// bytes swapped, and every set holds NUL where GNU's holds a newline (see
// zset).
// patternFlags are what parsePattern saw that the matcher needs.
type patternFlags struct {
	boundary    bool // \b \B \< \>
	twoReadings bool // see parser.twoReadings
	defers      bool // see parser.defers
	strayClose  bool // see parser.strayClose
}

func parsePattern(pat string, syn Syntax, fold, nullData bool, warn func(string)) (*node, patternFlags, error) {
	return parseReading(pat, syn, fold, nullData, warn, false)
}

// glibcReading parses a BRE or ERE pattern as glibc's regex reads it
// (see parser.glibc).
func glibcReading(pat string, syn Syntax, fold, nullData bool) (*node, error) {
	n, _, err := parseReading(pat, syn, fold, nullData, func(string) {}, true)
	return n, err
}

func parseReading(pat string, syn Syntax, fold, nullData bool, warn func(string), glibc bool) (*node, patternFlags, error) {
	if !utf8.ValidString(pat) {
		return nil, patternFlags{}, &UnsupportedError{"pattern bytes", "the pattern is not valid UTF-8"}
	}
	p := &parser{src: []rune(pat), syn: syn, fold: fold, warn: warn, nullData: nullData, glibc: glibc}
	if syn == Perl {
		src, err := perlToGo(pat)
		if err != nil {
			return nil, patternFlags{}, err
		}
		if nullData {
			src = zsyntax(src)
		}
		if fold {
			src = "(?i:" + src + ")"
		} else {
			src = "(?:" + src + ")"
		}
		// The pattern is Go syntax already: one raw node. Its \b and \w
		// are ASCII, as PCRE's are without UCP (GNU grep 3.8).
		return &node{kind: nGroup, alts: [][]*node{{{kind: nAssert, text: src}}}}, patternFlags{}, nil
	}
	if syn == Fixed {
		var seq []*node
		for _, r := range p.src {
			seq = append(seq, p.lit(r))
		}
		return &node{kind: nGroup, alts: [][]*node{seq}}, patternFlags{}, nil
	}
	g, err := p.alternation()
	if err != nil {
		return nil, patternFlags{}, err
	}
	if !p.eof() {
		// Only an unmatched close can stop the top level.
		return nil, patternFlags{}, &SyntaxError{"Unmatched ) or \\)"}
	}
	if p.pending > 0 {
		return nil, patternFlags{}, &SyntaxError{"Unmatched ( or \\("}
	}
	return g, patternFlags{boundary: p.boundary, twoReadings: p.twoReadings, strayClose: p.strayClose, defers: p.defers || p.boundary}, nil
}

// lit is a literal character (with -i: it and its case counterparts).
func (p *parser) lit(r rune) *node {
	s := runeSet{r, r}
	if p.fold {
		s = s.foldCase()
	}
	return &node{kind: nSet, set: s, literal: true}
}

func (p *parser) class(s runeSet) *node { return &node{kind: nSet, set: s} }

// atGroupEnd reports whether the parser stands at | or ) of the current
// syntax (or the end).
func (p *parser) atBranchEnd() bool {
	if p.eof() {
		return true
	}
	r := p.peek()
	if p.syn == Extended {
		return r == '|' || (r == ')' && p.depth > 0)
	}
	if r == '\\' {
		n, ok := p.peekAt(1)
		return ok && (n == '|' || (n == ')' && p.depth > 0))
	}
	return false
}

func (p *parser) alternation() (*node, error) {
	g := &node{kind: nGroup}
	for {
		seq, err := p.sequence()
		if err != nil {
			return nil, err
		}
		g.alts = append(g.alts, seq)
		if p.eof() {
			return g, nil
		}
		if p.syn == Extended && p.peek() == '|' {
			p.pos++
			continue
		}
		if p.syn == Basic && p.peek() == '\\' {
			if n, _ := p.peekAt(1); n == '|' {
				p.pos += 2
				continue
			}
		}
		return g, nil // at a group close
	}
}

func (p *parser) sequence() ([]*node, error) {
	var seq []*node
	p.gStart, p.gSkipped, p.dfaStart = true, false, true
	for !p.atBranchEnd() {
		r := p.peek()
		var handled bool
		var err error
		if p.syn == Extended {
			seq, handled, err = p.extendedOp(seq, r)
		} else {
			seq, handled, err = p.basicOp(seq, r)
		}
		if err != nil {
			return nil, err
		}
		if handled {
			continue
		}
		// Common to both syntaxes.
		start := p.dfaStart
		p.gStart, p.gSkipped, p.dfaStart = false, false, false
		switch r {
		case '.':
			p.pos++
			var n *node
			if p.nullData {
				n = p.zclass(runeSet{0, 0x10FFFF}) // with -z, . matches a newline
			} else {
				n = p.class(runeSet{0, '\n' - 1, '\n' + 1, 0x10FFFF})
			}
			n.superAny = true
			seq = append(seq, n)
		case '[':
			s, err := p.bracket()
			if err != nil {
				return nil, err
			}
			n := p.class(s)
			n.superAny = p.bracketDefers
			p.defers = p.defers || p.bracketDefers
			seq = append(seq, n)
		case '\\':
			nd, err := p.escape()
			if err != nil {
				return nil, err
			}
			p.gStart = nd.kind == nAssert
			p.dfaStart = p.gStart && start
			seq = append(seq, nd)
		default:
			p.pos++
			seq = append(seq, p.lit(r))
		}
	}
	return seq, nil
}

// atStart: seq holds nothing, or only anchors and the braces glibc skips
// at an ERE's start ({{} and ^{{} are literals).
func atStart(seq []*node) bool {
	for _, n := range seq {
		if !n.startBrace && n.kind != nAssert {
			return false
		}
	}
	return true
}

// onlyAnchors: seq holds nothing but anchors (or nothing), as GNU's dfa
// sees the start of an expression for its warnings: anchors repeated by
// * + ? too, not by an interval.
func onlyAnchors(seq []*node) bool {
	for _, n := range seq {
		if n.kind != nAssert && (n.kind != nRepeat || n.sub.kind != nAssert || n.interval) {
			return false
		}
	}
	return true
}

// lastAnchor is the anchor (^, $, \<, ...) seq ends with, or "".
func lastAnchor(seq []*node) string {
	if len(seq) == 0 || seq[len(seq)-1].kind != nAssert {
		return ""
	}
	return seq[len(seq)-1].text
}

// extendedOp parses the ERE operator r at p (groups, repetitions,
// anchors); handled is false if r is none, for the syntax-common part.
func (p *parser) extendedOp(seq []*node, r rune) (_ []*node, handled bool, err error) {
	switch r {
	case '(':
		p.pos++
		p.depth++
		g, err := p.alternation()
		p.depth--
		if err != nil {
			return nil, false, err
		}
		if p.eof() || p.peek() != ')' {
			return nil, false, &SyntaxError{"Unmatched ( or \\("}
		}
		if p.gSkipped {
			p.pending++ // glibc: a literal ), the group goes on
		}
		p.gStart, p.gSkipped, p.dfaStart = false, false, false
		p.pos++
		seq = append(seq, g)
		return seq, true, nil
	case ')': // unmatched at top level: a literal
		p.strayClose = true
		if !p.gSkipped && p.pending > 0 {
			p.pending-- // glibc: the close of a group it still sees open
		}
		p.gStart, p.gSkipped, p.dfaStart = false, false, false
		p.pos++
		seq = append(seq, p.lit(')'))
		return seq, true, nil
	case '*', '+', '?':
		skip := p.gStart
		defer func() { p.gStart, p.gSkipped = skip, skip }()
		p.pos++
		min, max := repeatOp(r)
		if p.dfaStart { // anchors leave the expression at its start
			p.warn(fmt.Sprintf("%c at start of expression", r))
		}
		a := lastAnchor(seq)
		if len(seq) == 0 || a == `\b` || a == `\B` {
			// Nothing to repeat; GNU drops a repetition of \< \> \b \B
			// (a\b* is a\b) but repeats ^ and $ (^*a finds any a).
			return seq, true, nil
		}
		p.twoReadings = p.twoReadings || a == "^" || a == "$"
		if p.glibc && skip {
			return seq, true, nil // glibc skips it
		}
		seq[len(seq)-1] = &node{kind: nRepeat, sub: seq[len(seq)-1], min: min, max: max}
		return seq, true, nil
	case '{':
		// glibc skips a { where an expression starts, as a * there.
		skip := p.gStart
		p.gStart, p.gSkipped = false, false
		a := lastAnchor(seq)
		if a == `\b` || a == `\B` {
			// After \< \> \b \B GNU grep's two engines read a brace
			// each their own way (\b{1}x and \b{x select lines neither
			// a literal brace, a repetition nor a skipped brace explains).
			return nil, false, &UnsupportedError{"brace", "a { right after a word anchor (\\b \\B \\< \\>)"}
		}
		j := p.pos + 1
		for j < len(p.src) && (p.src[j] == ',' || '0' <= p.src[j] && p.src[j] <= '9') {
			j++
		}
		if j < len(p.src) && p.src[j] == '\\' {
			// glibc reads \, there as a comma and \1 as a back-reference
			// (0{\,, is "Invalid content of \{\}").
			return nil, false, &UnsupportedError{"brace", "a backslash inside an ERE interval ({1\\,2})"}
		}
		min, max, n, ok, err := p.interval(p.pos+1, false)
		start := atStart(seq)
		if ok && err != nil && skip && (len(seq) == 0 || a != "") {
			// glibc skips the brace; the dfa drops the interval or
			// repeats an anchor, and refuses only a maximum past
			// RE_DUP_MAX ({70000,} is text to glibc, {70000} an error).
			if max > 32767 {
				return nil, false, &SyntaxError{"regular expression too big"}
			}
			err = nil
		}
		if err == errBadInterval && (start || skip || a == "^" || a == "$") {
			// glibc: with nothing to repeat (an anchor repeats nothing),
			// a bad interval is literal.
			ok, err = false, nil
		}
		if err != nil {
			return nil, false, err
		}
		if !ok {
			p.pos++
			n := p.lit('{')
			n.startBrace = start
			// glibc's regex skips such a brace ({ alone is the empty
			// pattern there, a literal to GNU's dfa).
			p.twoReadings = p.twoReadings || start || skip
			if !p.glibc || !skip {
				seq = append(seq, n)
			}
			p.dfaStart = false
			p.gStart, p.gSkipped = skip, skip
			return seq, true, nil
		}
		if p.glibc && skip {
			p.pos++ // glibc skips the brace alone: {0} is "0}" to it
			return seq, true, nil
		}
		p.pos = n
		// The dfa repeats an anchor (^{0}a is a), or with nothing
		// before it drops the interval.
		p.twoReadings = p.twoReadings || skip || a == "^" || a == "$"
		if p.dfaStart {
			p.warn("{...} at start of expression")
		}
		p.dfaStart = false
		if len(seq) == 0 {
			return seq, true, nil
		}
		if seq[len(seq)-1].kind == nAssert {
			// An anchor repeated is the anchor, or none (^{0,2} is ^?).
			if min > 1 {
				min = 1
			}
			max = 1
		}
		seq[len(seq)-1] = &node{kind: nRepeat, sub: seq[len(seq)-1], min: min, max: max, interval: true}
		return seq, true, nil
	case '^':
		p.pos++
		p.gStart, p.gSkipped = true, false
		seq = append(seq, &node{kind: nAssert, text: "^"})
		return seq, true, nil
	case '$':
		p.pos++
		p.gStart, p.gSkipped = true, false
		seq = append(seq, &node{kind: nAssert, text: "$"})
		return seq, true, nil
	}
	return seq, false, nil
}

// basicOp is extendedOp for a BRE: \( \) \{ \+ \? and the context rules
// of * ^ $. As in glibc, a repetition right after an anchor (^ \< \b ...)
// repeats nothing and is a literal.
func (p *parser) basicOp(seq []*node, r rune) (_ []*node, handled bool, err error) {
	switch r {
	case '*':
		p.pos++
		if len(seq) == 0 || lastAnchor(seq) != "" {
			seq = append(seq, p.lit('*'))
			return seq, true, nil
		}
		seq[len(seq)-1] = &node{kind: nRepeat, sub: seq[len(seq)-1], min: 0, max: -1}
		return seq, true, nil
	case '^':
		p.pos++
		if len(seq) == 0 {
			seq = append(seq, &node{kind: nAssert, text: "^"})
		} else {
			seq = append(seq, p.lit('^'))
		}
		return seq, true, nil
	case '$':
		p.pos++
		if p.atBranchEnd() {
			seq = append(seq, &node{kind: nAssert, text: "$"})
		} else {
			seq = append(seq, p.lit('$'))
		}
		return seq, true, nil
	case '\\':
		n, ok := p.peekAt(1)
		if !ok {
			return seq, false, nil // trailing backslash: reported below
		}
		switch n {
		case '(':
			p.pos += 2
			p.depth++
			g, err := p.alternation()
			p.depth--
			if err != nil {
				return nil, false, err
			}
			if c, _ := p.peekAt(1); p.eof() || p.peek() != '\\' || c != ')' {
				return nil, false, &SyntaxError{"Unmatched ( or \\("}
			}
			p.pos += 2
			seq = append(seq, g)
			return seq, true, nil
		case ')': // depth 0 (atBranchEnd handles depth > 0)
			return nil, false, &SyntaxError{"Unmatched ) or \\)"}
		case '{':
			if a := lastAnchor(seq); (a == `\b` || a == `\B`) && !onlyAnchors(seq) {
				// After text and a word anchor glibc reads an
				// interval (0\B\{x is GNU's "invalid content");
				// what one repeats of a word anchor is unclear.
				if _, _, _, ok, err := p.interval(p.pos+2, true); ok && err == nil {
					return nil, false, &UnsupportedError{"brace", "a \\{ right after a word anchor (\\b \\B \\< \\>)"}
				}
				return nil, false, &SyntaxError{"invalid content of \\{\\}"}
			}
			if len(seq) == 0 || lastAnchor(seq) != "" {
				p.pos += 2
				seq = append(seq, p.lit('{'))
				return seq, true, nil
			}
			min, max, end, ok, err := p.interval(p.pos+2, true)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				return nil, false, &SyntaxError{"Unmatched \\{"}
			}
			p.pos = end
			seq[len(seq)-1] = &node{kind: nRepeat, sub: seq[len(seq)-1], min: min, max: max}
			return seq, true, nil
		case '+', '?':
			p.pos += 2
			if len(seq) == 0 || lastAnchor(seq) != "" {
				seq = append(seq, p.lit(n))
				return seq, true, nil
			}
			min, max := repeatOp(n)
			seq[len(seq)-1] = &node{kind: nRepeat, sub: seq[len(seq)-1], min: min, max: max}
			return seq, true, nil
		}
	}
	return seq, false, nil
}

func repeatOp(r rune) (int, int) {
	switch r {
	case '*':
		return 0, -1
	case '+':
		return 1, -1
	}
	return 0, 1 // '?'
}

// errBadInterval is GNU's (glibc's) error for a malformed interval.
var errBadInterval = &SyntaxError{"Invalid content of \\{\\}"}

// interval parses "m}", "m,}", ",n}", "m,n}" starting at i (after the
// brace); BRE intervals end with "\}". ok is false when the text is not an
// interval (in an ERE the brace is then a literal).
func (p *parser) interval(i int, bre bool) (min, max, end int, ok bool, err error) {
	num := func() (int, bool) {
		start := i
		for i < len(p.src) && p.src[i] >= '0' && p.src[i] <= '9' {
			i++
		}
		if i == start {
			return -1, false
		}
		v, e := strconv.Atoi(string(p.src[start:i]))
		if e != nil || v > 32767 {
			v = 32768
		}
		return v, true
	}
	lo, hasLo := num()
	hi := lo
	comma := i < len(p.src) && p.src[i] == ','
	if comma {
		i++
		var hasHi bool
		if hi, hasHi = num(); !hasHi {
			hi = -1
		}
		if !hasLo {
			lo = 0
		}
	} else if !hasLo {
		if !bre && i < len(p.src) && p.src[i] == '}' {
			return 0, 0, 0, false, errBadInterval // {}
		}
		return 0, 0, 0, false, nil
	}
	if bre {
		if i+1 >= len(p.src) || p.src[i] != '\\' || p.src[i+1] != '}' {
			if i >= len(p.src) || (i+1 >= len(p.src) && p.src[i] == '\\') {
				return 0, 0, 0, false, nil
			}
			return 0, 0, 0, false, errBadInterval
		}
		i += 2
	} else {
		// As glibc (RE_INVALID_INTERVAL_ORD): what is no interval is
		// literal, but a second comma ({,, {1,2,3}) is an error.
		if comma && i < len(p.src) && p.src[i] == ',' {
			return 0, 0, 0, false, errBadInterval
		}
		if i >= len(p.src) || p.src[i] != '}' {
			return 0, 0, 0, false, nil
		}
		i++
	}
	if hi >= 0 && lo > hi {
		return 0, 0, 0, false, errBadInterval // glibc's REG_BADBR comes first
	}
	// Past these the counts are still returned: an interval the dfa
	// drops, or one of an anchor, need no engine to repeat it.
	if lo > 32767 || hi > 32767 {
		return lo, hi, i, true, errTooBig
	}
	if lo > maxRepeat || hi > maxRepeat {
		return lo, hi, i, true, &UnsupportedError{"repetition count",
			fmt.Sprintf("{%d,%d} exceeds the %d that Go's regexp engine accepts", lo, hi, maxRepeat)}
	}
	return lo, hi, i, true, nil
}

// errTooBig is glibc's REG_ESIZE, a count past RE_DUP_MAX (32767).
var errTooBig = &SyntaxError{"Regular expression too big"}

// escape parses a backslash sequence outside brackets (the BRE operators
// are handled by sequence).
func (p *parser) escape() (*node, error) {
	n, ok := p.peekAt(1)
	if !ok {
		return nil, &SyntaxError{"Trailing backslash"}
	}
	p.pos += 2
	word, _ := classSet("word")
	space := spaceSet()
	switch n {
	case '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return nil, &UnsupportedError{"back-reference \\" + string(n),
			"back-references are not regular; Go's regexp engine (RE2) cannot evaluate them (use GNU grep)"}
	case '<', '>':
		p.boundary = true
		return &node{kind: nAssert, text: `\b`, edge: n}, nil
	case 'b', 'B':
		p.boundary = true
		if n == 'B' {
			return &node{kind: nAssert, text: `\B`}, nil
		}
		return &node{kind: nAssert, text: `\b`}, nil
	case '`':
		return &node{kind: nAssert, text: "^"}, nil
	case '\'':
		return &node{kind: nAssert, text: "$", bufEnd: true}, nil
	case 'w', 'W', 's', 'S':
		set := map[rune]runeSet{'w': word, 'W': word.negate(), 's': space, 'S': space.negate()}[n]
		c := p.zclass(set)
		c.superAny, p.defers = true, true
		return c, nil
	}
	if p.fold && 'a' <= n && n <= 'z' {
		p.twoReadings = true
		if p.glibc {
			return &node{kind: nSet}, nil // nothing glibc matches
		}
	}
	return p.lit(n), nil
}

// bracket parses a POSIX bracket expression at p.pos ('[').
func (p *parser) bracket() (runeSet, error) {
	unmatched := &SyntaxError{"Unmatched [, [^, [:, [., or [="}
	i := p.pos + 1
	negate := false
	if i < len(p.src) && p.src[i] == '^' {
		negate = true
		i++
	}
	p.bracketDefers = negate
	var set runeSet
	first := true
	// As GNU's dfa: [:space:] (first and last a colon, other
	// characters, no class or range) is a mistake for [[:space:]].
	colons := colonState(0)
	if i < len(p.src) && p.src[i] == ':' {
		colons |= colonFirst
	}
	for {
		if i >= len(p.src) {
			return nil, unmatched
		}
		r := p.src[i]
		if r == ']' && !first {
			i++
			break
		}
		first = false
		colons &^= colonLast
		var lo rune
		if r == '[' && i+1 < len(p.src) && (p.src[i+1] == ':' || p.src[i+1] == '=' || p.src[i+1] == '.') {
			var cs runeSet
			var err error
			if cs, lo, i, err = p.bracketName(i); err != nil {
				return nil, err
			}
			colons |= colonOther
			p.bracketDefers = true
			if cs != nil {
				set = append(set, cs...)
				if rangeFollows(p.src, i) {
					return nil, &SyntaxError{"Invalid range end"} // a class cannot start a range
				}
				continue
			}
		} else {
			lo = r
			i++
		}
		// A range?
		if i+1 < len(p.src) && p.src[i] == '-' && p.src[i+1] != ']' {
			i++
			hi := p.src[i]
			if hi == '[' && i+1 < len(p.src) && p.src[i+1] == ':' {
				return nil, &SyntaxError{"Invalid range end"} // nor end one
			}
			if hi == '[' && i+1 < len(p.src) && (p.src[i+1] == '.' || p.src[i+1] == '=') {
				kind := p.src[i+1]
				end := bracketEnd(p.src, i+2, kind)
				if end < 0 {
					return nil, unmatched
				}
				rs := []rune(string(p.src[i+2 : end]))
				if len(rs) != 1 {
					return nil, &UnsupportedError{"collating element in a range", "not supported"}
				}
				hi = rs[0]
				i = end + 2
			} else {
				i++
			}
			if lo > unicode.MaxASCII || hi > unicode.MaxASCII {
				// glibc 2.36's C.UTF-8 collates nothing but ASCII in
				// a range: [a-é] is GNU grep's error there.
				return nil, &SyntaxError{"Invalid collation character"}
			}
			if p.fold {
				// glibc's -i translates the pattern's ASCII letters to
				// upper case first: [a-A] is [A-A], [_-A] refused.
				lo, hi = asciiUpper(lo), asciiUpper(hi)
			}
			if hi < lo || rangeFollows(p.src, i) {
				// GNU refuses a range that starts where one ends: [a-c-e].
				return nil, &SyntaxError{"Invalid range end"}
			}
			set = append(set, lo, hi)
			colons |= colonOther
			p.bracketDefers = true
			continue
		}
		set = append(set, lo, lo)
		colons |= colonChar(lo)
	}
	if colons == colonFirst|colonLast|colonChars {
		return nil, &SyntaxError{"character class syntax is [[:space:]], not [:space:]"}
	}
	p.pos = i
	set = set.norm()
	if p.fold {
		set = set.foldCase()
	}
	if negate {
		set = set.negate()
	}
	if p.nullData {
		return zset(set), nil
	}
	return set.remove('\n'), nil
}

func asciiUpper(r rune) rune {
	if r >= 'a' && r <= 'z' {
		return r - 'a' + 'A'
	}
	return r
}

// bracketName reads the [:class:] (its set), [.c.] or [=c=] (its
// character) at src[i] inside a bracket expression; end is the index
// after it.
func (p *parser) bracketName(i int) (set runeSet, c rune, end int, err error) {
	kind := p.src[i+1]
	e := bracketEnd(p.src, i+2, kind)
	if e < 0 {
		return nil, 0, 0, &SyntaxError{"Unmatched [, [^, [:, [., or [="}
	}
	name := string(p.src[i+2 : e])
	end = e + 2
	if kind != ':' {
		// glibc 2.36's C.UTF-8 knows one collating element per ASCII
		// character and no other ([.space.], [=é=]: GNU's error).
		rs := []rune(name)
		if len(rs) != 1 || rs[0] > unicode.MaxASCII {
			return nil, 0, 0, &SyntaxError{"Invalid collation character"}
		}
		return nil, rs[0], end, nil
	}
	if p.fold && (name == "upper" || name == "lower") {
		name = "alpha"
	}
	cs, ok := classSet(name)
	if !ok || name == "word" {
		return nil, 0, 0, &SyntaxError{"Invalid character class name"}
	}
	if name == "space" || name == "cntrl" {
		// The tables leave the newline out (no line holds one); a grep
		// -z record may.
		cs = append(slices.Clone(cs), '\n', '\n').norm()
	}
	return cs, 0, end, nil
}

// colonState is what GNU's dfa notes of a bracket expression to catch
// [:space:] written for [[:space:]].
type colonState uint8

const (
	colonFirst colonState = 1 << iota // its first character is a colon
	colonLast                         // so is the last one
	colonChars                        // it holds another character
	colonOther                        // a range, class, or [.c.] / [=c=]
)

func colonChar(r rune) colonState {
	if r == ':' {
		return colonLast
	}
	return colonChars
}

// rangeFollows reports whether src[i:] is a range's "-" (a "-" not
// closing the bracket expression).
func rangeFollows(src []rune, i int) bool {
	return i+1 < len(src) && src[i] == '-' && src[i+1] != ']'
}

// render writes n as Go regexp syntax. In the invalid variant (files that
// are not valid UTF-8), sets from . and classes leave out U+FFFD, which is
// how Go's engine sees an invalid byte: GNU grep never matches an encoding
// error with . or a class.
func render(b *strings.Builder, n *node, invalid bool) {
	switch n.kind {
	case nSet:
		s := n.set
		if !n.literal {
			s = s.remove('\n')
			if invalid {
				s = s.remove(utf8.RuneError)
			}
		}
		b.WriteString(s.goClass())
	case nAssert:
		b.WriteString(n.text)
	case nGroup:
		b.WriteString("(?:")
		for i, seq := range n.alts {
			if i > 0 {
				b.WriteByte('|')
			}
			for _, x := range seq {
				render(b, x, invalid)
			}
		}
		b.WriteString(")")
	case nRepeat:
		if n.sub.kind == nSet || n.sub.kind == nGroup {
			render(b, n.sub, invalid)
		} else {
			b.WriteString("(?:")
			render(b, n.sub, invalid)
			b.WriteString(")")
		}
		switch {
		case n.min == 0 && n.max == -1:
			b.WriteByte('*')
		case n.min == 1 && n.max == -1:
			b.WriteByte('+')
		case n.min == 0 && n.max == 1:
			b.WriteByte('?')
		case n.max == -1:
			fmt.Fprintf(b, "{%d,}", n.min)
		case n.min == n.max:
			fmt.Fprintf(b, "{%d}", n.min)
		default:
			fmt.Fprintf(b, "{%d,%d}", n.min, n.max)
		}
	}
}

// bracketEnd returns the index of the kind in the first "kind]" at or
// after from (the end of "[:name:]", "[=c=]" or "[.c.]"), or -1.
func bracketEnd(src []rune, from int, kind rune) int {
	for j := from; j+1 < len(src); j++ {
		if src[j] == kind && src[j+1] == ']' {
			return j
		}
	}
	return -1
}

// perlToGo translates a grep -P pattern into Go syntax. RE2 reads most of
// Perl's syntax as PCRE does; the escapes it reads differently are
// spelled out (\s has VT in PCRE, \v \h \R \N are classes, \Z is \z on a
// line), and what it cannot evaluate is an *UnsupportedError naming the
// construct: look-around, back-references, possessive quantifiers, atomic
// groups, recursion, conditionals, \K, \G, backtracking verbs.
func perlToGo(pat string) (string, error) {
	var b strings.Builder
	inClass, quant := false, false
	// In a class: whether an item came yet, whether the last one was a
	// set (\d, [:alpha:], ...), and whether a '-' after an item waits for
	// a range's end. PCRE2 refuses a range from or to a set ([\d-z],
	// [a-\d]).
	var item, lastSet, inRange bool
	rangeFromSet := &SyntaxError{"invalid range in character class"}
	// PCRE2 refuses to repeat an assertion (^* \b+ $?), where Go's
	// engine repeats the empty match.
	notRepeatable := &SyntaxError{"quantifier does not follow a repeatable item"}
	assertion := false
	open := true // at the start, or right after ( or |: nothing to repeat
	for i := 0; i < len(pat); i++ {
		c := pat[i]
		wasQuant, wasAssertion, wasOpen := quant, assertion, open
		quant, assertion, open = false, false, false
		if c == '\\' && i+1 < len(pat) {
			set := inClass && strings.IndexByte("dDwWsShHvVpP", pat[i+1]) >= 0
			if set && inRange {
				return "", rangeFromSet
			}
			assertion = !inClass && strings.IndexByte("bBAzZ", pat[i+1]) >= 0
			var err error
			if i, err = perlEscape(&b, pat, i, inClass); err != nil {
				return "", err
			}
			item, lastSet, inRange = true, set, false
			continue
		}
		if wasAssertion && !inClass && (c == '*' || c == '+' || c == '?' || c == '{' && pcreQuantifier(pat[i:])) {
			return "", notRepeatable
		}
		if wasOpen && !inClass && c == '{' && pcreQuantifier(pat[i:]) {
			return "", notRepeatable // Go's engine reads {1} there as text
		}
		if !inClass && c == '{' && pcreQuantifier(pat[i:]) {
			// Go's engine reads a count with a leading zero ({00},
			// {1,02}) as text; PCRE as the number.
			end := i + strings.IndexByte(pat[i:], '}')
			lo, hi, comma := strings.Cut(pat[i+1:end], ",")
			b.WriteByte('{')
			b.WriteString(trimZeros(lo))
			if comma {
				b.WriteByte(',')
				if hi != "" {
					b.WriteString(trimZeros(hi))
				}
			}
			b.WriteByte('}')
			i, quant = end, true
			continue
		}
		if inClass {
			switch {
			case c == '[' && i+1 < len(pat) && strings.IndexByte(":.=", pat[i+1]) >= 0:
				end, ok := pcrePosix(pat, i+1)
				if ok && pat[i+1] != ':' {
					return "", &SyntaxError{"POSIX collating elements are not supported"}
				}
				if ok {
					if inRange {
						return "", rangeFromSet
					}
					b.WriteString(pat[i : end+2]) // [:name:], which Go knows too
					i = end + 1
					item, lastSet = true, true
					continue
				}
				// No class name (PCRE2 reads [[:]:] as [[:] then ":]"):
				// a literal [, escaped, or Go would read a class name.
				item, lastSet, inRange = true, false, false
				b.WriteString(`\[`)
				continue
			case c == ']':
				inClass = false
			case c == '-' && item && !inRange && i+1 < len(pat) && pat[i+1] != ']':
				if lastSet {
					return "", rangeFromSet
				}
				inRange = true
				b.WriteByte(c)
				continue
			}
			item, lastSet, inRange = true, false, false
			b.WriteByte(c)
			continue
		}
		switch c {
		case '[':
			if len(pat)-i > 3 && strings.IndexByte(":.=", pat[i+1]) >= 0 {
				if _, ok := pcrePosix(pat, i+1); ok && pat[i+1] == ':' {
					return "", &SyntaxError{"POSIX named classes are supported only within a class"}
				} else if ok {
					return "", &SyntaxError{"POSIX collating elements are not supported"}
				}
			}
			inClass, item, lastSet, inRange = true, false, false, false
			b.WriteByte(c)
			if i+1 < len(pat) && pat[i+1] == '^' {
				b.WriteByte('^')
				i++
			}
			if i+1 < len(pat) && pat[i+1] == ']' {
				b.WriteString(`\]`) // a leading ] is literal
				i++
				item = true
			}
			continue
		case '^', '$':
			assertion = true
		case '*', '?', '}':
			if c == '?' && wasQuant {
				break // non-greedy
			}
			quant = true
		case '+':
			if wasQuant {
				return "", perlUnsupported("possessive quantifier")
			}
			quant = true
		case '(':
			if err := perlGroup(pat[i+1:]); err != nil {
				return "", err
			}
			open = true
		case '|':
			open = true
		}
		b.WriteByte(c)
	}
	src := b.String()
	if _, err := syntax.Parse(src, syntax.Perl); err != nil {
		var se *syntax.Error
		if errors.As(err, &se) && (se.Code == syntax.ErrInvalidRepeatSize || se.Code == syntax.ErrLarge || se.Code == syntax.ErrNestingDepth) {
			// Within PCRE's limits, past RE2's ({1001}).
			return "", &UnsupportedError{"expression size", err.Error() + " (Go's regexp engine allows repetition counts up to 1000)"}
		}
		return "", &SyntaxError{err.Error()}
	}
	return src, nil
}

// pcreQuantifier reports whether s starts with a counted quantifier as
// PCRE2 10.42 reads one: {n}, {n,} or {n,m} (anything else is literal).
func pcreQuantifier(s string) bool {
	i, digits := 1, 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
	}
	if digits == 0 || i >= len(s) {
		return false
	}
	if s[i] == ',' {
		for i++; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		}
	}
	return i < len(s) && s[i] == '}'
}

// trimZeros drops a decimal number's leading zeros ("007" is "7", "00" "0").
func trimZeros(n string) string {
	if t := strings.TrimLeft(n, "0"); t != "" {
		return t
	}
	return "0"
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// nonASCII is every non-ASCII character, as Go class contents.
const nonASCII = `\x{80}-\x{10FFFF}`

// PCRE's \s, \v and \h, as Go class contents.
const (
	pcreSpace  = `\t\n\x0B\f\r `
	pcreVSpace = `\n\x0B\f\r\x{85}\x{2028}\x{2029}`
	pcreHSpace = `\t \x{A0}\x{1680}\x{180E}\x{2000}-\x{200A}\x{202F}\x{205F}\x{3000}`
)

// complementClass is the class contents that match what set (class
// contents) does not, as ranges.
func complementClass(set string) string {
	re, err := syntax.Parse("[^"+set+"]", syntax.Perl)
	if err != nil || re.Op != syntax.OpCharClass {
		panic("complementClass: " + set)
	}
	var b strings.Builder
	for i := 0; i+1 < len(re.Rune); i += 2 {
		fmt.Fprintf(&b, `\x{%x}-\x{%x}`, re.Rune[i], re.Rune[i+1])
	}
	return b.String()
}

// perlUnsupported is the error for a PCRE construct RE2 cannot evaluate.
func perlUnsupported(what string) error {
	return &UnsupportedError{what, "Go's regexp engine (RE2) cannot evaluate it (use GNU grep -P)"}
}

// perlEscape translates the escape at pat[i] ('\\' and the byte after
// it) into b and returns the index of its last byte.
func perlEscape(b *strings.Builder, pat string, i int, inClass bool) (int, error) {
	d := pat[i+1]
	i++
	cls := func(set string, negate bool) {
		switch {
		case inClass && !negate:
			b.WriteString(set)
		case inClass:
			b.WriteString(complementClass(set)) // Go has no \H \V, its \S holds \v
		case negate:
			b.WriteString("[^" + set + "]")
		default:
			b.WriteString("[" + set + "]")
		}
	}
	if d >= utf8.RuneSelf {
		// PCRE: a backslash before a non-ASCII character quotes it.
		_, w := utf8.DecodeRuneInString(pat[i:])
		b.WriteString(regexp.QuoteMeta(pat[i : i+w]))
		return i + w - 1, nil
	}
	if inClass {
		// PCRE2 in a class: \b is a backspace, \g a g; assertions and
		// the like are errors.
		switch d {
		case 'b':
			b.WriteString(`\x08`)
			return i, nil
		case 'g':
			b.WriteByte('g')
			return i, nil
		case 'N':
			return i, &SyntaxError{`\N is not supported in a class`}
		case 'B', 'A', 'z', 'Z', 'G', 'K', 'C', 'k', 'X', 'R':
			return i, &SyntaxError{"escape sequence is invalid in character class"}
		}
	}
	if d == '0' || inClass && '1' <= d && d <= '7' {
		// An octal escape: up to three digits (Go's wants a leading 0
		// or more than one digit).
		n := 1
		for n < 3 && i+n < len(pat) && '0' <= pat[i+n] && pat[i+n] <= '7' {
			n++
		}
		v, _ := strconv.ParseUint(pat[i:i+n], 8, 32)
		fmt.Fprintf(b, `\x{%x}`, v)
		return i + n - 1, nil
	}
	if inClass && (d == '8' || d == '9') {
		b.WriteByte(d) // PCRE: the digit itself
		return i, nil
	}
	switch d {
	case '1', '2', '3', '4', '5', '6', '7', '8', '9':
		if !inClass {
			return i, perlUnsupported("back-reference \\" + string(d))
		}
	case 'g', 'k':
		return i, perlUnsupported("back-reference \\" + string(d))
	case 'K', 'G', 'X', 'C':
		return i, perlUnsupported("\\" + string(d))
	case 's', 'S':
		if d == 'S' && !inClass {
			b.WriteString(`[^` + pcreSpace + nonASCII + `]`)
			return i, nil
		}
		cls(pcreSpace, d == 'S')
		return i, nil
	case 'W', 'D':
		// GNU grep 3.8's PCRE2 (10.42, JIT, invalid UTF-8 allowed) never
		// matches a non-ASCII character with \S \W \D outside a class
		// (inside one it does): \S does not match é.
		if !inClass {
			set := map[byte]string{'W': `0-9A-Za-z_`, 'D': `0-9`}[d]
			b.WriteString(`[^` + set + nonASCII + `]`)
			return i, nil
		}
	case 'v', 'V':
		cls(pcreVSpace, d == 'V')
		return i, nil
	case 'h', 'H':
		cls(pcreHSpace, d == 'H')
		return i, nil
	case 'N':
		if !inClass {
			b.WriteString(`[^\n]`)
			return i, nil
		}
	case 'R':
		if !inClass {
			b.WriteString(`(?:\r\n|[` + pcreVSpace + `])`)
			return i, nil
		}
	case 'Z':
		if !inClass {
			b.WriteString(`\z`)
			return i, nil
		}
	case 'Q':
		end := strings.Index(pat[i+1:], `\E`)
		if end < 0 {
			end = len(pat) - i - 1
		}
		b.WriteString(regexp.QuoteMeta(pat[i+1 : i+1+end]))
		i += end + 2
		return i, nil
	case 'E':
		return i, nil // a stray \E is nothing in PCRE
	case 'x':
		// PCRE's \x takes up to two hex digits, none meaning NUL
		// (\x is \x00, \xg NUL and g); Go's wants exactly two. \x{...}
		// is the same in both.
		if i+1 < len(pat) && pat[i+1] == '{' {
			break
		}
		n := 0
		for n < 2 && i+1+n < len(pat) && isHex(pat[i+1+n]) {
			n++
		}
		fmt.Fprintf(b, `\x{%s}`, cmp.Or(pat[i+1:i+1+n], "0"))
		return i + n, nil
	case 'e':
		b.WriteString(`\x{1b}`) // escape, which Go's syntax lacks
		return i, nil
	case 'o':
		// \o{17}: octal, any number of digits.
		if i+1 >= len(pat) || pat[i+1] != '{' {
			return i, &SyntaxError{"missing opening brace after \\o"}
		}
		end := strings.IndexByte(pat[i+1:], '}')
		if end < 0 {
			return i, &SyntaxError{"missing } after \\o{"}
		}
		digits := pat[i+2 : i+1+end]
		if digits == "" {
			return i, &SyntaxError{"digits missing in \\x{} or \\o{} or \\N{U+}"}
		}
		v, err := strconv.ParseUint(digits, 8, 32)
		if err != nil || v > unicode.MaxRune {
			return i, &SyntaxError{"non-octal character in \\o{} (closing brace missing?)"}
		}
		fmt.Fprintf(b, `\x{%x}`, v)
		return i + 1 + end, nil
	case 'c':
		// A control character: PCRE2 upper-cases a printable ASCII
		// character and flips its bit 6 (\ca and \cA are \x01).
		if i+1 >= len(pat) {
			return i, &SyntaxError{`\c at end of pattern`}
		}
		c := pat[i+1]
		if c < ' ' || c > '~' {
			return i, &SyntaxError{"\\c must be followed by a printable ASCII character"}
		}
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		fmt.Fprintf(b, `\x{%x}`, c^0x40)
		return i + 1, nil
	}
	b.WriteByte('\\')
	b.WriteByte(d)
	return i, nil
}

// perlGroup refuses the group constructs and inline flags RE2 cannot
// evaluate; rest follows the '('.
func perlGroup(rest string) error {
	for _, k := range []struct{ prefix, what string }{
		{"?=", "look-ahead (?="}, {"?!", "look-ahead (?!"}, {"?<=", "look-behind (?<="},
		{"?<!", "look-behind (?<!"}, {"?>", "atomic group (?>"}, {"?|", "branch reset (?|"},
		{"?(", "conditional (?("}, {"?R", "recursion (?R)"}, {"?&", "recursion (?&"},
		{"?P>", "recursion (?P>"}, {"?P=", "back-reference (?P="}, {"?#", "comment (?#"}, {"*", "verb (*"},
	} {
		if strings.HasPrefix(rest, k.prefix) {
			return perlUnsupported(k.what)
		}
	}
	if len(rest) > 1 && rest[0] == '?' && (rest[1] >= '0' && rest[1] <= '9' || rest[1] == '+' || rest[1] == '-' && len(rest) > 2 && rest[2] >= '0' && rest[2] <= '9') {
		return perlUnsupported("recursion (?" + rest[1:2])
	}
	if len(rest) > 1 && rest[0] == '?' {
		// Inline flags: RE2 knows i, m, s, U.
		for j := 1; j < len(rest) && rest[j] != ')' && rest[j] != ':'; j++ {
			if f := rest[j]; f != 'i' && f != 'm' && f != 's' && f != 'U' && f != '-' && f != '<' && f != 'P' {
				return perlUnsupported("inline flag (?" + string(f) + ")")
			} else if f == '<' || f == 'P' {
				break // a named group
			}
		}
	}
	return nil
}

// pcrePosix is PCRE2's check_posix_syntax: whether pat[i] (':', '.' or
// '=' after a '[') opens a POSIX [:name:], [.x.] or [=x=]; end is the
// index of its closing terminator, just before the ']'.
func pcrePosix(pat string, i int) (end int, ok bool) {
	term := pat[i]
	for j := i + 1; len(pat)-j >= 2; j++ {
		switch {
		case pat[j] == '\\' && (pat[j+1] == ']' || pat[j+1] == '\\'):
			j++
		case pat[j] == '[' && pat[j+1] == term || pat[j] == ']':
			return 0, false
		case pat[j] == term && pat[j+1] == ']':
			return j, true
		}
	}
	return 0, false
}

// zsyntax rewrites -P's Go syntax for grep -z's swapped data: a class
// holds NUL where it held a newline (PCRE's . does not match one), a
// newline escape is a NUL, a NUL escape matches nothing.
func zsyntax(src string) string {
	return rewriteSyntax(src, func(re *syntax.Regexp) {
		switch re.Op {
		case syntax.OpAnyCharNotNL:
			re.Op, re.Rune = syntax.OpCharClass, []rune{1, '\n' - 1, '\n' + 1, 0x10FFFF}
		case syntax.OpAnyChar:
			re.Op, re.Rune = syntax.OpCharClass, []rune{0, '\n' - 1, '\n' + 1, 0x10FFFF}
		case syntax.OpCharClass:
			if set := zset(runeSet(re.Rune)); len(set) == 0 {
				re.Op, re.Rune = syntax.OpNoMatch, nil
			} else {
				re.Rune = set
			}
		case syntax.OpLiteral:
			if slices.Contains(re.Rune, 0) {
				re.Op, re.Rune = syntax.OpNoMatch, nil
				break
			}
			for i, r := range re.Rune {
				if r == '\n' {
					re.Rune[i] = 0
				}
			}
		}
	})
}
