package trigram

import (
	"encoding/binary"
	"slices"
	"unicode"
	"unicode/utf8"
)

// Case folding for the index. (What GNU grep -i matches for a character
// is another notion: grep's caseCounterparts.)
//
//   - Canon maps every rune of a Unicode simple-case-folding orbit (plus
//     its upper and lower mappings) to one representative. The index stores
//     folded trigrams of Canon(content) and the planner asks for
//     Canon(pattern), so a folded trigram query never misses a file that a
//     case-insensitive match would find.

// Canon returns the representative of r's case class, for the folded index.
func Canon(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	if c, ok := canonCache[r]; ok {
		return c
	}
	if unicode.SimpleFold(r) == r && unicode.ToUpper(r) == r && unicode.ToLower(r) == r {
		return r // no case (CJK, symbols, ...)
	}
	return canonSlow(r)
}

var canonCache = map[rune]rune{}

func init() {
	// Precompute the non-ASCII runes whose class reaches ASCII (K, ſ, ...)
	// and all of Latin/Greek/Cyrillic, the common case, so Canon is a map
	// lookup; the rest is computed on demand.
	for r := rune(0x80); r < 0x2000; r++ {
		canonCache[r] = canonSlow(r)
	}
	for _, r := range []rune{0x212A, 0x212B, 0x2126, 0x1E9E} {
		canonCache[r] = canonSlow(r)
	}
}

// canonSlow computes Canon by walking r's folding orbit together with the
// upper/lower mappings of each member; the smallest member, lowercased if
// it is ASCII, is the representative.
func canonSlow(r rune) rune {
	min := r
	seen := map[rune]bool{}
	var walk func(x rune)
	walk = func(x rune) {
		if seen[x] || len(seen) > 16 {
			return
		}
		seen[x] = true
		if x < min {
			min = x
		}
		for f := unicode.SimpleFold(x); f != x; f = unicode.SimpleFold(f) {
			walk(f)
		}
		walk(unicode.ToUpper(x))
		walk(unicode.ToLower(x))
	}
	walk(r)
	if 'A' <= min && min <= 'Z' {
		min += 'a' - 'A'
	}
	return min
}

// Fold returns Canon applied to every rune of b (invalid bytes are
// kept as they are), appended to dst.
func Fold(dst, b []byte) []byte {
	dst = slices.Grow(dst, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			// A run of ASCII: lowercase it in place of a rune loop.
			j := i + 1
			for j < len(b) && b[j] < utf8.RuneSelf {
				j++
			}
			dst = ASCIILower(dst, b[i:j])
			i = j
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, c)
			i++
			continue
		}
		dst = utf8.AppendRune(dst, Canon(r))
		i += n
	}
	return dst
}

// ASCIILower appends b with A-Z lowered (other bytes as they are), so
// offsets in the result are offsets in b. It works eight bytes at a time:
// -i greps lower every candidate file.
func ASCIILower(dst, b []byte) []byte {
	n := len(dst)
	dst = append(dst, b...)
	out := dst[n:]
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	i := 0
	for ; i+8 <= len(out); i += 8 {
		x := binary.LittleEndian.Uint64(out[i:])
		low7 := x &^ highs
		// Per byte: high bit set where the low 7 bits are >= 'A', and
		// where they are > 'Z' (no carry crosses bytes: each sum < 0x100).
		geA := low7 + (0x80-'A')*ones
		gtZ := low7 + (0x80-'Z'-1)*ones
		upper := geA &^ gtZ &^ x & highs // 'A'..'Z' and an ASCII byte
		binary.LittleEndian.PutUint64(out[i:], x|upper>>2)
	}
	for ; i < len(out); i++ {
		if c := out[i]; 'A' <= c && c <= 'Z' {
			out[i] = c + 'a' - 'A'
		}
	}
	return dst
}

// FoldsInASCII reports whether c is an ASCII byte whose case class has no
// non-ASCII member: a folded trigram made of such bytes is found in the
// ASCII-lowered bytes of any text whose folded form holds it (which is
// not so for k, s or i: KELVIN SIGN, LONG S and DOTLESS I fold to them).
func FoldsInASCII(c byte) bool { return c < utf8.RuneSelf && asciiOnlyFold[c] }

var asciiOnlyFold = func() (t [utf8.RuneSelf]bool) {
	for c := range t {
		t[c] = true
	}
	// Only runes with a case mapping fold to something else.
	for _, cr := range unicode.CaseRanges {
		for r := max(rune(cr.Lo), utf8.RuneSelf); r <= rune(cr.Hi); r++ {
			if c := Canon(r); c < utf8.RuneSelf {
				t[c] = false
			}
		}
	}
	return t
}()
