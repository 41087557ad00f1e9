package search

import (
	"sync"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/search/query"
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
// stream, or with binary their buckets (see trigramBucket); ok is false
// when there are more than maxDocTrigrams distinct trigrams.
func contentTrigrams(data []byte, binary bool) (ts analysis.TokenStream, ok bool) {
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
	if binary {
		return bucketTokens(set.codes), true
	}
	return tokens(set.codes), true
}

// Binary files index trigram buckets (field "btri") instead of trigrams:
// their bytes hold millions of distinct trigrams that no text has (the
// object files and archives of GOROOT/src: 3 million terms, against 0.2
// million for all its source), which made most of the index's dictionary
// and of its build time, for files grep rarely looks for. A bucket is 16
// bits of a hash of the folded trigram, so a binary file holding a
// trigram holds its bucket: grep asks for both, and a bucket shared by
// another trigram only costs a file read.
const bucketBits = 16

func trigramBucket(c uint32) uint32 { return (c * 0x9E3779B1) >> (32 - bucketBits) }

func bucketTokens(codes []uint32) analysis.TokenStream {
	var seen [1 << bucketBits / 64]uint64
	var bs []uint32
	for _, c := range codes {
		b := trigramBucket(c)
		if seen[b>>6]&(1<<(b&63)) == 0 {
			seen[b>>6] |= 1 << (b & 63)
			bs = append(bs, b)
		}
	}
	buf := make([]byte, 2*len(bs))
	toks := make([]analysis.Token, len(bs))
	ts := make(analysis.TokenStream, len(bs))
	for i, b := range bs {
		t := buf[2*i : 2*i+2 : 2*i+2]
		t[0], t[1] = byte(b>>8), byte(b)
		toks[i] = analysis.Token{Term: t, Position: i + 1, Start: 0, End: 2, Type: analysis.AlphaNumeric}
		ts[i] = &toks[i]
	}
	return ts
}

// bucketTerm is the btri term of trigram t (3 bytes).
func bucketTerm(t string) string {
	b := trigramBucket(uint32(t[0])<<16 | uint32(t[1])<<8 | uint32(t[2]))
	return string([]byte{byte(b >> 8), byte(b)})
}

// bucketQuery is bleveQuery over the btri field: the binary files that
// may hold what q asks for.
func bucketQuery(q *Query) query.Query {
	switch q.Op {
	case QAll:
		return query.NewMatchAllQuery()
	case QNone:
		return query.NewMatchNoneQuery()
	}
	var subs []query.Query
	for _, t := range q.Trigram {
		if len(t) != 3 {
			// Not a trigram (cannot happen): match every binary file.
			subs = append(subs, query.NewMatchAllQuery())
			continue
		}
		subs = append(subs, termQ("btri", bucketTerm(t)))
	}
	for _, s := range q.Sub {
		subs = append(subs, bucketQuery(s))
	}
	if q.Op == QAnd {
		return query.NewConjunctionQuery(subs)
	}
	return query.NewDisjunctionQuery(subs)
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
