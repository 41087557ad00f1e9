package trigram

import (
	"sort"
	"strings"
	"unicode/utf8"

	"regexp/syntax"
)

// The planner turns a regexp into a boolean query over trigrams that every
// file with a match must satisfy: the idea of Russ Cox's codesearch
// ("Regular Expression Matching with a Trigram Index", 2012), written for
// padfs. It walks the syntax tree Go compiled and computes, per node:
//
//	canEmpty  the node can match the empty string
//	exact     the complete set of strings it matches, when small
//	prefix    otherwise: a set of strings every match begins with
//	suffix    ... and ends with
//	match     a trigram query any text containing a match satisfies
//
// Sets that grow too large or strings that grow long are turned into
// trigram conditions (AND over a string's trigrams, OR over the set) and
// trimmed, so the analysis stays small while keeping as many trigrams as
// the pattern's literals give. Strings are UTF-8 bytes; trigrams are byte
// trigrams. In fold mode (-i) every rune is mapped by Canon first, and the
// query is meant for the folded trigrams of the index.

// Op is the kind of a Query node.
type Op int

const (
	All  Op = iota // every file (no condition)
	None           // no file
	And            // every trigram and every sub-query
	Or             // some trigram or some sub-query
)

// Query is a boolean combination of trigrams.
type Query struct {
	Op      Op
	Trigram []string
	Sub     []*Query
}

var (
	allQuery  = &Query{Op: All}
	noneQuery = &Query{Op: None}
)

// String renders the query for tests and debugging, e.g. `"abc" "bcd"`
// for AND and `("abc"|"xyz")` for OR.
func (q *Query) String() string {
	switch q.Op {
	case All:
		return "+"
	case None:
		return "-"
	}
	var parts []string
	for _, t := range q.Trigram {
		parts = append(parts, strconvQuote(t))
	}
	for _, s := range q.Sub {
		parts = append(parts, s.String())
	}
	if q.Op == And {
		return strings.Join(parts, " ")
	}
	return "(" + strings.Join(parts, "|") + ")"
}

func strconvQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f && c != '"' && c != '\\' {
			b.WriteByte(c)
		} else {
			b.WriteString(`\x`)
			b.WriteByte("0123456789abcdef"[c>>4])
			b.WriteByte("0123456789abcdef"[c&15])
		}
	}
	b.WriteByte('"')
	return b.String()
}

// and returns q AND r, simplified.
func (q *Query) and(r *Query) *Query { return q.combine(And, r) }

// or returns q OR r, simplified.
func (q *Query) or(r *Query) *Query { return q.combine(Or, r) }

func (q *Query) combine(op Op, r *Query) *Query {
	// Identity and absorbing elements: All for AND, None for OR.
	identity, absorb := All, None
	if op == Or {
		identity, absorb = None, All
	}
	switch {
	case q.Op == absorb || r.Op == absorb:
		if op == And {
			return noneQuery
		}
		return allQuery
	case q.Op == identity:
		return r
	case r.Op == identity:
		return q
	}
	out := &Query{Op: op}
	for _, x := range []*Query{q, r} {
		if x.Op == op {
			out.Trigram = append(out.Trigram, x.Trigram...)
			out.Sub = append(out.Sub, x.Sub...)
		} else if len(x.Sub) == 0 && len(x.Trigram) == 1 {
			out.Trigram = append(out.Trigram, x.Trigram[0])
		} else {
			out.Sub = append(out.Sub, x)
		}
	}
	out.Trigram = uniq(out.Trigram)
	out.Sub = uniqQueries(out.Sub)
	// Keep queries bounded: an AND may drop conditions (it only gets
	// weaker); an OR that grows too wide says nothing useful.
	if op == And && len(out.Trigram) > maxAndTrigrams {
		out.Trigram = spread(out.Trigram, maxAndTrigrams)
	}
	if op == Or && len(out.Trigram)+len(out.Sub) > maxOrWidth {
		return allQuery
	}
	return out
}

// uniqQueries drops repeated sub-queries (by their text).
func uniqQueries(qs []*Query) []*Query {
	if len(qs) < 2 {
		return qs
	}
	seen := map[string]bool{}
	out := qs[:0]
	for _, q := range qs {
		if k := q.String(); !seen[k] {
			seen[k] = true
			out = append(out, q)
		}
	}
	return out
}

const (
	maxExact       = 7   // strings in an exact set before it becomes prefix/suffix
	maxSet         = 20  // strings in a prefix/suffix set before trimming
	maxClass       = 16  // runes in a class still expanded into strings
	maxAndTrigrams = 24  // trigrams kept in one AND
	maxOrWidth     = 200 // alternatives in one OR
)

// spread keeps n trigrams spread evenly over ts (neighbouring trigrams of
// one literal overlap, so an even sample keeps most of the selectivity).
func spread(ts []string, n int) []string {
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		out = append(out, ts[i*len(ts)/n])
	}
	return out
}

func uniq(s []string) []string {
	if len(s) < 2 {
		return s
	}
	sort.Strings(s)
	out := s[:1]
	for _, x := range s[1:] {
		if x != out[len(out)-1] {
			out = append(out, x)
		}
	}
	return out
}

// trigramsOf returns the query "contains every trigram of s".
func trigramsOf(s string) *Query {
	if len(s) < 3 {
		return allQuery
	}
	q := &Query{Op: And}
	for i := 0; i+3 <= len(s); i++ {
		q.Trigram = append(q.Trigram, s[i:i+3])
	}
	q.Trigram = uniq(q.Trigram)
	if len(q.Trigram) > maxAndTrigrams {
		q.Trigram = spread(q.Trigram, maxAndTrigrams)
	}
	if len(q.Trigram) == 1 {
		return &Query{Op: And, Trigram: q.Trigram}
	}
	return q
}

// setQuery returns "contains one of the strings of set" as trigrams.
func setQuery(set []string) *Query {
	q := noneQuery
	for _, s := range set {
		q = q.or(trigramsOf(s))
	}
	return q
}

type info struct {
	canEmpty bool
	exact    []string // nil: not exact
	prefix   []string
	suffix   []string
	match    *Query
}

func anyMatch() info {
	return info{canEmpty: true, prefix: []string{""}, suffix: []string{""}, match: allQuery}
}
func anyChar() info     { return info{prefix: []string{""}, suffix: []string{""}, match: allQuery} }
func emptyInfo() info   { return info{canEmpty: true, exact: []string{""}, match: allQuery} }
func noMatchInfo() info { return info{exact: []string{}, match: noneQuery} }

// Plan returns the trigram query for a (simplified) syntax tree.
func Plan(re *syntax.Regexp, fold bool) *Query {
	a := analyzer{fold: fold}
	in := a.analyze(re)
	in.simplify(true)
	q := in.match
	if in.exact != nil {
		q = q.and(setQuery(in.exact))
	} else {
		q = q.and(setQuery(in.prefix)).and(setQuery(in.suffix))
	}
	return q
}

type analyzer struct{ fold bool }

func (a analyzer) runeStr(r rune) string {
	if a.fold {
		r = Canon(r)
	}
	return string(r)
}

func (a analyzer) analyze(re *syntax.Regexp) info {
	switch re.Op {
	case syntax.OpNoMatch:
		return noMatchInfo()
	case syntax.OpEmptyMatch, syntax.OpBeginLine, syntax.OpEndLine, syntax.OpBeginText,
		syntax.OpEndText, syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return emptyInfo()
	case syntax.OpLiteral:
		var b strings.Builder
		for _, r := range re.Rune {
			if r == utf8.RuneError {
				// Go matches an invalid byte as U+FFFD: no bytes to look for.
				return a.concatAll(re.Rune)
			}
			if re.Flags&syntax.FoldCase != 0 && !a.fold {
				// A case-insensitive literal (-P's (?i)) in a query over
				// the raw bytes: Go holds one case of each rune, the
				// text may hold any, of another length even (K, KELVIN
				// SIGN): any rune each.
				return anyRunes(len(re.Rune))
			}
			b.WriteString(a.runeStr(r))
		}
		return info{canEmpty: b.Len() == 0, exact: []string{b.String()}, match: allQuery}
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		return anyChar()
	case syntax.OpCharClass:
		return a.class(re.Rune)
	case syntax.OpCapture:
		return a.analyze(re.Sub[0])
	case syntax.OpStar:
		return anyMatch()
	case syntax.OpQuest:
		return alternate(a.analyze(re.Sub[0]), emptyInfo())
	case syntax.OpPlus:
		return plus(a.analyze(re.Sub[0]))
	case syntax.OpRepeat:
		if re.Min == 0 {
			return anyMatch()
		}
		x := a.analyze(re.Sub[0])
		if re.Min == 1 && re.Max == 1 {
			return x
		}
		return plus(x)
	case syntax.OpConcat:
		x := emptyInfo()
		for _, s := range re.Sub {
			x = concat(x, a.analyze(s))
		}
		return x
	case syntax.OpAlternate:
		x := a.analyze(re.Sub[0])
		for _, s := range re.Sub[1:] {
			x = alternate(x, a.analyze(s))
		}
		return x
	}
	return anyMatch()
}

// concatAll treats each rune as its own class (used for runes that can't
// be looked up as bytes).
// anyRunes is n runes, each any.
func anyRunes(n int) info {
	x := emptyInfo()
	for range n {
		x = concat(x, anyChar())
	}
	return x
}

func (a analyzer) concatAll(rs []rune) info {
	x := emptyInfo()
	for _, r := range rs {
		if r == utf8.RuneError {
			x = concat(x, anyChar())
			continue
		}
		x = concat(x, info{exact: []string{a.runeStr(r)}, match: allQuery})
	}
	return x
}

// class expands a small character class into its strings.
func (a analyzer) class(ranges []rune) info {
	n := 0
	for i := 0; i+1 < len(ranges); i += 2 {
		n += int(ranges[i+1]-ranges[i]) + 1
		if n > 4*maxClass {
			return anyChar()
		}
	}
	if n == 0 {
		return noMatchInfo()
	}
	var set []string
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := ranges[i]; r <= ranges[i+1]; r++ {
			if r == utf8.RuneError {
				return anyChar()
			}
			set = append(set, a.runeStr(r))
		}
	}
	set = uniq(set)
	if len(set) > maxClass {
		return anyChar()
	}
	return info{exact: set, match: allQuery}
}

func plus(x info) info {
	if x.exact != nil {
		x.prefix, x.suffix = x.exact, append([]string(nil), x.exact...)
		x.exact = nil
	}
	return x
}

func cross(a, b []string) []string {
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return uniq(out)
}

func union(a, b []string) []string {
	return uniq(append(append([]string(nil), a...), b...))
}

func minLen(set []string) int {
	if len(set) == 0 {
		return 0
	}
	m := len(set[0])
	for _, s := range set[1:] {
		m = min(m, len(s))
	}
	return m
}

func concat(x, y info) info {
	if x.exact != nil && y.exact != nil && len(x.exact)*len(y.exact) > maxExact*maxSet {
		x.simplify(true)
		y.simplify(true)
	}
	var xy info
	xy.match = x.match.and(y.match)
	if x.exact != nil && y.exact != nil {
		xy.exact = cross(x.exact, y.exact)
	} else {
		if x.exact != nil {
			xy.prefix = cross(x.exact, y.prefix)
		} else {
			xy.prefix = x.prefix
			if x.canEmpty {
				xy.prefix = union(xy.prefix, y.prefix)
			}
		}
		if y.exact != nil {
			xy.suffix = cross(x.suffix, y.exact)
		} else {
			xy.suffix = y.suffix
			if y.canEmpty {
				xy.suffix = union(xy.suffix, x.suffix)
			}
		}
	}
	// Trigrams that span the boundary between x and y.
	if x.exact == nil && y.exact == nil && len(x.suffix) <= maxSet && len(y.prefix) <= maxSet &&
		minLen(x.suffix)+minLen(y.prefix) >= 3 {
		xy.match = xy.match.and(setQuery(cross(x.suffix, y.prefix)))
	}
	xy.canEmpty = x.canEmpty && y.canEmpty
	xy.simplify(false)
	return xy
}

func alternate(x, y info) info {
	var xy info
	if x.exact != nil && y.exact != nil {
		xy.exact = union(x.exact, y.exact)
	} else if x.exact != nil {
		xy.prefix = union(x.exact, y.prefix)
		xy.suffix = union(x.exact, y.suffix)
		x.addExact()
	} else if y.exact != nil {
		xy.prefix = union(x.prefix, y.exact)
		xy.suffix = union(x.suffix, y.exact)
		y.addExact()
	} else {
		xy.prefix = union(x.prefix, y.prefix)
		xy.suffix = union(x.suffix, y.suffix)
	}
	xy.canEmpty = x.canEmpty || y.canEmpty
	xy.match = x.match.or(y.match)
	xy.simplify(false)
	return xy
}

// addExact folds the exact set's trigrams into match.
func (x *info) addExact() {
	if x.exact != nil {
		x.match = x.match.and(setQuery(x.exact))
	}
}

// simplify bounds the sets: an exact set that is large (or, when force,
// whose strings are long enough to give trigrams) becomes prefix and
// suffix sets after its trigrams go into match; prefix/suffix sets are
// trimmed to their first/last two bytes the same way.
func (x *info) simplify(force bool) {
	if x.exact != nil && (len(x.exact) > maxExact || (force && minLen(x.exact) >= 3) || maxLen(x.exact) > 16) {
		x.addExact()
		x.prefix = append([]string(nil), x.exact...)
		x.suffix = append([]string(nil), x.exact...)
		x.exact = nil
	}
	if x.exact == nil {
		x.prefix = x.simplifySet(x.prefix, false)
		x.suffix = x.simplifySet(x.suffix, true)
	}
}

func maxLen(set []string) int {
	m := 0
	for _, s := range set {
		m = max(m, len(s))
	}
	return m
}

func (x *info) simplifySet(set []string, isSuffix bool) []string {
	if len(set) <= maxSet && maxLen(set) < 3 {
		return set
	}
	x.match = x.match.and(setQuery(set))
	for keep := 2; keep >= 0; keep-- {
		out := make([]string, 0, len(set))
		for _, s := range set {
			if len(s) > keep {
				if isSuffix {
					s = s[len(s)-keep:]
				} else {
					s = s[:keep]
				}
			}
			out = append(out, s)
		}
		out = uniq(out)
		if len(out) <= maxSet {
			return out
		}
	}
	return []string{""}
}

// Eval evaluates the query against content through has (does the content
// contain this trigram).
func (q *Query) Eval(has func(string) bool) bool {
	switch q.Op {
	case All:
		return true
	case None:
		return false
	case And:
		for _, t := range q.Trigram {
			if !has(t) {
				return false
			}
		}
		for _, s := range q.Sub {
			if !s.Eval(has) {
				return false
			}
		}
		return true
	}
	for _, t := range q.Trigram {
		if has(t) {
			return true
		}
	}
	for _, s := range q.Sub {
		if s.Eval(has) {
			return true
		}
	}
	return false
}
