package search

import (
	"sync"

	"github.com/blevesearch/bleve/v2/search/query"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/padfs/padfs/search/trigram"
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

// contentTrigrams returns the distinct folded trigrams of data, packed 3
// bytes each, or with binary their buckets (see trigramBucket), 2 bytes
// each; ok is false when there are more than maxDocTrigrams trigrams.
func contentTrigrams(data []byte, binary bool) (terms []byte, ok bool) {
	set := trigramPool.Get().(*trigramSet)
	defer func() {
		set.reset()
		trigramPool.Put(set)
	}()
	fdata := trigram.Fold(make([]byte, 0, len(data)), data)
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
		return bucketTerms(set.codes), true
	}
	terms = make([]byte, 3*len(set.codes))
	for i, c := range set.codes {
		terms[3*i], terms[3*i+1], terms[3*i+2] = byte(c>>16), byte(c>>8), byte(c)
	}
	return terms, true
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

// bucketTerms returns the distinct buckets of codes, packed 2 bytes each.
func bucketTerms(codes []uint32) []byte {
	var seen [1 << bucketBits / 64]uint64
	var terms []byte
	for _, c := range codes {
		b := trigramBucket(c)
		if seen[b>>6]&(1<<(b&63)) == 0 {
			seen[b>>6] |= 1 << (b & 63)
			terms = append(terms, byte(b>>8), byte(b))
		}
	}
	return terms
}

// termsField is a document field of distinct terms computed beforehand
// (trigrams, buckets), indexed without frequencies, norms or locations.
// It hands bleve their frequency map directly: the token stream that a
// bleve TextField goes through cost an allocation per trigram and
// another per map entry, most of the heap and the garbage of a build.
//
// The map is made each time it is asked for, not kept: scorch analyzes
// every document of a batch before building its segment, which asks
// twice per document (counting terms, then adding postings), and kept
// maps were most of the index worker's live heap (169 of 412 MB at its
// peak while indexing Go's src); making one costs about as much as the
// collector's marking of it.
type termsField struct {
	name  string
	terms []byte // width bytes each, distinct
	width int
}

func newTermsField(name string, terms []byte, width int) *termsField {
	return &termsField{name: name, terms: terms, width: width}
}

func (f *termsField) Name() string                        { return f.name }
func (f *termsField) ArrayPositions() []uint64            { return nil }
func (f *termsField) Options() index.FieldIndexingOptions { return trigramOpts }
func (f *termsField) Value() []byte                       { return nil }
func (f *termsField) NumPlainTextBytes() uint64           { return 0 }
func (f *termsField) EncodedFieldType() byte              { return 't' }
func (f *termsField) AnalyzedLength() int                 { return len(f.terms) / f.width }
func (f *termsField) Size() int                           { return 64 + 2*len(f.terms) }
func (f *termsField) Analyze()                            {}

// AnalyzedTokenFrequencies builds the frequency map, its keys substrings
// of one string. Every entry is the same, frequency 0 and no locations,
// so every key maps to one shared TokenFreq: zap reads only those two of
// it (the term is the key), and a TokenFreq per term was 56 bytes of
// garbage per posting (two maps per document) and a cache miss for each
// of zap's reads of it.
func (f *termsField) AnalyzedTokenFrequencies() index.TokenFrequencies {
	w := f.width
	n := len(f.terms) / w
	keys := string(f.terms)
	m := make(index.TokenFrequencies, n)
	for i := range n {
		m[keys[i*w:(i+1)*w]] = &noFreq
	}
	return m
}

// noFreq is the TokenFreq of every term of a termsField. Nothing writes
// it: zap merges frequencies only of a field name given twice in one
// document, which a termsField never is.
var noFreq index.TokenFreq

// bucketTerm is the btri term of trigram t (3 bytes).
func bucketTerm(t string) string {
	b := trigramBucket(uint32(t[0])<<16 | uint32(t[1])<<8 | uint32(t[2]))
	return string([]byte{byte(b >> 8), byte(b)})
}

// bucketQuery is bleveQuery over the btri field: the binary files that
// may hold what q asks for.
func bucketQuery(q *trigram.Query) query.Query {
	switch q.Op {
	case trigram.All:
		return query.NewMatchAllQuery()
	case trigram.None:
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
	if q.Op == trigram.And {
		return query.NewConjunctionQuery(subs)
	}
	return query.NewDisjunctionQuery(subs)
}
