// Package triseg holds grep's trigram postings outside bleve: immutable
// segment files, each a sorted dictionary of keys (a folded trigram, or a
// binary file's bucket) to the documents holding them, the segment's
// document table (number -> path and kind) and its tombstones. A path's
// newest entry across the segments of a set wins; a tombstone is an entry
// that says the path has no document. Bleve builds a scorch segment per
// batch with a dictionary and a postings list per term for every field;
// most of that work for padfs was the content trigrams, which need no
// frequencies, norms, locations or scores: a sorted array does.
//
// File layout (little endian), one file per segment, written to a temp
// file, synced and renamed (then the directory synced):
//
//	header   64 bytes: magic "PADFSTRI", version, document count, key
//	         count, the sections' offsets, lengths and CRC-32C, the
//	         header's own CRC-32C
//	docs     per document: kind (1 byte), uvarint path length, path
//	postings per key: uvarint document numbers, the first as is, then
//	         each one's distance from the previous (at least 1)
//	dict     the keys (u32 each, strictly increasing), then per key the
//	         offset of its postings in its block's (u32), then per block
//	         of blockKeys keys the offset of its postings in the section
//	         (u64) and their CRC-32C (u32)
//
// Opening a segment reads its header only; the docs and dict sections are
// read and checked on first use, a postings list when a query reads it.
// Every decode checks bounds and returns an error naming the file: a
// damaged segment is never trusted, never a panic.
package triseg

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
)

// Document kinds.
const (
	KindText      byte = iota // postings of folded trigrams
	KindBinary                // postings of trigram buckets
	KindUnindexed             // no postings: always a candidate
	kindTomb                  // the path has no document
	numKinds
)

const (
	magic      = "PADFSTRI"
	version    = 1
	headerSize = 64
	// blockKeys keys share a postings checksum: 8.4 bytes of dict per
	// key instead of 16 with one each (the dict was more than half of
	// a segment; most keys of a small segment have one or two postings).
	blockKeys  = 32
	blockEntry = 12
	// maxPath bounds a document's path (the store's names are shorter).
	maxPath = 1 << 16
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error about a damaged segment.
var ErrCorrupt = errors.New("damaged trigram segment")

type header struct {
	ndocs, nkeys     uint32
	docsOff, docsLen uint64
	postOff, postLen uint64
	dictOff          uint64 // dict length is dictLen(nkeys)
	docsCRC, dictCRC uint32
}

func (h *header) encode() []byte {
	b := make([]byte, headerSize)
	copy(b, magic)
	le := binary.LittleEndian
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], h.ndocs)
	le.PutUint32(b[16:], h.nkeys)
	le.PutUint64(b[20:], h.docsOff)
	le.PutUint64(b[28:], h.docsLen)
	le.PutUint64(b[36:], h.postOff)
	le.PutUint64(b[44:], h.postLen)
	le.PutUint32(b[52:], h.docsCRC)
	le.PutUint32(b[56:], h.dictCRC)
	le.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
	return b
}

// decodeHeader checks b (headerSize bytes) against a file of size bytes.
func decodeHeader(b []byte, size int64) (header, error) {
	var h header
	if len(b) < headerSize || string(b[:8]) != magic {
		return h, errors.New("not a trigram segment (bad magic)")
	}
	le := binary.LittleEndian
	if v := le.Uint32(b[8:]); v != version {
		return h, fmt.Errorf("version %d, want %d", v, version)
	}
	if got, want := crc32.Checksum(b[:60], castagnoli), le.Uint32(b[60:]); got != want {
		return h, fmt.Errorf("header checksum %08x, stored %08x", got, want)
	}
	h.ndocs, h.nkeys = le.Uint32(b[12:]), le.Uint32(b[16:])
	h.docsOff, h.docsLen = le.Uint64(b[20:]), le.Uint64(b[28:])
	h.postOff, h.postLen = le.Uint64(b[36:]), le.Uint64(b[44:])
	h.docsCRC, h.dictCRC = le.Uint32(b[52:]), le.Uint32(b[56:])
	h.dictOff = h.postOff + h.postLen
	// The sections follow each other and end the file.
	if h.docsOff != headerSize || h.docsLen > uint64(size) || h.postOff != h.docsOff+h.docsLen ||
		h.postLen > uint64(size) || h.dictOff > uint64(size) ||
		dictLen(h.nkeys) != uint64(size)-h.dictOff || uint64(h.ndocs) > h.docsLen/2 {
		return h, fmt.Errorf("sections do not fit the file's %d bytes", size)
	}
	return h, nil
}

func numBlocks(nkeys uint32) uint64 { return (uint64(nkeys) + blockKeys - 1) / blockKeys }

func dictLen(nkeys uint32) uint64 { return uint64(nkeys)*8 + numBlocks(nkeys)*blockEntry }

// Segment is one open segment file.
type Segment struct {
	Lo, Hi uint64 // the range of batch numbers it holds
	name   string
	f      file
	size   int64
	h      header

	once  sync.Once
	err   error
	paths []string
	kinds []byte
	keys  []uint32
	rel   []uint32 // offset of each key's postings in its block's
	boff  []uint64 // offset of each block's postings in the section
	bcrc  []uint32
}

// OpenSegment opens the segment file p, reading only its header.
func OpenSegment(p string, lo, hi uint64) (*Segment, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	s, err := newSegment(f, p, lo, hi)
	if err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// file is what a segment reads: an *os.File (or bytes, in tests).
type file interface {
	io.ReaderAt
	Close() error
}

func newSegment(f *os.File, p string, lo, hi uint64) (*Segment, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return readSegment(f, fi.Size(), p, lo, hi)
}

// readSegment reads the header of the segment of size bytes in f.
func readSegment(f file, size int64, p string, lo, hi uint64) (*Segment, error) {
	var err error
	s := &Segment{Lo: lo, Hi: hi, name: p, f: f, size: size}
	var b [headerSize]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return nil, s.corrupt(fmt.Errorf("header: %w", err))
	}
	if s.h, err = decodeHeader(b[:], s.size); err != nil {
		return nil, s.corrupt(err)
	}
	return s, nil
}

func (s *Segment) corrupt(err error) error {
	if errors.Is(err, os.ErrClosed) {
		return fmt.Errorf("%w: %s", errClosed, s.name)
	}
	return fmt.Errorf("%w %s: %v", ErrCorrupt, s.name, err)
}

// Close closes the segment's file.
func (s *Segment) Close() error { return s.f.Close() }

// Size is the segment file's size in bytes.
func (s *Segment) Size() int64 { return s.size }

// NumDocs is the number of document table entries (tombstones too).
func (s *Segment) NumDocs() int { return int(s.h.ndocs) }

// load reads and checks the docs and dict sections once.
func (s *Segment) load() error {
	s.once.Do(func() { s.err = s.loadOnce() })
	return s.err
}

func (s *Segment) loadOnce() error {
	docs := make([]byte, s.h.docsLen)
	if _, err := s.f.ReadAt(docs, int64(s.h.docsOff)); err != nil {
		return s.corrupt(fmt.Errorf("docs: %w", err))
	}
	if crc32.Checksum(docs, castagnoli) != s.h.docsCRC {
		return s.corrupt(errors.New("docs section checksum mismatch"))
	}
	s.paths = make([]string, 0, s.h.ndocs)
	s.kinds = make([]byte, 0, s.h.ndocs)
	for len(docs) > 0 {
		k := docs[0]
		n, w := binary.Uvarint(docs[1:])
		if k >= numKinds || w <= 0 || n > maxPath || n > uint64(len(docs)-1-w) {
			return s.corrupt(fmt.Errorf("docs: bad entry %d", len(s.paths)))
		}
		s.kinds = append(s.kinds, k)
		s.paths = append(s.paths, string(docs[1+w:1+w+int(n)]))
		docs = docs[1+w+int(n):]
	}
	if len(s.paths) != int(s.h.ndocs) {
		return s.corrupt(fmt.Errorf("docs: %d entries, header says %d", len(s.paths), s.h.ndocs))
	}
	dict := make([]byte, dictLen(s.h.nkeys))
	if _, err := s.f.ReadAt(dict, int64(s.h.dictOff)); err != nil {
		return s.corrupt(fmt.Errorf("dict: %w", err))
	}
	if crc32.Checksum(dict, castagnoli) != s.h.dictCRC {
		return s.corrupt(errors.New("dict section checksum mismatch"))
	}
	le := binary.LittleEndian
	n, nb := int(s.h.nkeys), int(numBlocks(s.h.nkeys))
	s.keys, s.rel = make([]uint32, n), make([]uint32, n)
	s.boff, s.bcrc = make([]uint64, nb), make([]uint32, nb)
	for i := range n {
		s.keys[i], s.rel[i] = le.Uint32(dict[4*i:]), le.Uint32(dict[4*(n+i):])
	}
	for b := range nb {
		e := dict[8*n+blockEntry*b:]
		s.boff[b], s.bcrc[b] = le.Uint64(e), le.Uint32(e[8:])
	}
	// Keys increase; blocks start at 0 and increase; within a block the
	// offsets start at 0 and increase: every postings list is non-empty
	// and inside the section.
	for i := range n {
		b := i / blockKeys
		if i > 0 && s.keys[i] <= s.keys[i-1] {
			return s.corrupt(fmt.Errorf("dict: key %d out of order", i))
		}
		if i%blockKeys == 0 {
			if s.rel[i] != 0 || (b == 0 && s.boff[0] != 0) || (b > 0 && s.boff[b] <= s.boff[b-1]) || s.boff[b] >= s.h.postLen {
				return s.corrupt(fmt.Errorf("dict: block %d out of order", b))
			}
		} else if s.rel[i] <= s.rel[i-1] {
			return s.corrupt(fmt.Errorf("dict: key %d out of order", i))
		}
		if _, end := s.span(i); uint64(s.rel[i]) >= end-s.boff[b] {
			return s.corrupt(fmt.Errorf("dict: key %d past its block", i))
		}
	}
	return nil
}

// blockSpan returns the section offsets where block b's postings start
// and end.
func (s *Segment) blockSpan(b int) (uint64, uint64) {
	if b+1 < len(s.boff) {
		return s.boff[b], s.boff[b+1]
	}
	return s.boff[b], s.h.postLen
}

// span returns the offsets of key i's postings in its block: start, and
// the section offset where they end.
func (s *Segment) span(i int) (uint32, uint64) {
	b := i / blockKeys
	if i+1 < len(s.keys) && (i+1)%blockKeys != 0 {
		return s.rel[i], s.boff[b] + uint64(s.rel[i+1])
	}
	_, end := s.blockSpan(b)
	return s.rel[i], end
}

// block reads and checks the postings of block b.
func (s *Segment) block(b int) ([]byte, error) {
	start, end := s.blockSpan(b)
	buf := make([]byte, end-start)
	if _, err := s.f.ReadAt(buf, int64(s.h.postOff+start)); err != nil {
		return nil, s.corrupt(fmt.Errorf("postings of block %d: %w", b, err))
	}
	if crc32.Checksum(buf, castagnoli) != s.bcrc[b] {
		return nil, s.corrupt(fmt.Errorf("postings of key %06x: block %d checksum mismatch", s.keys[b*blockKeys], b))
	}
	return buf, nil
}

// keyDocs decodes key i's postings from blk, its block's.
func (s *Segment) keyDocs(i int, blk []byte) ([]uint32, error) {
	rel, end := s.span(i)
	docs, err := decodePostings(blk[rel:end-s.boff[i/blockKeys]], s.h.ndocs)
	if err != nil {
		return nil, s.corrupt(fmt.Errorf("postings of key %06x: %v", s.keys[i], err))
	}
	return docs, nil
}

// Paths returns the document table: each document's path and kind.
func (s *Segment) Paths() ([]string, []byte, error) {
	if err := s.load(); err != nil {
		return nil, nil, err
	}
	return s.paths, s.kinds, nil
}

// Postings returns the documents holding key (an empty bitmap if none).
func (s *Segment) Postings(key uint32) (*roaring.Bitmap, error) {
	if err := s.load(); err != nil {
		return nil, err
	}
	bm := roaring.New()
	i, ok := slices.BinarySearch(s.keys, key)
	if !ok {
		return bm, nil
	}
	blk, err := s.block(i / blockKeys)
	if err != nil {
		return nil, err
	}
	docs, err := s.keyDocs(i, blk)
	if err != nil {
		return nil, err
	}
	bm.AddMany(docs)
	return bm, nil
}

// decodePostings decodes one postings list of a segment of ndocs
// documents: strictly increasing numbers below ndocs.
func decodePostings(b []byte, ndocs uint32) ([]uint32, error) {
	var out []uint32
	var prev uint64
	for len(b) > 0 {
		v, w := binary.Uvarint(b)
		if w <= 0 {
			return nil, errors.New("bad varint")
		}
		b = b[w:]
		d := v
		if len(out) > 0 {
			if v == 0 || v >= uint64(ndocs) {
				return nil, errors.New("numbers not increasing")
			}
			d = prev + v
		}
		if d >= uint64(ndocs) {
			return nil, fmt.Errorf("document %d of %d", d, ndocs)
		}
		out = append(out, uint32(d))
		prev = d
	}
	if len(out) == 0 {
		return nil, errors.New("empty postings")
	}
	return out, nil
}

// keyIter yields a segment's keys in order with their postings (the
// segment loaded).
type keyIter struct {
	s   *Segment
	i   int
	key uint32
	blk []byte // the postings of block bi
	bi  int
}

func (it *keyIter) next() bool {
	if it.i >= len(it.s.keys) {
		return false
	}
	it.key = it.s.keys[it.i]
	it.i++
	return true
}

// docs decodes the current key's postings.
func (it *keyIter) docs() ([]uint32, error) {
	i := it.i - 1
	if b := i / blockKeys; it.blk == nil || it.bi != b {
		blk, err := it.s.block(b)
		if err != nil {
			return nil, err
		}
		it.blk, it.bi = blk, b
	}
	return it.s.keyDocs(i, it.blk)
}

// writer writes one segment file: docs first, then postings key by key
// in increasing order, then the dict and the header.
type writer struct {
	f      *os.File
	w      *bufio.Writer
	h      header
	keys   []byte
	rel    []byte
	blocks []byte
	bstart uint64 // where the current block's postings start
	bcrc   uint32 // their CRC so far
	off    uint64
	buf    []byte
	ndocs  uint32
}

func newWriter(f *os.File, paths []string, kinds []byte) (*writer, error) {
	wr := &writer{f: f, w: bufio.NewWriterSize(f, 1<<20)}
	if _, err := wr.w.Write(make([]byte, headerSize)); err != nil {
		return nil, err
	}
	h := crc32.New(castagnoli)
	var b []byte
	var n uint64
	for i, p := range paths {
		b = append(b[:0], kinds[i])
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
		h.Write(b)
		if _, err := wr.w.Write(b); err != nil {
			return nil, err
		}
		n += uint64(len(b))
	}
	wr.ndocs = uint32(len(paths))
	wr.h = header{ndocs: wr.ndocs, docsOff: headerSize, docsLen: n, postOff: headerSize + n, docsCRC: h.Sum32()}
	return wr, nil
}

// add writes the postings of key (docs strictly increasing, not empty).
func (wr *writer) add(key uint32, docs []uint32) error {
	b := wr.buf[:0]
	var prev uint32
	for i, d := range docs {
		if i == 0 {
			b = binary.AppendUvarint(b, uint64(d))
		} else {
			b = binary.AppendUvarint(b, uint64(d-prev))
		}
		prev = d
	}
	wr.buf = b
	le := binary.LittleEndian
	if wr.h.nkeys%blockKeys == 0 {
		wr.endBlock()
		wr.bstart, wr.bcrc = wr.off, 0
		wr.blocks = le.AppendUint64(wr.blocks, wr.off)
		wr.blocks = le.AppendUint32(wr.blocks, 0)
	}
	wr.keys = le.AppendUint32(wr.keys, key)
	wr.rel = le.AppendUint32(wr.rel, uint32(wr.off-wr.bstart))
	wr.bcrc = crc32.Update(wr.bcrc, castagnoli, b)
	wr.h.nkeys++
	wr.off += uint64(len(b))
	_, err := wr.w.Write(b)
	return err
}

// endBlock stores the current block's checksum.
func (wr *writer) endBlock() {
	if n := len(wr.blocks); n > 0 {
		binary.LittleEndian.PutUint32(wr.blocks[n-4:], wr.bcrc)
	}
}

// finish writes the dict and the header and syncs the file.
func (wr *writer) finish() error {
	wr.h.postLen = wr.off
	wr.endBlock()
	dict := slices.Concat(wr.keys, wr.rel, wr.blocks)
	wr.h.dictCRC = crc32.Checksum(dict, castagnoli)
	if _, err := wr.w.Write(dict); err != nil {
		return err
	}
	if err := wr.w.Flush(); err != nil {
		return err
	}
	if _, err := wr.f.WriteAt(wr.h.encode(), 0); err != nil {
		return err
	}
	return wr.f.Sync()
}
