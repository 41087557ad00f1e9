// Package codetok splits source code into the words a person searches
// for: identifiers broken on camelCase, snake_case and digits, the names
// a file declares (by cheap per-language lexical rules), and path words.
// It reads user data (file content), so everything here is fuzzed and
// bounds every output to its input.
//
// The tokenizers are registered with bleve's registry under
// TokenizerName and WholeTokenizerName, so a mapping's custom analyzer
// can put bleve's own token filters (to_lower, stop_en, stemmer_porter)
// after them.
package codetok

import (
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/registry"
)

const (
	// TokenizerName splits identifiers into their parts only
	// (readTimeout -> read, Timeout): the full-text field.
	TokenizerName = "padfs_code"
	// WholeTokenizerName also emits a compound identifier whole, after its
	// parts (readTimeout -> read, Timeout, readTimeout): short fields
	// (declarations, paths) where an exact name should count more.
	WholeTokenizerName = "padfs_code_whole"
	// MaxWord is the longest run of letters and digits split into words;
	// longer runs (base64, hex dumps) are skipped as noise.
	MaxWord = 64
)

// Tokenizer is a bleve tokenizer for code.
type Tokenizer struct {
	// Whole: emit compound identifiers whole as well.
	Whole bool
}

func init() {
	for name, whole := range map[string]bool{TokenizerName: false, WholeTokenizerName: true} {
		t := &Tokenizer{Whole: whole}
		if err := registry.RegisterTokenizer(name, func(map[string]interface{}, *registry.Cache) (analysis.Tokenizer, error) {
			return t, nil
		}); err != nil {
			panic(err) // two registrations of one name: a build mistake
		}
	}
}

// Tokenize implements analysis.Tokenizer. Term slices alias input.
func (t *Tokenizer) Tokenize(input []byte) analysis.TokenStream {
	// One allocation for all tokens: the stream's pointers point into it.
	var slab []analysis.Token
	out := make(analysis.TokenStream, 0, len(input)/8+1)
	pos := 0
	emit := func(start, end int) {
		if len(slab) == cap(slab) {
			slab = make([]analysis.Token, 0, max(64, len(input)/16))
		}
		pos++
		slab = append(slab, analysis.Token{Start: start, End: end, Term: input[start:end:end], Position: pos, Type: analysis.AlphaNumeric})
		out = append(out, &slab[len(slab)-1])
	}
	Split(input, func(start, end int, parts int) {
		if parts > 1 && t.Whole {
			emit(start, end)
		}
	}, func(start, end int) {
		emit(start, end)
	})
	return out
}

// Split walks the words of data: for each run of letters and digits (an
// identifier; '_' separates) of at most MaxWord bytes, part is called
// for each of its parts of two or more bytes (split at lower->Upper,
// at UPper->lower as in HTTPServer, and between letters and digits),
// then run with the whole run and its number of parts.
func Split(data []byte, run func(start, end, parts int), part func(start, end int)) {
	i := 0
	for i < len(data) {
		// Skip separators.
		r, n := decode(data[i:])
		if !isWord(r) {
			i += n
			continue
		}
		start := i
		for i < len(data) {
			r, n = decode(data[i:])
			if !isWord(r) {
				break
			}
			i += n
		}
		end := i
		if end-start > MaxWord {
			continue
		}
		parts := splitRun(data[start:end], start, part)
		if run != nil {
			run(start, end, parts)
		}
	}
}

// splitRun calls part for the parts of one run (at offset off) and
// returns how many it found (of any length).
func splitRun(w []byte, off int, part func(start, end int)) int {
	parts := 0
	ps := 0 // start of the current part
	var cur rune
	var prevClass, curClass int
	flush := func(end int) {
		if end > ps {
			parts++
			if end-ps >= 2 {
				part(off+ps, off+end)
			}
		}
		ps = end
	}
	i := 0
	for i < len(w) {
		r, n := decode(w[i:])
		c := class(r)
		if i > 0 {
			switch {
			case c != curClass && (c == classDigit || curClass == classDigit):
				flush(i) // letter <-> digit
			case c == classUpper && curClass == classLower:
				flush(i) // camelCase
			case c == classLower && curClass == classUpper && prevClass == classUpper && i-sizeOf(cur) > ps:
				// HTTPServer: the last upper letter starts the next part.
				flush(i - sizeOf(cur))
			}
		}
		prevClass = curClass
		cur, curClass = r, c
		i += n
	}
	flush(len(w))
	return parts
}

const (
	classLower = iota
	classUpper
	classDigit
)

func class(r rune) int {
	switch {
	case r >= '0' && r <= '9', r >= utf8.RuneSelf && unicode.IsDigit(r):
		return classDigit
	case r >= 'A' && r <= 'Z', r >= utf8.RuneSelf && unicode.IsUpper(r):
		return classUpper
	}
	return classLower
}

func sizeOf(r rune) int {
	if r == utf8.RuneError {
		return 1
	}
	return utf8.RuneLen(r)
}

// decode is utf8.DecodeRune with an ASCII fast path; an invalid byte is
// one RuneError of width 1 (a separator).
func decode(b []byte) (rune, int) {
	if b[0] < utf8.RuneSelf {
		return rune(b[0]), 1
	}
	return utf8.DecodeRune(b)
}

// isWord: letters and digits; '_' and everything else separate words.
func isWord(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

// Words returns the parts of s (lowercased ASCII-wise by the caller if
// wanted), each of two or more bytes, and the compound runs whole after
// their parts when whole is set.
func Words(s string, whole bool) []string {
	var out []string
	b := []byte(s)
	Split(b, func(start, end, parts int) {
		if whole && parts > 1 {
			out = append(out, s[start:end])
		}
	}, func(start, end int) {
		out = append(out, s[start:end])
	})
	return out
}
