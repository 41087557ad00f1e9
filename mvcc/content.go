package mvcc

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// Content is stored inline in the inode record up to InlineMax bytes, and
// above that as content-defined chunks (Rabin fingerprints, ~64 KiB on average) keyed
// by SHA-256, so equal bytes are stored once and an edit in the middle of a
// large file stores about one new chunk. All-zero chunks are holes.
const (
	InlineMax = 4096
	chunkMin  = 16 << 10
	chunkMax  = 256 << 10
)

var zeros [chunkMax]byte

// Content is the result of storing a file's bytes.
type Content struct {
	Size    uint64
	Inline  []byte
	Extents []Extent
	Hash    []byte // SHA-256 of all bytes
}

// PutContent chunks r and stores every chunk not yet present. It runs
// outside any commit: chunks are content-addressed, so writing them early is
// harmless, and the commit that references them stays short.
func (s *Store) PutContent(r io.Reader) (*Content, error) {
	head := make([]byte, InlineMax+1)
	n, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if n > InlineMax {
		return s.putChunks(head[:n], r) // chunkstore.go
	}
	sum := sha256.Sum256(head[:n])
	c := &Content{Size: uint64(n), Inline: append([]byte(nil), head[:n]...), Hash: sum[:]}
	if n == 0 {
		c.Inline = nil
	}
	return c, nil
}

func appendHole(ext []Extent, n uint32) []Extent {
	if l := len(ext); l > 0 && ext[l-1].Chunk == nil && uint64(ext[l-1].Len)+uint64(n) < 1<<31 {
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

// ReadAt reads n's content in its own snapshot.
func (s *Store) ReadAt(n *Inode, p []byte, off int64) (int, error) {
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
