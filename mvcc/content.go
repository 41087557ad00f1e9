package mvcc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Content is stored inline in the inode record up to InlineMax bytes, and
// above that as content-defined chunks (a gear hash, chunker.go; ~80 KiB on average) keyed
// by SHA-256, so equal bytes are stored once and an edit in the middle of a
// large file stores about one new chunk. All-zero chunks are holes.
const (
	InlineMax = 4096
	chunkMin  = 16 << 10
	chunkMax  = 256 << 10
)

// Sparse files. A hole is an extent without a chunk, of any length: a
// truncate that grows a file, or a write far beyond its end, stores no
// zeros and reads none back.
const (
	// MaxFileSize is the largest size of a file (EFBIG beyond): 2^62
	// keeps every offset plus length far from int64 overflow.
	MaxFileSize = 1 << 62
	// hashHolesMax: an imported file with more hole bytes than this has
	// no whole-file hash (ContentHash nil, no sha256 in its events),
	// since hashing its zeros would cost what the holes save. (Content
	// written through PutContent has one only when it is inline or a
	// single chunk: chunkstore.go.)
	hashHolesMax = 16 << 20
	// MaxInMemory is the largest file Content reads into memory (diff,
	// redact, grep); above it, ErrTooBig.
	MaxInMemory = 1 << 30
)

var zeros [chunkMax]byte

// Content is the result of storing a file's bytes.
type Content struct {
	Size    uint64
	Inline  []byte
	Extents []Extent
	Hash    []byte // SHA-256 of all bytes; nil when not free (chunkstore.go)

	// pending holds chunks not stored yet (putContent's inCommit): the
	// commit that applies this content puts them (WriteTx.applyContent).
	pending *chunkBatch
}

// PutContent chunks r and stores every chunk not yet present. It runs
// outside any commit: chunks are content-addressed, so writing them early is
// harmless, and the commit that references them stays short. ctx ends a
// large content's chunking early with ctx.Err(); the chunks stored by
// then are orphans, like those of a commit that failed (orphans.go).
func (s *Store) PutContent(ctx context.Context, r io.Reader) (*Content, error) {
	return s.putContent(ctx, r, false)
}

// putContent is PutContent; inCommit leaves the chunks of a content that
// fits one batch to the commit that applies it (Content.pending).
func (s *Store) putContent(ctx context.Context, r io.Reader, inCommit bool) (*Content, error) {
	head := make([]byte, InlineMax+1)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n > InlineMax {
		return s.putChunks(ctx, head[:n], r, inCommit) // chunkstore.go
	}
	sum := sha256.Sum256(head[:n])
	c := &Content{Size: uint64(n), Inline: append([]byte(nil), head[:n]...), Hash: sum[:]}
	if n == 0 {
		c.Inline = nil
	}
	return c, nil
}

// Range is a run [Off, Off+Len) of a file.
type Range struct{ Off, Len int64 }

// Sparse is the content of a file of Size bytes of which only the Data
// ranges (in order, disjoint) are read from R: the rest is zeros.
type Sparse struct {
	R    io.ReaderAt
	Size int64
	Data []Range
}

// PutSparse is PutContent of sp that reads only its data: holes cost
// nothing, however long. ctx ends it early with ctx.Err().
func (s *Store) PutSparse(ctx context.Context, sp Sparse) (*Content, error) {
	return s.putSparseContent(ctx, sp, false)
}

// putSparseContent is PutSparse; inCommit as for putContent.
func (s *Store) putSparseContent(ctx context.Context, sp Sparse, inCommit bool) (*Content, error) {
	if sp.Size < 0 || sp.Size > MaxFileSize {
		return nil, fmt.Errorf("%w: size %d", ErrTooBig, sp.Size)
	}
	if sp.Size <= InlineMax {
		buf := make([]byte, sp.Size)
		for _, d := range sp.Data {
			if d.Off < 0 || d.Off+d.Len > sp.Size {
				return nil, fmt.Errorf("%w: data range [%d, %d) of a %d-byte file", ErrInvalid, d.Off, d.Off+d.Len, sp.Size)
			}
			if n, err := sp.R.ReadAt(buf[d.Off:d.Off+d.Len], d.Off); err != nil && !(errors.Is(err, io.EOF) && n == int(d.Len)) {
				return nil, err
			}
		}
		return s.putContent(ctx, bytes.NewReader(buf), inCommit)
	}
	return s.putSparse(ctx, sp, inCommit) // chunkstore.go
}

// DataRanges returns the runs of n's content below limit that are not
// holes, adjacent chunks merged.
func (n *Inode) DataRanges(limit int64) []Range {
	limit = min(limit, int64(n.Size))
	if n.Extents == nil {
		if l := min(int64(len(n.Inline)), limit); l > 0 {
			return []Range{{0, l}}
		}
		return nil
	}
	var out []Range
	var pos int64
	for _, e := range n.Extents {
		if pos >= limit {
			break
		}
		l := min(int64(e.Len), limit-pos)
		if e.Chunk != nil {
			out = addRange(out, Range{pos, l})
		}
		pos += int64(e.Len)
	}
	return out
}

// addRange appends r to the ordered ranges rs, merging it with the last
// one when they touch or overlap.
func addRange(rs []Range, r Range) []Range {
	if l := len(rs); l > 0 && rs[l-1].Off+rs[l-1].Len >= r.Off {
		rs[l-1].Len = max(rs[l-1].Len, r.Off+r.Len-rs[l-1].Off)
		return rs
	}
	return append(rs, r)
}

// MergeRanges merges two ordered lists of ranges into one.
func MergeRanges(a, b []Range) []Range {
	out := make([]Range, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || (len(a) > 0 && a[0].Off <= b[0].Off) {
			out, a = addRange(out, a[0]), a[1:]
		} else {
			out, b = addRange(out, b[0]), b[1:]
		}
	}
	return out
}

// inHole reports whether [off, end) of n lies in holes (reading it needs
// no chunk).
func (n *Inode) inHole(off, end int64) bool {
	if n.Extents == nil {
		return off >= int64(len(n.Inline))
	}
	var pos int64
	for _, e := range n.Extents {
		next := pos + int64(e.Len)
		if next > off {
			if e.Chunk != nil {
				return false
			}
			if next >= end {
				return true
			}
		}
		pos = next
	}
	return true
}

func appendHole(ext []Extent, n uint64) []Extent {
	if l := len(ext); l > 0 && ext[l-1].Chunk == nil {
		ext[l-1].Len += n
		return ext
	}
	return append(ext, Extent{Len: n})
}

// Apply sets n's content fields from c (the caller commits n).
func (c *Content) Apply(n *Inode) {
	n.Size, n.Inline, n.Extents, n.ContentHash = c.Size, c.Inline, c.Extents, c.Hash
}

// HashHex is the content hash as sha256sum prints it.
func (n *Inode) HashHex() string { return hex.EncodeToString(n.ContentHash) }

// Chunk returns a chunk's bytes, checked against their checksum.
func (t *ReadTx) Chunk(h []byte) ([]byte, error) {
	data, err := t.chunkRef(h)
	if err != nil {
		return nil, err
	}
	return append([]byte(nil), data...), nil
}

// chunkRef is Chunk without the copy: the bytes are the store's, valid
// until the transaction ends.
func (t *ReadTx) chunkRef(h []byte) ([]byte, error) {
	k := key(pChunk, h)
	v, err := t.r.Get(k)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("%w: missing chunk %x", ErrCorrupt, h)
	}
	return unframe(k, v)
}

// ReadAt reads n's content at off into p, like io.ReaderAt.
func (t *ReadTx) ReadAt(n *Inode, p []byte, off int64) (int, error) {
	if off >= int64(n.Size) {
		return 0, io.EOF
	}
	if n.Extents == nil {
		c := copy(p, padTo(n.Inline, n.Size)[off:])
		if c < len(p) {
			return c, io.EOF
		}
		return c, nil
	}
	// Find the extent holding off (without allocating: this runs for
	// every FUSE read).
	i, start := 0, int64(0)
	for i < len(n.Extents) && start+int64(n.Extents[i].Len) <= off {
		start += int64(n.Extents[i].Len)
		i++
	}
	done := 0
	for ; i < len(n.Extents) && done < len(p); i++ {
		e := n.Extents[i]
		in := off + int64(done) - start
		start += int64(e.Len)
		want := min(int64(e.Len)-in, int64(len(p)-done))
		if e.Chunk == nil {
			clear(p[done : done+int(want)])
		} else {
			// Straight from the snapshot into p: one copy.
			data, err := t.chunkRef(e.Chunk)
			if err != nil {
				return done, err
			}
			if int64(len(data)) != int64(e.Len) {
				return done, fmt.Errorf("%w: chunk %x is %d bytes, want %d", ErrCorrupt, e.Chunk, len(data), e.Len)
			}
			copy(p[done:], data[in:in+want])
		}
		done += int(want)
	}
	if done < len(p) {
		return done, io.EOF
	}
	return done, nil
}

// padTo returns inline data zero-extended to size (a truncate that grew a
// small file).
func padTo(b []byte, size uint64) []byte {
	if uint64(len(b)) >= size {
		return b[:size]
	}
	return append(append([]byte(nil), b...), make([]byte, size-uint64(len(b)))...)
}

// ReadAt reads n's content in its own snapshot (none for a hole).
func (s *Store) ReadAt(n *Inode, p []byte, off int64) (int, error) {
	if off >= 0 && off < int64(n.Size) && n.inHole(off, off+int64(len(p))) {
		c := min(int64(len(p)), int64(n.Size)-off)
		clear(p[:c])
		if c < int64(len(p)) {
			return int(c), io.EOF
		}
		return int(c), nil
	}
	var c int
	err := s.View(func(t *ReadTx) error {
		var err error
		c, err = t.ReadAt(n, p, off)
		return err
	})
	return c, err
}

// ReadAll returns n's whole content in its own snapshot.
func (s *Store) ReadAll(n *Inode) ([]byte, error) { return s.ReadAllInto(n, nil) }

// ReadAllInto is ReadAll into buf when it has the capacity.
func (s *Store) ReadAllInto(n *Inode, buf []byte) ([]byte, error) {
	var data []byte
	err := s.View(func(t *ReadTx) error {
		var err error
		data, err = t.ContentInto(n, buf)
		return err
	})
	return data, err
}

// Reader returns an io.ReaderAt over n's content.
func (s *Store) Reader(n *Inode) io.ReaderAt { return readerAt{s, n} }

type readerAt struct {
	s *Store
	n *Inode
}

func (r readerAt) ReadAt(p []byte, off int64) (int, error) { return r.s.ReadAt(r.n, p, off) }
