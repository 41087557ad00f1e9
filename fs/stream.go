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
// a staging file) cancels the stream and the commit takes the pages as
// before. The pages are written as always: reads, and that fallback, use
// them.
const (
	// streamFrom is the size a sequential buffer must reach before it
	// streams: below it a commit is cheap, and a goroutine is not.
	streamFrom = spillAt
	// streamBacklog bounds the bytes written and not yet cut per file: a
	// writer past it waits, without f.mu, for the cutter to catch up.
	streamBacklog = 16 << 20
)

// streamCommits counts the commits that took a stream (tests).
var streamCommits atomic.Uint64

// streamState is a fileState's stream bookkeeping (guarded by f.mu).
type streamState struct {
	// seq is the size of the buffer while every byte of it was written
	// in order from offset 0 over an empty base; -1 once not.
	seq int64
	st  *mvcc.Stream
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
	if f.strm.st != nil {
		f.strm.st.Cancel()
		f.strm.st = nil
	}
	f.strm.seq = -1
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
	if f.stage != nil || off != f.strm.seq || f.baseLimit != 0 {
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
		st.WaitBacklog(ctx, streamBacklog)
	}
}

// writeContentLocked commits sp (the buffer's view, f.size bytes) with
// the pending attributes: through the stream when it holds exactly the
// buffer, else as before.
func (f *fileState) writeContentLocked(ctx context.Context, sp mvcc.Sparse) (*mvcc.Inode, error) {
	st := f.strm.st
	f.strm.st = nil
	if st != nil && (f.stage != nil || f.strm.seq != f.size || f.baseLimit != 0 || st.Written() != f.size) {
		st.Cancel()
		st = nil
	}
	f.strm.seq = -1 // the stream, if any, is spent; the commit resets f
	if st == nil {
		return f.m.st.WriteSparseAttr(ctx, f.key.sid, f.key.ino, sp, f.mtime, f.pending)
	}
	streamCommits.Add(1)
	return f.m.st.WriteStreamAttr(ctx, f.key.sid, f.key.ino, st, sp, f.mtime, f.pending)
}
