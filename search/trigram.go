package search

import (
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
)

// Content trigrams for the index: every distinct 3-byte window of a file's
// case-folded bytes (canon applied to every rune, field "tri"). One folded
// set serves both kinds of query: a case-insensitive pattern asks for its
// folded trigrams, and so does a case-sensitive one (a file holding the
// exact text holds its folded text too); the matcher then decides on the
// real bytes. Folding keeps -i as cheap as an exact search and the index
// smaller than an exact set plus a folded one.

type trigramSet struct {
	bits  []uint64 // 1<<24 bits
	codes []uint32
}

var trigramPool = sync.Pool{New: func() any { return &trigramSet{bits: make([]uint64, 1<<24/64)} }}

func (s *trigramSet) add(c uint32) bool {
	w, b := c>>6, uint64(1)<<(c&63)
	if s.bits[w]&b != 0 {
		return false
	}
	s.bits[w] |= b
	s.codes = append(s.codes, c)
	return true
}

func (s *trigramSet) reset() {
	for _, c := range s.codes {
		s.bits[c>>6] = 0
	}
	s.codes = s.codes[:0]
}

// maxDocTrigrams caps the distinct trigrams of one document. Source and
// text stay far below it (the largest Go file of GOROOT has ~60,000, its
// largest object files ~420,000); megabytes of compressed or random bytes
// reach millions, which cost scorch a minute of segment building and bloat
// the dictionary for no selectivity: such a file is left unindexed and
// grep always reads it, like a file over MaxIndexedSize. (Codesearch skips
// such files the same way.) The cap is high enough that files grep would
// read on every search stay rare.
const maxDocTrigrams = 1 << 19

// contentTrigrams returns the folded trigrams of data as a bleve token
// stream; ok is false when there are more than maxDocTrigrams.
func contentTrigrams(data []byte) (ts analysis.TokenStream, ok bool) {
	set := trigramPool.Get().(*trigramSet)
	defer func() {
		set.reset()
		trigramPool.Put(set)
	}()
	fdata := foldBytes(make([]byte, 0, len(data)), data)
	if len(fdata) >= 3 {
		c := uint32(fdata[0])<<8 | uint32(fdata[1])
		for _, b := range fdata[2:] {
			c = (c<<8 | uint32(b)) & 0xffffff
			if set.add(c) && len(set.codes) > maxDocTrigrams {
				return nil, false
			}
		}
	}
	return tokens(set.codes), true
}

func tokens(codes []uint32) analysis.TokenStream {
	buf := make([]byte, 3*len(codes))
	toks := make([]analysis.Token, len(codes))
	ts := make(analysis.TokenStream, len(codes))
	for i, c := range codes {
		t := buf[3*i : 3*i+3 : 3*i+3]
		t[0], t[1], t[2] = byte(c>>16), byte(c>>8), byte(c)
		toks[i] = analysis.Token{Term: t, Position: i + 1, Start: 0, End: 3, Type: analysis.AlphaNumeric}
		ts[i] = &toks[i]
	}
	return ts
}

// preAnalyzed is an analyzer that returns tokens computed beforehand.
type preAnalyzed analysis.TokenStream

func (p preAnalyzed) Analyze([]byte) analysis.TokenStream { return analysis.TokenStream(p) }
