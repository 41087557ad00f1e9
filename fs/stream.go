package fs

import (
	"context"
	"errors"
	"io"
	"sync/atomic"

	"github.com/padfs/padfs/mvcc"
)

// Streaming commits (mvcc/stream.go). A buffer whose content is nothing
// but bytes written in order from offset 0 (a new or emptied file being
// written start to end: dd, cp, split, a compiler's output) hands its
// writes, once it passes streamFrom bytes, to an mvcc.Stream, which cuts,
// hashes and stores the chunks in the background; the commit (close,
// fsync, the ticker) then only finishes the tail and writes the version.
// Anything else (a write anywhere but the end, a truncate, a hole punched,
// a staging file) stops the stream and the commit takes the buffer's view
// as before.
//
// The bytes are written into pages as always, but once the stream has
// stored the chunks that hold a page's bytes the page is dropped, and the
// stored chunks (Stream.Stored) become the content under the pages
// (fileState.under): reads of that range, and the fallback commit after a
// stop, read them from the store, and the bytes of a large file streamed
// are not written a second time into a spill file. The stream's chunks
// stay pinned while they are under the pages (until the buffer's reset:
// its commit, or its end). So a sequential buffer keeps in RAM only the
// bytes the stream has not stored yet, at most streamWindow (a writer
// waits for the stream beyond it).
const (
	// streamFrom is the size a sequential buffer must reach before it
	// streams: below it a commit is cheap, and a goroutine is not.
	streamFrom = spillAt
	// streamBacklog bounds the bytes written and not yet cut per file: a
	// writer past it waits, without f.mu, for the cutter to catch up.
	streamBacklog = 16 << 20
	// streamWindow bounds the bytes written and not stored yet per file,
	// the pages a streaming buffer holds: about what the stream's
	// pipeline holds anyway (its backlog and three batches of 16 MiB).
	streamWindow = 64 << 20
)

// streamCommits counts the commits that took a stream (tests).
var streamCommits atomic.Uint64

// streamState is a fileState's stream bookkeeping (guarded by f.mu).
type streamState struct {
	// seq is the size of the buffer while every byte of it was written
	// in order from offset 0 over an empty base; -1 once not.
	seq int64
	st  *mvcc.Stream
	// under is the stream (st, or one that stopped) whose stored chunks
	// are fileState.under; dropped counts the pages from 0 given up
	// for them.
	under   *mvcc.Stream
	dropped int64
}

// streamResetLocked starts the bookkeeping over for a clean view of n.
func (f *fileState) streamResetLocked(n *mvcc.Inode) {
	f.streamCancelLocked()
	f.strm.seq = -1
	if n.Size == 0 {
		f.strm.seq = 0
	}
}

// streamCancelLocked drops the stream, if any, and ends the sequence: the
// buffer is no longer its bytes in order.
func (f *fileState) streamCancelLocked() {
	if st := f.strm.st; st != nil {
		f.strm.st = nil
		st.Stop()
		f.streamDoneLocked(st)
	}
	f.strm.seq = -1
}

// streamDoneLocked lets go of a stream that has ended: its chunks are
// unpinned now, or at the reset if they are under the pages.
func (f *fileState) streamDoneLocked(st *mvcc.Stream) {
	if st != f.strm.under {
		st.Release()
	}
}

// streamUnderResetLocked makes the base the content under the pages again
// (the caller resets baseLimit, or it is 0) and unpins the stream's
// chunks that were.
func (f *fileState) streamUnderResetLocked() {
	if u := f.strm.under; u != nil {
		f.strm.under = nil
		if u != f.strm.st {
			u.Release()
		}
	}
	f.under = f.base
	f.strm.dropped = 0
}

// streamSyncLocked takes what the stream has stored as the content under
// the pages and drops the pages it covers.
func (f *fileState) streamSyncLocked() {
	st := f.strm.st
	if st == nil || f.m.sharedStore {
		// On a store other processes write, a chunk pinned here may
		// still be swept by another host before the commit names it:
		// then only the pages can store the bytes again.
		return
	}
	if st.StoredSize()/pageSize <= f.strm.dropped {
		return // not a page more (the common case: no content built)
	}
	c := st.Stored()
	if f.strm.under != st {
		f.streamUnderResetLocked()
		f.strm.under = st
	}
	n := &mvcc.Inode{Mode: f.base.Mode}
	c.Apply(n)
	f.under, f.baseLimit = n, int64(c.Size) // <= f.size: bytes written
	for ; (f.strm.dropped+1)*pageSize <= int64(c.Size); f.strm.dropped++ {
		f.dropPageLocked(f.strm.dropped)
	}
}

// baseInViewLocked reports whether the base's bytes show in the buffer
// (then it is not bytes written in order).
func (f *fileState) baseInViewLocked() bool { return f.baseLimit != 0 && f.strm.under == nil }

// spillLimitLocked is how many bytes of pages f keeps in RAM: more while
// it is written in order, as a stream drops them once stored.
func (f *fileState) spillLimitLocked() int {
	if f.strm.seq >= 0 && f.stage == nil && !f.m.sharedStore {
		return streamWindow + spillAt
	}
	return spillAt
}

// streamTruncatedLocked follows a truncate to size (before the buffer
// takes it): to 0 the sequence starts over, to anything else it ends.
func (f *fileState) streamTruncatedLocked(size int64) {
	switch {
	case size == f.size && size == f.strm.seq:
	case size == 0:
		f.streamCancelLocked()
		f.strm.seq = 0
	default:
		f.streamCancelLocked()
	}
}

// streamWroteLocked follows a write of p at off that the pages took. It
// returns the stream the writer should wait for (WaitBacklog, after
// unlocking f.mu), or nil.
func (f *fileState) streamWroteLocked(p []byte, off int64) *mvcc.Stream {
	if f.strm.seq < 0 {
		return nil
	}
	if f.stage != nil || off != f.strm.seq || f.baseInViewLocked() {
		f.streamCancelLocked()
		return nil
	}
	f.strm.seq = off + int64(len(p))
	if f.strm.st != nil {
		f.strm.st.Write(p)
		return f.strm.st
	}
	if f.strm.seq < streamFrom {
		return nil
	}
	// Start: the bytes so far come from the pages.
	st := f.m.st.NewStream()
	buf := make([]byte, 1<<20)
	for pos := int64(0); pos < f.strm.seq; {
		n, err := f.readAtLocked(buf[:min(int64(len(buf)), f.strm.seq-pos)], pos)
		if err != nil && !(errors.Is(err, io.EOF) && pos+int64(n) == f.strm.seq) {
			st.Cancel()
			f.strm.seq = -1
			return nil
		}
		st.Write(buf[:n])
		pos += int64(n)
	}
	f.strm.st = st
	return st
}

// streamWait slows a writer down while its stream's backlog is full; the
// caller holds no lock of f.
func streamWait(ctx context.Context, st *mvcc.Stream) {
	if st != nil {
		st.WaitBacklog(ctx, streamBacklog, streamWindow)
	}
}

// writeContentLocked commits sp (the buffer's view, f.size bytes) with
// the pending attributes: through the stream when it holds exactly the
// buffer, else as before.
func (f *fileState) writeContentLocked(ctx context.Context, sp mvcc.Sparse) (*mvcc.Inode, error) {
	st := f.strm.st
	if st != nil && (f.stage != nil || f.strm.seq != f.size || f.baseInViewLocked() || st.Written() != f.size) {
		f.streamCancelLocked()
		st = nil
	}
	f.strm.st = nil
	f.strm.seq = -1 // the stream, if any, is spent; the commit resets f
	if st == nil {
		return f.m.st.WriteSparseAttr(ctx, f.key.sid, f.key.ino, sp, f.mtime, f.pending)
	}
	// If the commit fails, f stays dirty and may read st's chunks (under)
	// in the next one: they stay pinned until the reset.
	defer f.streamDoneLocked(st)
	streamCommits.Add(1)
	return f.m.st.WriteStreamAttr(ctx, f.key.sid, f.key.ino, st, sp, f.mtime, f.pending)
}
