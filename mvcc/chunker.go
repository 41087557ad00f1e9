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

// chunkers recycles a chunker (its 512 KiB read buffer is zeroed by every
// allocation) and eachChunk's chunk buffer: a commit of each file above
// InlineMax would otherwise allocate them anew.
var chunkers = sync.Pool{New: func() any { return &pooledChunker{c: newChunker(nil)} }}

type pooledChunker struct {
	c   *chunker.Chunker
	buf []byte // eachChunk's; allocated on its first use
}

// eachChunk cuts r into chunks and calls fn with each chunk's bytes (valid
// only during the call) and whether it is all zeros (a hole).
func eachChunk(r io.Reader, fn func(data []byte, hole bool) error) error {
	cc := newChunkCutter(r)
	defer cc.release()
	if cc.pc.buf == nil {
		cc.pc.buf = make([]byte, chunkMax)
	}
	for {
		data, hole, err := cc.next(cc.pc.buf)
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		if err := fn(data, hole); err != nil {
			return err
		}
	}
}

// chunkCutter is eachChunk for a caller that chooses where each chunk's
// bytes land, so that they need not be copied out of a chunk buffer.
type chunkCutter struct{ pc *pooledChunker }

// newChunkCutter takes a chunker from the pool for r; release returns it.
func newChunkCutter(r io.Reader) chunkCutter {
	pc := chunkers.Get().(*pooledChunker)
	pc.c.ResetWithBoundaries(r, chunkPol, chunkMin, chunkMax)
	pc.c.SetAverageBits(16)
	return chunkCutter{pc}
}

func (cc chunkCutter) release() {
	cc.pc.c.Reset(nil, chunkPol) // drop r
	chunkers.Put(cc.pc)
}

// next cuts the next chunk into dst[:0] (in place when cap(dst) is at
// least chunkMax) and returns its bytes and whether they are all zeros;
// io.EOF after the last chunk.
func (cc chunkCutter) next(dst []byte) (data []byte, hole bool, err error) {
	ch, err := cc.pc.c.Next(dst)
	if err != nil {
		return nil, false, err
	}
	return ch.Data, bytes.Equal(ch.Data, zeros[:len(ch.Data)]), nil
}
