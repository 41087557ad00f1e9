package mvcc

import (
	"bytes"
	"context"
	"sync"
)

// Streaming a file's chunks while it is written. A file written from
// offset 0 straight to its end (dd, cp, split) would otherwise be chunked,
// hashed and stored whole at its commit, after the last write, on one
// core. A Stream takes the bytes as the writes arrive and cuts, hashes and
// stores full chunks in the background (the same cutter, hash, frame and
// batches as PutContent: chunkstore.go), so the commit only finishes the
// tail and writes the version (WriteStreamAttr). The content it stores is
// the one PutContent would store for the same bytes. The chunks stored so
// far can be read back (Stored) before the commit, so the caller need not
// keep the bytes they hold.
//
// Chunks stored before the commit that names them are pinned (Store.pins)
// so that an orphan sweep, a prune, a hard forget or a redaction that
// finds them unreferenced leaves them alone until the caller releases the
// stream (Release, Cancel); a crash drops the pins with the process and leaves the chunks as
// orphans for the next sweep (orphans.go). The commit's own check of every
// chunk it names (incChunkRef) remains the safety net: a chunk deleted
// anyway (by another process sharing the store) makes the commit store the
// content again from the caller's bytes (if the caller no longer has them
// but reads them from Stored's chunks, that commit fails: fs keeps them
// on a store other processes write, Store.Shared).
const (
	// streamBuf is the size of the buffers the writes fill; each has
	// chunkMax of room in front for the previous buffer's uncut tail,
	// so the cutter reads a buffer in place.
	streamBuf = 1 << 20
	// streamBatch is a stream's chunk bytes per batch (kv Update): four
	// times PutContent's, since each large batch is a base commit of its
	// own with two fsyncs (kv/wal/bulk.go) and a stream's storer is
	// bound by them: 512 MB in 32 commits instead of 128.
	streamBatch = 4 * chunkBatchBytes
)

var streamBufs = sync.Pool{New: func() any { b := make([]byte, chunkMax, chunkMax+streamBuf); return &b }}

// Stream is a file's content being stored as it is written; see above.
// Write, WaitBacklog and Stored may be called from any goroutine (the
// caller orders the writes); Stop, Cancel and WriteStreamAttr end it, and
// Release (or Cancel) unpins its chunks.
type Stream struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	wake    *sync.Cond // the cutter: more bytes, closed or cancelled
	drained *sync.Cond // the writers: backlog went down, or the end
	queue   []*[]byte  // full buffers not cut yet, in order
	cur     *[]byte    // buffer being filled (nil: none)
	backlog int        // bytes written and not cut yet
	written int64
	closed  bool // no more writes (finish)
	ended   bool // the cutter has returned
	// stored is how many bytes from offset 0 are in stored chunks (or
	// holes), storedExt their extents (only ever appended to).
	stored    int64
	storedExt []Extent

	exited chan struct{}
	c      *Content
	err    error
	pinned []Hash // guarded by the storer's hand-over; read after exited
	unpin  sync.Once
}

// NewStream starts a stream for a file's content from offset 0.
func (s *Store) NewStream() *Stream {
	ctx, cancel := context.WithCancel(context.Background())
	st := &Stream{s: s, ctx: ctx, cancel: cancel, exited: make(chan struct{})}
	st.wake = sync.NewCond(&st.mu)
	st.drained = sync.NewCond(&st.mu)
	go st.run()
	return st
}

// Write appends p to the content. It copies p and never waits: the caller
// may hold locks; Backlog tells it whether to wait before more.
func (st *Stream) Write(p []byte) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed || st.ended {
		return
	}
	st.written += int64(len(p))
	st.backlog += len(p)
	for len(p) > 0 {
		if st.cur == nil {
			st.cur = streamBufs.Get().(*[]byte)
			*st.cur = (*st.cur)[:chunkMax]
		}
		b := *st.cur
		n := copy(b[len(b):cap(b)], p)
		*st.cur, p = b[:len(b)+n], p[n:]
		if len(*st.cur) == cap(b) {
			st.queue = append(st.queue, st.cur)
			st.cur = nil
			st.wake.Signal()
		}
	}
}

// Written is the number of bytes written to the stream.
func (st *Stream) Written() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.written
}

// WaitBacklog waits, unless ctx ends first, until at most cut bytes
// written are not cut yet and at most stored are not stored yet, or the
// stream has ended. The caller holds no lock that readers need: it only
// slows the writer down.
func (st *Stream) WaitBacklog(ctx context.Context, cut int, stored int64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	over := func() bool { return st.backlog > cut || st.written-st.stored > stored }
	if !over() || st.ended || st.closed {
		return
	}
	stop := context.AfterFunc(ctx, func() {
		st.mu.Lock()
		st.drained.Broadcast()
		st.mu.Unlock()
	})
	defer stop()
	for over() && !st.ended && !st.closed && ctx.Err() == nil {
		st.drained.Wait()
	}
}

// StoredSize is Stored().Size without building the content (a writer
// asks at every write).
func (st *Stream) StoredSize() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.stored
}

// Stored returns the content of the bytes stored so far: the file's
// first Size bytes, read back with ReadAt as a content of their own. Its
// chunks stay pinned until Release.
func (st *Stream) Stored() *Content {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := len(st.storedExt)
	return &Content{Size: uint64(st.stored), Extents: st.storedExt[:n:n]}
}

// addStored records a batch the storer has stored (chunkStorer.stored).
func (st *Stream) addStored(b *chunkBatch) {
	ext := make([]Extent, 0, len(b.items))
	hashes := make([]byte, 0, len(Hash{})*len(b.items))
	var n int64
	for _, it := range b.items {
		n += int64(it.n)
		if it.off < 0 {
			ext = append(ext, Extent{Len: it.n})
			continue
		}
		hashes = append(hashes, it.h[:]...)
		l := len(hashes)
		ext = append(ext, Extent{Chunk: hashes[l-len(Hash{}) : l : l], Len: it.n})
	}
	st.mu.Lock()
	st.storedExt = append(st.storedExt, ext...)
	st.stored += n
	st.drained.Broadcast()
	st.mu.Unlock()
}

// Stop ends the stream without a content; its chunks stay pinned (what
// Stored returned stays readable) until Release. It does not wait for the
// background work to stop.
func (st *Stream) Stop() {
	st.cancel()
	st.mu.Lock()
	st.closed = true
	st.wake.Signal()
	st.drained.Broadcast()
	st.mu.Unlock()
}

// Ended is closed once the stream's background work has stopped (after
// its end: Stop, Cancel or WriteStreamAttr).
func (st *Stream) Ended() <-chan struct{} { return st.exited }

// Cancel is Stop and Release: the chunks are orphans unless something
// else names them.
func (st *Stream) Cancel() {
	st.Stop()
	st.Release()
}

// Release stops the stream if it runs and unpins its chunks once the
// background work has stopped, without waiting for it.
func (st *Stream) Release() {
	st.cancel()
	select {
	case <-st.exited:
		st.release()
	default:
		go st.release()
	}
}

// finish cuts and stores the rest and returns the content; the chunks
// stay pinned until release.
func (st *Stream) finish() (*Content, error) {
	st.mu.Lock()
	if !st.closed {
		st.closed = true
		if st.cur != nil {
			st.queue = append(st.queue, st.cur)
			st.cur = nil
		}
		st.wake.Signal()
	}
	st.mu.Unlock()
	<-st.exited
	return st.c, st.err
}

// release unpins the chunks after the background work stopped.
func (st *Stream) release() {
	st.cancel()
	<-st.exited
	st.unpin.Do(func() { st.s.pins.remove(st.pinned) })
}

// next returns the next buffer to cut, waiting for one; nil and last at
// the end of the content, nil and not last when cancelled.
func (st *Stream) next() (buf *[]byte, last bool) {
	st.mu.Lock()
	defer st.mu.Unlock()
	for len(st.queue) == 0 && !st.closed && st.ctx.Err() == nil {
		st.wake.Wait()
	}
	if st.ctx.Err() != nil {
		return nil, false
	}
	if len(st.queue) == 0 {
		return nil, true
	}
	buf = st.queue[0]
	st.queue[0] = nil
	st.queue = st.queue[1:]
	return buf, st.closed && len(st.queue) == 0
}

// cut marks n bytes as cut (the writers may go on).
func (st *Stream) cut(n int) {
	st.mu.Lock()
	st.backlog -= n
	st.drained.Broadcast()
	st.mu.Unlock()
}

// run is the cutter: it cuts the buffers into chunks in batches, which a
// chunkStorer hashes and stores (in a goroutine of its own past the first
// batch).
func (st *Stream) run() {
	cs := st.s.newChunkStorer()
	cs.pin = func(hs []Hash) { st.s.pins.add(hs); st.pinned = append(st.pinned, hs...) }
	cs.stored = st.addStored
	b := getBatch()
	var carry []byte // the previous buffer's uncut tail (in that buffer)
	var prev *[]byte
	err := func() error {
		for {
			buf, last := st.next()
			if buf == nil && !last {
				return st.ctx.Err()
			}
			data := carry
			if buf != nil {
				// The tail goes in front of the new bytes, in the room kept there.
				start := chunkMax - len(carry)
				copy((*buf)[start:], carry)
				data = (*buf)[start:]
			}
			if prev != nil && buf != nil {
				streamBufs.Put(prev)
				prev = nil
			}
			in := len(data) - len(carry)
			for len(data) > 0 {
				n := cdcCut(data)
				if n == len(data) && n < chunkMax && !last {
					break // where this chunk ends depends on bytes not here yet
				}
				var err error
				if b, err = cs.add(b, data[:n]); err != nil {
					return err
				}
				data = data[n:]
			}
			carry = data
			if buf != nil {
				prev = buf
			}
			st.cut(in)
			if last {
				return nil
			}
		}
	}()
	if prev != nil {
		streamBufs.Put(prev)
	}
	if err != nil {
		st.err = cs.abort(b, err)
	} else {
		st.c, st.err = cs.close(b)
	}
	st.mu.Lock()
	st.ended = true
	st.drained.Broadcast()
	st.mu.Unlock()
	close(st.exited)
}

// add copies chunk data into b (a hole keeps no bytes) and hands b to the
// storer when it is full; it returns the batch to fill next.
func (cs *chunkStorer) add(b *chunkBatch, data []byte) (*chunkBatch, error) {
	if bytes.Equal(data, zeros[:len(data)]) {
		b.items = append(b.items, batchItem{off: -1, n: uint64(len(data))})
		return b, nil
	}
	if len(b.buf) == 0 && cap(b.buf) < streamBatch+4+chunkMax {
		b.buf = make([]byte, 0, streamBatch+4+chunkMax) // grown once, not by appends
	}
	off := len(b.buf)
	b.buf = append(append(b.buf, 0, 0, 0, 0), data...)
	b.items = append(b.items, batchItem{off: off, n: uint64(len(data))})
	if len(b.buf) >= streamBatch {
		return cs.hand(b)
	}
	return b, nil
}

// WriteStreamAttr is WriteSparseAttr with the content st has stored as it
// was written (sp's bytes, which it falls back to if the stream failed or
// a chunk it stored was deleted before the commit). It ends st; the
// caller releases it (Release) once it no longer reads Stored's chunks.
func (s *Store) WriteStreamAttr(ctx context.Context, sid SessionID, ino Ino, st *Stream, sp Sparse, mtime int64, a SetAttr) (*Inode, error) {
	var n *Inode
	err := s.commitPut(func(attempt int) (*Content, error) {
		if attempt == 0 {
			if c, err := st.finish(); err == nil && c.Size == uint64(sp.Size) {
				return c, nil
			}
		}
		return s.PutSparse(ctx, sp)
	}, s.commitWrite(sid, ino, mtime, a, nil, &n))
	return n, err
}

// chunkPins are the chunks streams stored that no commit names yet: the
// code that deletes unreferenced chunks skips them (pinned).
type chunkPins struct {
	mu sync.Mutex
	m  map[Hash]int
}

func (p *chunkPins) add(hs []Hash) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[Hash]int{}
	}
	for _, h := range hs {
		p.m[h]++
	}
}

func (p *chunkPins) remove(hs []Hash) {
	if len(hs) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range hs {
		if p.m[h]--; p.m[h] <= 0 {
			delete(p.m, h)
		}
	}
}

// pinned reports whether chunk h must not be deleted now.
func (p *chunkPins) pinned(h Hash) bool {
	if p == nil {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[h] > 0
}
