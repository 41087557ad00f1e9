package search

import (
	"math"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/ngram"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/analysis/token/stop"
	index "github.com/blevesearch/bleve_index_api"
)

// Analysis of the ranked-search fields, by distinct token. Every token
// filter of the code analyzers (lowercase, English stop words, Porter,
// n-grams) maps one token to its output on its own, whatever its
// neighbours and position, and a field keeps no term vectors: so the
// frequencies of a field are those of its distinct tokens, each filtered
// once, times their counts. A file of Go repeats its identifiers about
// ten times: filtering every occurrence (Porter's stemmer rebuilding each
// term from runes) was most of the text field's analysis.

// distinctAnalyzer returns an's tokenizer and filters when they allow
// analysis by distinct token (a DefaultAnalyzer without char filters
// whose token filters are all of the per-token kinds above).
func distinctAnalyzer(an analysis.Analyzer) (*analysis.DefaultAnalyzer, bool) {
	da, ok := an.(*analysis.DefaultAnalyzer)
	if !ok || len(da.CharFilters) > 0 || da.Tokenizer == nil {
		return nil, false
	}
	for _, f := range da.TokenFilters {
		switch f.(type) {
		case *lowercase.LowerCaseFilter, *stop.StopTokensFilter, *porter.PorterStemmer, *ngram.NgramFilter:
		default:
			return nil, false
		}
	}
	return da, true
}

// analyzeFreqs returns the term frequencies and length of data through
// an, as termFreqs(an.Analyze(data)) would, filtering each distinct token
// once when an allows it. data may be modified (lowercased in place).
func analyzeFreqs(an analysis.Analyzer, data []byte) (index.TokenFrequencies, int) {
	da, ok := distinctAnalyzer(an)
	if !ok {
		return termFreqs(an.Analyze(data))
	}
	toks := da.Tokenizer.Tokenize(data)
	// The distinct raw tokens, in order of first occurrence, and counts.
	at := make(map[string]int, len(toks)/4+1)
	var raw [][]byte
	var counts []int
	for _, t := range toks {
		if i, ok := at[string(t.Term)]; ok {
			counts[i]++
			continue
		}
		if !isASCII(t.Term) {
			// Tokens alias data and overlap (a compound and its parts),
			// and bleve's lowercase filter rewrites a non-ASCII term in
			// place, changing its width: what the others then read
			// depends on the order of the stream. Only the stream itself
			// gives the same terms.
			return termFreqs(an.Analyze(data))
		}
		at[string(t.Term)] = len(raw)
		raw = append(raw, t.Term)
		counts = append(counts, 1)
	}
	m := make(index.TokenFrequencies, len(raw))
	// TokenFreqs come from slabs (pointers into them are kept: a full
	// slab is replaced, never grown), their terms from one byte slab.
	var slab []index.TokenFreq
	var termBytes []byte
	length := 0
	var tok analysis.Token
	one := make(analysis.TokenStream, 1)
	buf := make([]byte, 0, 64)
	for i, r := range raw {
		// The filters may rewrite the term in place: give them a copy
		// (r may alias a term later tokens still compare against).
		buf = append(buf[:0], r...)
		tok = analysis.Token{Term: buf, Start: 0, End: len(buf), Position: 1, Type: analysis.AlphaNumeric}
		one[0] = &tok
		out := one[:1]
		for _, f := range da.TokenFilters {
			out = f.Filter(out)
		}
		n := counts[i]
		for _, o := range out {
			length += n
			if tf, ok := m[string(o.Term)]; ok {
				tf.SetFrequency(tf.Frequency() + n)
				continue
			}
			if len(slab) == cap(slab) {
				slab = make([]index.TokenFreq, 0, max(16, len(raw)-i))
			}
			if len(termBytes)+len(o.Term) > cap(termBytes) {
				termBytes = make([]byte, 0, max(256, 8*(len(raw)-i), len(o.Term)))
			}
			start := len(termBytes)
			termBytes = append(termBytes, o.Term...)
			slab = append(slab, index.TokenFreq{Term: termBytes[start:len(termBytes):len(termBytes)]})
			tf := &slab[len(slab)-1]
			tf.SetFrequency(n)
			m[string(o.Term)] = tf
		}
	}
	return m, length
}

func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return false
		}
	}
	return true
}

// termCounts is a field's term frequencies kept compact from its analysis
// to its segment's build (every document of a batch waits for the batch):
// a frequency map costs about 100 bytes a term, its terms and counts
// here about 15. The map is made each time bleve asks for it (twice a
// document, see termsField).
type termCounts struct {
	terms  []byte   // the terms, one after the other
	ends   []uint32 // where each term ends in terms
	counts []int32
}

func compactCounts(m index.TokenFrequencies) termCounts {
	var c termCounts
	n := 0
	for k := range m {
		n += len(k)
	}
	c.terms = make([]byte, 0, n)
	c.ends = make([]uint32, 0, len(m))
	c.counts = make([]int32, 0, len(m))
	for k, tf := range m {
		c.terms = append(c.terms, k...)
		c.ends = append(c.ends, uint32(len(c.terms)))
		c.counts = append(c.counts, int32(min(tf.Frequency(), math.MaxInt32)))
	}
	return c
}

// tokenFrequencies is the frequency map, its keys substrings of one
// string. zap reads only the frequency and locations of an entry (the
// term is the key), so a term counted fewer than len(sharedFreqs) times
// maps to the shared TokenFreq of its count (see noFreq).
func (c termCounts) tokenFrequencies() index.TokenFrequencies {
	keys := string(c.terms)
	m := make(index.TokenFrequencies, len(c.ends))
	var tfs []index.TokenFreq
	start := 0
	for i, e := range c.ends {
		end := int(e)
		n := int(c.counts[i])
		if n < len(sharedFreqs) {
			m[keys[start:end]] = &sharedFreqs[n]
		} else {
			if len(tfs) == cap(tfs) {
				tfs = make([]index.TokenFreq, 0, 16)
			}
			tfs = append(tfs, index.TokenFreq{})
			tfs[len(tfs)-1].SetFrequency(n)
			m[keys[start:end]] = &tfs[len(tfs)-1]
		}
		start = end
	}
	return m
}

// sharedFreqs[n] is the TokenFreq of frequency n.
var sharedFreqs = func() (s [256]index.TokenFreq) {
	for i := range s {
		s[i].SetFrequency(i)
	}
	return s
}()
