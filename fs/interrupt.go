package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// Killed callers. The kernel keeps a process whose FUSE request was sent
// in uninterruptible sleep until the request is answered, SIGKILL or not:
// a killed `cp` whose close waits for a long commit, or whose write waits
// for the buffer a commit holds, would stay unkillable (and pin its
// mount's users) for as long as padfs works. So where a request can wait
// long (a commit, a buffer's lock), it gives up once its caller is killed.
// Work the caller's data still needs (committing acknowledged writes)
// goes on without it.

// errKilled is what a request whose caller was killed returns (EINTR):
// nobody reads it.
var errKilled = fmt.Errorf("caller killed: %w", context.Canceled)

// killPoll is how often a request waiting on behalf of its caller looks
// again whether the caller was killed: a FUSE INTERRUPT comes once per
// request, and not at all for the close of files by an exiting process.
const killPoll = time.Second

// waitFor waits until done is closed on behalf of the request ctx; false:
// its caller was killed first. An INTERRUPT (ctx done) alone is not
// enough: a handled signal, or Go's preemption signal in a Go caller,
// interrupts too, and must not turn a close into EINTR.
func waitFor(ctx context.Context, done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
	}
	t := time.NewTimer(killPoll)
	defer t.Stop()
	intr := ctx.Done()
	for {
		select {
		case <-done:
			return true
		case <-intr:
			intr = nil // closed for good: poll from now on
		case <-t.C:
			t.Reset(killPoll)
		}
		if callerKilled(ctx) {
			return false
		}
	}
}

// lockFor takes f.mu (shared with read) for the request ctx, or returns
// false when its caller is killed while waiting; the lock, when it
// comes, is then given back unused.
func (f *fileState) lockFor(ctx context.Context, read bool) bool {
	lock, unlock, try := f.mu.Lock, f.mu.Unlock, f.mu.TryLock
	if read {
		lock, unlock, try = f.mu.RLock, f.mu.RUnlock, f.mu.TryRLock
	}
	if try() {
		return true
	}
	got := make(chan struct{})
	go func() {
		lock()
		close(got)
	}()
	if waitFor(ctx, got) {
		return true
	}
	go func() {
		<-got
		unlock()
	}()
	return false
}

// commitFor commits f (as m.commit) on behalf of the request ctx (close,
// fsync). If the caller is killed first, it returns errKilled at once and
// the commit goes on: the writes it stores were acknowledged.
func (m *Server) commitFor(ctx context.Context, f *fileState) error {
	var (
		err       error
		abandoned atomic.Bool
		done      = make(chan struct{})
	)
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		// Unmount may stop it (cancel.go): its own flush commits f.
		kctx, stop := m.cancelable(context.Background())
		err = m.commitCtx(kctx, f)
		stop()
		close(done)
		if err != nil && abandoned.Load() {
			m.log.Error("padfs: commit for a killed caller", "session", f.key.sid, "ino", f.key.ino, "err", err)
		}
	}()
	if waitFor(ctx, done) {
		return err
	}
	abandoned.Store(true)
	return errKilled
}

// releaseLater is m.release in the background, for a request that gives
// up for its killed caller (the last release commits, which may wait).
func (m *Server) releaseLater(f *fileState) {
	m.bg.Add(1)
	go func() {
		defer m.bg.Done()
		if err := m.release(f); err != nil {
			m.log.Error("padfs: release for a killed caller", "session", f.key.sid, "ino", f.key.ino, "err", err)
		}
	}()
}

// callerKilled reports whether the process behind request ctx was killed.
func callerKilled(ctx context.Context) bool {
	c, ok := fuse.FromContext(ctx)
	if !ok || c.Pid == 0 {
		return false
	}
	return pidKilled(c.Pid)
}

// procMounted reports whether /proc shows this process (without it no
// caller can be seen, and none counts as killed).
var procMounted = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
})

var procStatBufs = sync.Pool{New: func() any { return new([1024]byte) }}

// pidKilled reads /proc/PID/stat (PID a thread, as FUSE names callers): a
// thread is killed when SIGKILL is pending for it (the kernel queues it
// to every thread of a process a fatal signal kills) or when it is
// exiting (PF_EXITING) from a signal (exit_code), having dequeued it.
// A thread that is gone waits for nothing.
func pidKilled(pid uint32) bool {
	f, err := os.Open("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist) && procMounted()
	}
	defer f.Close()
	buf := procStatBufs.Get().(*[1024]byte)
	defer procStatBufs.Put(buf)
	n, _ := f.Read(buf[:])
	b := buf[:n]
	// Fields after the command name (which may hold spaces and ')'):
	// the first is field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false
	}
	fields := bytes.Fields(b[i+1:])
	field := func(k int) uint64 {
		if k-3 >= len(fields) {
			return 0
		}
		v, _ := strconv.ParseUint(string(fields[k-3]), 10, 64)
		return v
	}
	const (
		pfExiting = 0x4          // field 9, flags
		sigKill   = 1 << (9 - 1) // field 31, pending signals
	)
	return field(31)&sigKill != 0 || field(9)&pfExiting != 0 && field(52)&0x7f != 0
}
