package mvcc

import (
	"bytes"
	"errors"
	"io"
	"sync"

	"github.com/restic/chunker"
)

// Content-defined chunking uses restic's Rabin-fingerprint chunker with one
// fixed polynomial, so chunk boundaries (and with them deduplication) are
// the same in every process and session. Changing the polynomial or the
// sizes would not break stored data, only stop new writes from
// deduplicating against it.
const chunkPol = chunker.Pol(0x3DA3358B4DC173)

// newChunker cuts r into chunks of chunkMin..chunkMax bytes, 64 KiB on
// average.
func newChunker(r io.Reader) *chunker.Chunker {
	c := chunker.NewWithBoundaries(r, chunkPol, chunkMin, chunkMax)
	c.SetAverageBits(16)
	return c
}

// chunkers recycles a chunker and its chunk buffer (768 KiB together,
// zeroed by every allocation): a commit of each file above InlineMax would
// otherwise allocate them anew.
var chunkers = sync.Pool{New: func() any {
	return &pooledChunker{c: newChunker(nil), buf: make([]byte, chunkMax)}
}}

type pooledChunker struct {
	c   *chunker.Chunker
	buf []byte
}

// eachChunk cuts r into chunks and calls fn with each chunk's bytes (valid
// only during the call) and whether it is all zeros (a hole).
func eachChunk(r io.Reader, fn func(data []byte, hole bool) error) error {
	pc := chunkers.Get().(*pooledChunker)
	defer func() {
		pc.c.Reset(nil, chunkPol) // drop r
		chunkers.Put(pc)
	}()
	c, buf := pc.c, pc.buf
	c.ResetWithBoundaries(r, chunkPol, chunkMin, chunkMax)
	c.SetAverageBits(16)
	for {
		ch, err := c.Next(buf)
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := fn(ch.Data, bytes.Equal(ch.Data, zeros[:len(ch.Data)])); err != nil {
			return err
		}
	}
}
