package fs

import (
	"context"
	"errors"
	"sync"
)

// Stopping long work. A truncate re-reads the data it keeps
// (mvcc.PutSparse, which checks its context between chunks) and may take
// long for a large file. It stops when its caller is killed (callerKilled,
// interrupt.go: an INTERRUPT alone is not enough, a handled signal or Go's
// preemption sends one too) or when Unmount, on SIGTERM, calls
// CancelRequests. CancelRequests also stops the commits that went on
// without a killed caller (commitFor): the unmount's own flush commits
// what they leave dirty, so SIGTERM need not wait for them twice.

// cancelables are the long operations running now.
type cancelables struct {
	mu  sync.Mutex
	run map[*context.CancelFunc]struct{}
}

// errUnmounting is what killedHook hears from CancelRequests.
var errUnmounting = errors.New("unmounting")

// cancelable returns a context for the long part of the request of ctx
// (context.Background() for work of no request); call stop when done.
func (m *Server) cancelable(ctx context.Context) (kctx context.Context, stop func()) {
	kctx, cancel := context.WithCancel(context.Background())
	m.cancel.mu.Lock()
	if m.cancel.run == nil {
		m.cancel.run = map[*context.CancelFunc]struct{}{}
	}
	m.cancel.run[&cancel] = struct{}{}
	m.cancel.mu.Unlock()
	done := make(chan struct{})
	if ctx.Done() != nil { // a request's: stop when its caller is killed
		go func() {
			if !waitFor(ctx, done) {
				cancel()
				if h := m.opts.killedHook; h != nil {
					h(context.Canceled)
				}
			}
		}()
	}
	return kctx, func() {
		close(done)
		cancel()
		m.cancel.mu.Lock()
		delete(m.cancel.run, &cancel)
		m.cancel.mu.Unlock()
	}
}

// CancelRequests stops the long operations running now: their callers get
// EINTR, their buffers stay dirty. Unmount calls it.
func (m *Server) CancelRequests() {
	m.cancel.mu.Lock()
	defer m.cancel.mu.Unlock()
	for c := range m.cancel.run {
		(*c)()
		if h := m.opts.killedHook; h != nil {
			h(errUnmounting)
		}
	}
}
