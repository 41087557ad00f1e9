package search

import (
	"slices"
	"sync"

	"github.com/padfs/padfs/search/trigram"
	"github.com/padfs/padfs/search/triseg"
)

// Content trigrams for the index: every distinct 3-byte window of a file's
// case-folded bytes (canon applied to every rune), kept in the session's
// trigram segments (search/triseg), not in bleve. One folded
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

// contentTrigrams returns the keys (triseg.TriKey) of the distinct folded
// trigrams of data, or with binary of their buckets (see below); ok is
// false when there are more than maxDocTrigrams trigrams.
func contentTrigrams(data []byte, binary bool) (keys []uint32, ok bool) {
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
		return bucketKeys(set.codes), true
	}
	return slices.Clone(set.codes), true
}

// Binary files index trigram buckets (triseg.Bucket) instead of
// trigrams: their bytes hold millions of distinct trigrams that no text
// has (the object files and archives of GOROOT/src: 3 million terms,
// against 0.2 million for all its source), which made most of the
// index's dictionary and of its build time, for files grep rarely looks
// for. A binary file holding a trigram holds its bucket: grep asks for
// both, and a bucket shared by another trigram only costs a file read.

// bucketKeys returns the keys of the distinct buckets of codes.
func bucketKeys(codes []uint32) []uint32 {
	var seen [1 << triseg.BucketBits / 64]uint64
	var keys []uint32
	for _, c := range codes {
		b := triseg.Bucket(c)
		if seen[b>>6]&(1<<(b&63)) == 0 {
			seen[b>>6] |= 1 << (b & 63)
			keys = append(keys, triseg.BucketKey(b))
		}
	}
	return keys
}
