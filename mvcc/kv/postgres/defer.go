package postgres

import (
	"fmt"

	"github.com/padfs/padfs/mvcc/kv"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Deferred Updates. An Update whose callback called kv.Defer (mvcc's
// metadata-only commits: unlink, rename, mkdir, chmod, ...) returns as
// soon as its callback succeeded, without waiting for its COMMIT, when it
// runs in a batch begun ahead (a commit's round trip began it, so an
// earlier commit just returned). The batch stays open for the Updates
// that follow and commits Options.DeferFor after its first deferred
// Update, or at once when an Update that waits (any other Update: a
// close's content, a checkpoint) ends in it, when a View begins (a View
// sees every Update that returned), at Sync, at a lease's release and at
// Close. A View that begins while the batch is open reads through it, as
// its Updates do (their writes, then the database under the writer lock,
// or the cache at the batch's generation): serialized with the Updates
// and the other such Views, but with no round trip of its own for what
// the cache holds, and without ending the batch. So a stream of metadata operations costs one round trip per
// batch, not per operation, and the commits stay in order: a deferred
// Update commits in the same transaction as the Updates after it, or
// before them. What it gives up: for up to DeferFor after it returned
// (plus the commit's round trip) a deferred Update is not durable: a
// crash of the process, or a lost connection or lease, can lose it, and
// with it only deferred Updates that came after it. Its failure is
// logged and returned by the next Sync (an fsync), as a file system
// reports a failed writeback. A batch begun ahead carries the server's
// idle_in_transaction_session_timeout (aheadServerIdle), so a process
// paused while it holds deferred Updates gives the writer lock back to
// the other hosts within that time (losing them).

// DefaultDeferFor is the default Options.DeferFor: as long as a batch
// begun ahead waits for its first Update (DefaultAheadIdle), so that the
// writer lock is held no longer than before between commits.
const DefaultDeferFor = DefaultAheadIdle

// deferState is the Store's deferred batch and the failure to report.
type deferState struct {
	pending atomic.Pointer[batch] // the open batch holding deferred Updates
	mu      sync.Mutex
	err     error // the first deferred commit that failed since the last Sync
}

// deferLocked is called, with s.mu held, after an Update that may be
// deferred succeeded in batch b: it reports whether the Update may return
// before b commits, and makes b commit within Options.DeferFor.
func (s *Store) deferLocked(b *batch) bool {
	if s.opts.DeferFor <= 0 || b.ahead.IsZero() || s.closed.Load() {
		return false
	}
	s.stats.deferred.Add(1)
	if !b.deferred {
		b.deferred = true
		s.defers.pending.Store(b)
		time.AfterFunc(s.opts.DeferFor, func() { s.commitDeferred(b) })
	}
	return true
}

// commitDeferred commits batch b if it is still open.
func (s *Store) commitDeferred(b *batch) {
	s.mu.Lock()
	if s.batch == b {
		s.batch = nil
		s.finishLocked(b)
	}
	s.mu.Unlock()
}

// flushDeferred commits the deferred Updates, if any, and waits for that.
func (s *Store) flushDeferred() {
	b := s.defers.pending.Load()
	if b == nil {
		return
	}
	s.commitDeferred(b)
	<-b.done
}

// deferEnded is called when batch b, holding deferred Updates, has
// committed or failed (before its done is closed).
func (s *Store) deferEnded(b *batch) {
	s.defers.pending.CompareAndSwap(b, nil)
	if b.err == nil {
		return
	}
	slog.Error("postgres store: a commit of metadata changes that had returned already failed: they are lost",
		"store", s.desc, "err", b.err)
	s.defers.mu.Lock()
	if s.defers.err == nil {
		s.defers.err = fmt.Errorf("a deferred commit (metadata changes that had returned) failed: %w", b.err)
	}
	s.defers.mu.Unlock()
}

// takeDeferErr returns (and forgets) the failure of a deferred commit.
func (s *Store) takeDeferErr() error {
	s.defers.mu.Lock()
	defer s.defers.mu.Unlock()
	err := s.defers.err
	s.defers.err = nil
	return err
}

// Defer lets the Update return before its commit (kv.Deferrer).
func (t *txn) Defer() { t.deferOK = true }

// viewDeferred runs View fn through batch b, holding deferred Updates, if
// b is still open (ok); else the caller's View reads as usual: b has
// committed (or failed) meanwhile.
func (s *Store) viewDeferred(b *batch, fn func(kv.Reader) error) (ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.batch != b {
		return false, nil
	}
	s.stats.deferViews.Add(1)
	t := &txn{b: b}
	defer func() {
		t.ended = true
		if b.r.err != nil {
			// A failed query aborted the batch's transaction.
			s.batch = nil
			s.finishLocked(b)
		}
	}()
	return true, fn(batchReader{t})
}

// batchReader is a View's reads through an open batch: a txn without its
// writes.
type batchReader struct{ t *txn }

func (r batchReader) Get(key []byte) ([]byte, error) { return r.t.Get(key) }

func (r batchReader) First(start, end []byte) (k, v []byte, err error) { return r.t.First(start, end) }

func (r batchReader) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) error {
	return r.t.Scan(start, end, fn)
}
