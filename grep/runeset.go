package grep

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// runeSet is a set of runes as sorted, disjoint, non-adjacent inclusive
// ranges flattened into pairs: [lo0, hi0, lo1, hi1, ...].
type runeSet []rune

// add returns s with the range lo..hi added (s need not be normalized;
// call norm before use).
func (s runeSet) add(lo, hi rune) runeSet { return append(s, lo, hi) }

// norm sorts and merges the ranges.
func (s runeSet) norm() runeSet {
	if len(s) <= 2 {
		return s
	}
	type r struct{ lo, hi rune }
	rs := make([]r, 0, len(s)/2)
	for i := 0; i+1 < len(s); i += 2 {
		rs = append(rs, r{s[i], s[i+1]})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].lo < rs[j].lo })
	out := runeSet{rs[0].lo, rs[0].hi}
	for _, x := range rs[1:] {
		if last := len(out) - 1; x.lo <= out[last]+1 {
			if x.hi > out[last] {
				out[last] = x.hi
			}
			continue
		}
		out = append(out, x.lo, x.hi)
	}
	return out
}

// negate returns the complement of a normalized set within 0..MaxRune.
func (s runeSet) negate() runeSet {
	var out runeSet
	next := rune(0)
	for i := 0; i+1 < len(s); i += 2 {
		if s[i] > next {
			out = append(out, next, s[i]-1)
		}
		next = s[i+1] + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, next, unicode.MaxRune)
	}
	return out
}

// remove returns the normalized set without rune r.
func (s runeSet) remove(r rune) runeSet {
	var out runeSet
	for i := 0; i+1 < len(s); i += 2 {
		lo, hi := s[i], s[i+1]
		if r < lo || r > hi {
			out = append(out, lo, hi)
			continue
		}
		if lo < r {
			out = append(out, lo, r-1)
		}
		if r < hi {
			out = append(out, r+1, hi)
		}
	}
	return out
}

// has reports whether the normalized set contains r.
func (s runeSet) has(r rune) bool {
	i := sort.Search(len(s)/2, func(i int) bool { return s[2*i+1] >= r })
	return i < len(s)/2 && s[2*i] <= r
}

// foldCase adds every rune's case counterparts (as GNU grep -i does) to a
// normalized set.
func (s runeSet) foldCase() runeSet {
	out := append(runeSet(nil), s...)
	var buf [8]rune
	for i := 0; i+1 < len(s); i += 2 {
		for r := s[i]; r <= s[i+1]; r++ {
			if !hasCase(r) {
				continue
			}
			for _, c := range caseCounterparts(r, buf[:0]) {
				out = append(out, c, c)
			}
		}
	}
	return out.norm()
}

// hasCase is a cheap filter for runes that may have case counterparts.
func hasCase(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
	}
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.So, r)
}

// goClass renders a normalized set as Go regexp syntax: a literal for one
// rune, else a bracket class with \x{...} escapes.
func (s runeSet) goClass() string {
	if len(s) == 0 {
		return `[^\x00-\x{10FFFF}]` // matches nothing
	}
	if len(s) == 2 && s[0] == s[1] {
		return quoteRune(s[0])
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i+1 < len(s); i += 2 {
		b.WriteString(classRune(s[i]))
		if s[i+1] != s[i] {
			if s[i+1] > s[i]+1 {
				b.WriteByte('-')
			}
			b.WriteString(classRune(s[i+1]))
		}
	}
	b.WriteByte(']')
	return b.String()
}

func classRune(r rune) string {
	if r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
		return string(r)
	}
	return fmt.Sprintf(`\x{%x}`, r)
}

func quoteRune(r rune) string {
	switch {
	case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == ' ' || r == '_'):
		return string(r)
	case r < utf8.RuneSelf || !unicode.IsPrint(r):
		return fmt.Sprintf(`\x{%x}`, r)
	default:
		return string(r)
	}
}

// classSet returns the set of a POSIX class name ("alpha", ..., "word").
func classSet(name string) (runeSet, bool) {
	rs, ok := posixClasses[name]
	return runeSet(rs), ok
}

// caseCounterparts is what GNU grep -i matches for a character (dfa.c's
// case_folded_counterparts: towupper, towlower, and the "lonesome lower"
// characters whose uppercase is the same). The matcher spells -i out with
// it, so `padfs grep -i` matches what GNU grep -i matches.
//
// lonesomeLower lists the runes whose uppercase maps back to a different
// lowercase (e.g. U+00B5 MICRO SIGN -> U+039C -> U+03BC).
var lonesomeLower = []rune{
	0x00B5, 0x0131, 0x017F, 0x01C5, 0x01C8, 0x01CB, 0x01F2, 0x0345,
	0x03C2, 0x03D0, 0x03D1, 0x03D5, 0x03D6, 0x03F0, 0x03F1, 0x03F2,
	0x03F5, 0x1E9B, 0x1FBE,
}

// caseCounterparts appends the runes other than c that GNU grep -i treats
// as equal to c.
func caseCounterparts(c rune, out []rune) []rune {
	uc := unicode.ToUpper(c)
	lc := unicode.ToLower(uc)
	if uc != c {
		out = append(out, uc)
	}
	if lc != uc && lc != c && unicode.ToUpper(lc) == uc {
		out = append(out, lc)
	}
	for _, li := range lonesomeLower {
		if li != lc && li != uc && li != c && unicode.ToUpper(li) == uc {
			out = append(out, li)
		}
	}
	return out
}

// subsetOf reports whether every rune of s is in t (both normalized).
func (s runeSet) subsetOf(t runeSet) bool {
	j := 0
	for i := 0; i+1 < len(s); i += 2 {
		for j+1 < len(t) && t[j+1] < s[i] {
			j += 2
		}
		if j+1 >= len(t) || t[j] > s[i] || t[j+1] < s[i+1] {
			return false
		}
	}
	return true
}
