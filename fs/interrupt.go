package fs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Interrupting long requests. The kernel sends INTERRUPT for any signal to
// the caller, even one it handles (the Go runtime's SIGURG preemption
// reaches FUSE as INTERRUPTs), and go-fuse then closes the request's
// context. A handled signal restarts or retries the call, so giving up on
// one would only repeat the work. So the long part of a request (a commit,
// a truncate re-reading data) stops only when
//
//   - its caller is being killed: SIGKILL pending for the calling thread or
//     its process (a fatal signal becomes SIGKILL for every thread), read
//     from /proc/<tid>/status once the context is done; such a caller
//     waits for the reply unkillably, so stopping is what frees it, or
//   - the mount is being unmounted (CancelRequests): SIGTERM must not wait
//     for a long truncate.
//
// What a stopped commit leaves stays dirty: the last close, the ticker or
// the unmount commits it.

// killPoll is how often a killable context whose request was interrupted
// checks its caller's pending signals.
const killPoll = 20 * time.Millisecond

// killables are the long requests running now.
type killables struct {
	mu  sync.Mutex
	run map[*context.CancelFunc]struct{}
}

// killable returns a context for the long part of the request of ctx;
// call stop when it is done.
func (m *Server) killable(ctx context.Context) (kctx context.Context, stop func()) {
	kctx, cancel := context.WithCancel(context.Background())
	tid := 0
	if c, ok := fuse.FromContext(ctx); ok {
		tid = int(c.Pid)
	}
	m.kill.mu.Lock()
	if m.kill.run == nil {
		m.kill.run = map[*context.CancelFunc]struct{}{}
	}
	m.kill.run[&cancel] = struct{}{}
	m.kill.mu.Unlock()
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		t := time.NewTicker(killPoll)
		defer t.Stop()
		for tid != 0 {
			if killed, err := fatalPending(tid); killed {
				cancel()
				if h := m.opts.killedHook; h != nil {
					h(err)
				}
				return
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return kctx, func() {
		close(done)
		cancel()
		m.kill.mu.Lock()
		delete(m.kill.run, &cancel)
		m.kill.mu.Unlock()
	}
}

// CancelRequests stops the long requests running now (their callers get
// EINTR; dirty buffers stay dirty). Unmount calls it.
func (m *Server) CancelRequests() {
	m.kill.mu.Lock()
	defer m.kill.mu.Unlock()
	for c := range m.kill.run {
		(*c)()
		if h := m.opts.killedHook; h != nil {
			h(errUnmounting)
		}
	}
}

// errUnmounting is what killedHook hears from CancelRequests.
var errUnmounting = errors.New("unmounting")

// fatalPending reports whether thread tid has SIGKILL pending (or is gone:
// nobody waits for the answer any more).
func fatalPending(tid int) (bool, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(tid), "status"))
	if err != nil {
		return os.IsNotExist(err), err
	}
	const kill = 1 << (unix.SIGKILL - 1)
	for _, line := range bytes.Split(b, []byte("\n")) {
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok || (string(name) != "SigPnd" && string(name) != "ShdPnd") {
			continue
		}
		mask, err := strconv.ParseUint(string(bytes.TrimSpace(val)), 16, 64)
		if err != nil {
			return false, fmt.Errorf("%s of thread %d: %w", name, tid, err)
		}
		if mask&kill != 0 {
			return true, nil
		}
	}
	return false, nil
}

// closeOnExec marks this process's /dev/fuse descriptors close-on-exec.
// go-fuse opens the device without O_CLOEXEC, so every child (a hook, a
// test's shell) inherited the connection: a child stuck in a request kept
// it alive after padfs was gone, unkillable for good.
func closeOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && t == "/dev/fuse" {
			unix.CloseOnExec(fd)
		}
	}
}
