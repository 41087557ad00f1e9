package mvcc

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// Content-defined chunking with a gear rolling hash (FastCDC's, with its
// normalized chunking): each byte costs a shift, an add and a table
// lookup, about three times faster than the Rabin fingerprints (restic's
// chunker) padfs cut with before. A cut falls where the top bits of the
// hash, which depend on the last 64 bytes, are zero: the first chunkMin
// bytes of a chunk are never cut, up to cdcNormal the test takes more bits
// (rarer cuts), past it fewer, and chunkMax always cuts. Boundaries decide
// deduplication only: the table and the sizes must stay the same in every
// process and session for equal bytes to cut alike, but changing them
// breaks no stored data (content written before the change, by Rabin,
// reads as it was and merely does not deduplicate with new writes).
const (
	cdcNormal = chunkMin + 64<<10        // chunk size aimed at
	cdcMaskS  = (1<<18 - 1) << (64 - 18) // before cdcNormal: 1 cut in 256 KiB
	cdcMaskL  = (1<<14 - 1) << (64 - 14) // after it: 1 cut in 16 KiB
	// cdcBuf is the read-ahead of a chunker; a multiple of chunkMax so
	// that the bytes left over, moved to the front on each refill, are
	// a small part.
	cdcBuf = 4 * chunkMax
)

// gear is the hash's table: fixed pseudo-random values (splitmix64 from a
// fixed seed). TestCDCBoundariesPinned fails if they change.
var gear = func() (g [256]uint64) {
	x := uint64(0x9E3779B97F4A7C15)
	for i := range g {
		x += 0x9E3779B97F4A7C15
		z := x
		z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
		z = (z ^ (z >> 27)) * 0x94D049BB133111EB
		g[i] = z ^ (z >> 31)
	}
	return g
}()

// gear1 is gear shifted left by one: two steps of the hash fold into one,
// h<<2 + gear1[a] + gear[b], whose table sum does not wait for h.
var gear1 = func() (g [256]uint64) {
	for i, v := range gear {
		g[i] = v << 1
	}
	return g
}()

// cdcCut returns the length of the chunk that starts data (all of it if it
// is the tail of the input and ends before any cut).
func cdcCut(data []byte) int {
	n := len(data)
	if n <= chunkMin {
		return n
	}
	n = min(n, chunkMax)
	data = data[:n]
	norm := min(n, cdcNormal)
	h, i := cdcScan(data[:norm], 0, chunkMin, cdcMaskS)
	if i < 0 {
		return -i
	}
	if _, i = cdcScan(data, h, i, cdcMaskL); i < 0 {
		return -i
	}
	return n
}

// cdcScan rolls the hash x over data[i:] and returns minus the length up
// to the first byte after which x&mask is zero, or, if there is none, the
// hash at the end and len(data). The hash is a chain of dependent
// shift-adds, one a byte; two bytes fold into one step,
// x<<2 + (gear1[a] + gear[b]), whose table sum does not wait for x, which
// halves the chain (the hash between, x<<1 + gear[a], is tested off it).
// Eight bytes are tested a step; a step that holds a cut is rolled again
// one byte at a time. The hashes, and so the cuts, are those of one byte
// a step (TestCDCMatchesBytewise).
func cdcScan(data []byte, x uint64, i int, mask uint64) (uint64, int) {
	p := data[i:]
	for ; len(p) >= 8; p = p[8:] {
		q, x0 := p[:8], x
		x1 := x<<1 + gear[q[0]]
		x2 := x<<2 + (gear1[q[0]] + gear[q[1]])
		x3 := x2<<1 + gear[q[2]]
		x4 := x2<<2 + (gear1[q[2]] + gear[q[3]])
		x5 := x4<<1 + gear[q[4]]
		x6 := x4<<2 + (gear1[q[4]] + gear[q[5]])
		x7 := x6<<1 + gear[q[6]]
		x = x6<<2 + (gear1[q[6]] + gear[q[7]])
		if (x1&mask == 0) || (x2&mask == 0) || (x3&mask == 0) || (x4&mask == 0) ||
			(x5&mask == 0) || (x6&mask == 0) || (x7&mask == 0) || (x&mask == 0) {
			// A cut among these eight: find it one byte a step.
			x = x0
			break
		}
	}
	for ; len(p) > 0; p = p[1:] {
		x = x<<1 + gear[p[0]]
		if x&mask == 0 {
			return 0, len(p) - len(data) - 1
		}
	}
	return x, len(data)
}

// cdc cuts the bytes of a reader into chunks of chunkMin..chunkMax bytes
// (the last one may be shorter), ~80 KiB on average.
type cdc struct {
	r        io.Reader
	buf      []byte // read-ahead; buf[pos:end] not yet cut
	pos, end int
	eof      bool  // r has nothing more
	err      error // r's error other than EOF, returned at once
}

func (c *cdc) reset(r io.Reader) {
	c.r, c.pos, c.end, c.eof, c.err = r, 0, 0, false, nil
	if c.buf == nil {
		c.buf = make([]byte, cdcBuf)
	}
}

// fill tops the read-ahead up, unless a whole chunkMax is there already.
func (c *cdc) fill() {
	if c.eof || c.end-c.pos >= chunkMax {
		return
	}
	c.end = copy(c.buf, c.buf[c.pos:c.end])
	c.pos = 0
	n, err := io.ReadFull(c.r, c.buf[c.end:])
	c.end += n
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		c.eof = true
	case err != nil:
		c.eof, c.err = true, err
	}
}

// next copies the next chunk to dst[:0] (in place when cap(dst) is at
// least chunkMax) and returns it; io.EOF after the last one.
func (c *cdc) next(dst []byte) ([]byte, error) {
	c.fill()
	if c.err != nil {
		return nil, c.err
	}
	if c.pos == c.end {
		return nil, io.EOF
	}
	n := cdcCut(c.buf[c.pos:c.end])
	out := append(dst[:0], c.buf[c.pos:c.pos+n]...)
	c.pos += n
	return out, nil
}

// chunkers recycles a chunker (its read-ahead) and eachChunk's chunk
// buffer: a commit of each file above InlineMax would otherwise allocate
// them anew.
var chunkers = sync.Pool{New: func() any { return new(pooledChunker) }}

type pooledChunker struct {
	c   cdc
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
	pc.c.reset(r)
	return chunkCutter{pc}
}

func (cc chunkCutter) release() {
	cc.pc.c.reset(nil) // drop r
	chunkers.Put(cc.pc)
}

// next cuts the next chunk into dst[:0] (in place when cap(dst) is at
// least chunkMax) and returns its bytes and whether they are all zeros;
// io.EOF after the last chunk.
func (cc chunkCutter) next(dst []byte) (data []byte, hole bool, err error) {
	data, err = cc.pc.c.next(dst)
	if err != nil {
		return nil, false, err
	}
	return data, bytes.Equal(data, zeros[:len(data)]), nil
}
