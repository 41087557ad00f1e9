package mvcc

import (
	"bytes"
	"errors"
	"io"

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

// eachChunk cuts r into chunks and calls fn with each chunk's bytes (valid
// only during the call) and whether it is all zeros (a hole).
func eachChunk(r io.Reader, fn func(data []byte, hole bool) error) error {
	c := newChunker(r)
	buf := make([]byte, chunkMax)
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
