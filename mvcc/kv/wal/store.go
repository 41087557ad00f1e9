package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
	"golang.org/x/sys/unix"
)

var (
	// ErrLocked means another process has the WAL directory open. It is
	// kv.ErrLocked.
	ErrLocked = kv.ErrLocked
	// ErrCorrupt means a WAL segment holds a bad record that is not a torn
	// tail.
	ErrCorrupt = errors.New("corrupt WAL")
)

// Options tunes Open. The zero value is a good default.
type Options struct {
	// MemtableSize is the amount of buffered writes that starts a flush
	// before the next tick (default 64 MiB). Updates wait when a second
	// memtable fills up while the first is still being flushed.
	MemtableSize int64
	// FlushInterval is how often buffered writes move to the base
	// (default 1s).
	FlushInterval time.Duration
	// MaxKeySize and MaxValueSize reject at Put what the base would reject
	// at flush time, when it is too late to fail the Update (defaults:
	// bbolt's limits, 32 KiB and 2 GiB - 2).
	MaxKeySize   int
	MaxValueSize int
	// Logger receives recovery and background flush reports (default
	// slog.Default()).
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MemtableSize <= 0 {
		o.MemtableSize = 64 << 20
	}
	if o.FlushInterval <= 0 {
		o.FlushInterval = time.Second
	}
	if o.MaxKeySize <= 0 {
		o.MaxKeySize = 32768
	}
	if o.MaxValueSize <= 0 {
		o.MaxValueSize = 1<<31 - 2
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Store is a kv.Store and kv.Compactor that group-commits into a base store.
type Store struct {
	dir  string
	base kv.Store
	opts Options
	log  *slog.Logger
	lock *os.File // flock on dir/LOCK

	// Lock order: flushMu, then writeMu, then viewMu, then mu (writeMu
	// and viewMu are never held together today). A segment's mu is taken
	// under flushMu or writeMu at most, never with viewMu or mu held.
	// writeMu is held across an Update's I/O; mu is innermost and held
	// for field access only, never across file or base I/O (admitLocked
	// waits on flushed, which releases it).
	//
	// writeMu serializes Updates and the rotation of segment and memtable.
	writeMu sync.Mutex
	nextSeq uint64 // under writeMu

	// viewMu makes a View's "begin the base transaction, then snapshot the
	// memtables" atomic with respect to dropping the frozen memtable; see
	// View.
	viewMu sync.RWMutex

	// flushMu lets one flush run at a time.
	flushMu sync.Mutex

	// compacting is set while Compact runs: the base's Updates then wait
	// for its whole copy, so bulk transactions go through the log.
	compacting atomic.Bool

	// mu guards the fields below. Those marked (w) change only with
	// writeMu held as well.
	mu       sync.Mutex
	flushed  *sync.Cond // on mu: a flush ended, or Close began
	seg      *segment   // (w) current segment; nil until the first record after a rotation
	active   *memtable  // (w) takes new writes
	snap     *tree      // copy of active.tree shared by readers; nil when stale
	frozen   *memtable  // being moved to the base; nil otherwise
	folded   int64      // of frozen's size, what is in the base already
	flushErr error      // why the last flush failed; nil after a success
	broken   error      // sticky: the WAL can take no more records
	closed   bool

	kick chan struct{} // asks the flusher for an early flush
	stop chan struct{} // closed by Close
	done chan struct{} // closed when the flusher has exited
}

var (
	_ kv.Store     = (*Store)(nil)
	_ kv.Compactor = (*Store)(nil)
)

// Open replays the segments left in dir into base, then serves from both.
// It takes ownership of base (Close closes it) unless it fails.
func Open(dir string, base kv.Store, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kv/wal: %w", err)
	}
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{
		dir:    dir,
		base:   base,
		opts:   opts,
		log:    opts.Logger,
		lock:   lock,
		active: newMemtable(),
		kick:   make(chan struct{}, 1),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	s.flushed = sync.NewCond(&s.mu)
	if err := s.checkState(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	if err := s.replay(); err != nil {
		_ = lock.Close()
		return nil, err
	}
	s.keepReserve()
	if _, found, _ := ReadState(dir); !found {
		s.noteFold(0) // a store from before the record, or just accepted by fsck
	}
	go s.flusher()
	return s, nil
}

// replay applies every record left in dir to the base in one transaction,
// then deletes the segments.
func (s *Store) replay() error {
	segs, err := listSegments(s.dir)
	if err != nil || len(segs) == 0 {
		s.nextSeq = 1
		return err
	}
	s.nextSeq = segs[len(segs)-1].seq + 1
	var records, torn int
	err = s.base.Update(func(tx kv.Txn) error {
		records, torn = 0, 0
		for i, g := range segs {
			data, err := os.ReadFile(g.path)
			if err != nil {
				return fmt.Errorf("kv/wal: replay: %w", err)
			}
			_, t, err := checkSegment(g.path, data, i == len(segs)-1, func(off int, payload []byte) error {
				records++
				if err := applyRecord(tx, payload); err != nil {
					return fmt.Errorf("kv/wal: replay %s: record at offset %d: %w", g.path, off, err)
				}
				return nil
			})
			if err != nil {
				return err
			}
			torn = t
		}
		return nil
	})
	if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
		// The base cannot grow: serve the log from memory and keep it.
		s.log.Warn("kv/wal: no space to fold the log into the base; keeping it in memory until a flush succeeds",
			"dir", s.dir, "err", err)
		return s.replayInMemory(segs)
	}
	if err != nil {
		return err
	}
	if torn > 0 {
		s.log.Warn("kv/wal: dropped a torn record at the end of the log",
			"file", segs[len(segs)-1].path, "bytes", torn)
	}
	s.log.Info("kv/wal: recovered", "dir", s.dir, "segments", len(segs), "records", records)
	if err := removeSegments(s.dir, segs); err != nil {
		return err
	}
	s.noteFold(segs[len(segs)-1].seq)
	return nil
}

// Update runs fn against the buffered state over a base snapshot. On
// success its writes are appended to the WAL as one record (no fsync) and
// then made visible; if the append fails, so does the Update.
func (s *Store) Update(fn func(kv.Txn) error) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	t, err := s.runLocked(fn, false)
	if err != nil || t.writes.Len() == 0 {
		return err
	}
	return s.logLocked(t.writes)
}

// runLocked runs fn in a new transaction over the memtables and a base
// snapshot (borrow: see txn) and returns it with its writes.
func (s *Store) runLocked(fn func(kv.Txn) error, borrow bool) (*txn, error) {
	layers, err := s.admitLocked()
	if err != nil {
		return nil, err
	}
	t := &txn{s: s, writes: newTree(), borrow: borrow}
	t.mem = append([]*tree{t.writes}, layers...)
	// No freeze can happen while we hold writeMu, and a flush that commits
	// the frozen memtable meanwhile only copies into the base what layers
	// already shows: the reads stay consistent.
	err = s.base.View(func(r kv.Reader) error {
		t.base = r
		return fn(t)
	})
	return t, err
}

// logLocked appends a transaction's writes to the WAL as one record and
// then makes them visible.
func (s *Store) logLocked(writes *tree) error {
	rec, err := encodeRecordv(writes)
	if err != nil {
		return err
	}
	if err := s.appendLocked(rec); err != nil {
		return err
	}
	s.apply(writes)
	return nil
}

// admitLocked waits while both memtables are full, refuses writes to a
// closed or broken store, and returns the memtable layers to read.
func (s *Store) admitLocked() ([]*tree, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.closed && s.broken == nil && s.flushErr == nil && s.fullLocked() {
		s.flushed.Wait()
	}
	switch {
	case s.closed:
		return nil, kv.ErrClosed
	case s.broken != nil:
		return nil, s.broken
	case s.flushErr != nil && s.bufferedLocked() >= 2*s.opts.MemtableSize:
		return nil, fmt.Errorf("kv/wal %s: write buffer full and the base refuses the flush: %w", s.dir, s.flushErr)
	}
	return s.writerLayersLocked(), nil
}

// fullLocked reports whether Updates must wait for the fold of the frozen
// memtable: the active one has grown to MemtableSize, or, if more is left
// to fold of the frozen one, to that. A compaction lets the active
// memtable grow past MemtableSize (every commit during its copy), and its
// fold, at a fraction of a second per foldBatch, then took longer than
// writers took to fill MemtableSize again: after a 1 GiB redaction a
// writer of another session waited 1.3-2.8 s for the end of that fold.
// Now a writer that outpaces the fold waits for its next part, and each
// fold leaves less to the next: the writes that came during it are at most
// half of it plus MemtableSize.
func (s *Store) fullLocked() bool {
	return s.frozen != nil && s.active.size >= max(s.opts.MemtableSize, s.frozen.size-s.folded)
}

// writerLayersLocked returns the memtables for the Update holding writeMu,
// newest first. The active tree is read as it is, not copied: only an
// Update holding writeMu changes it, and after fn has returned. A copy
// here would make every apply copy-on-write the paths it touches.
func (s *Store) writerLayersLocked() []*tree {
	var layers []*tree
	if s.active.tree.Len() > 0 {
		layers = append(layers, s.active.tree)
	}
	if s.frozen != nil {
		layers = append(layers, s.frozen.tree)
	}
	return layers
}

// bufferedLocked is the size of the writes not yet in the base. While
// flushes fail they pile up in the frozen memtable (each retry folds the
// active one into it).
func (s *Store) bufferedLocked() int64 {
	n := s.active.size
	if s.frozen != nil {
		n += s.frozen.size
	}
	return n
}

// layersLocked returns immutable snapshots of the memtables, newest first.
func (s *Store) layersLocked() []*tree {
	var layers []*tree
	if s.active.tree.Len() > 0 {
		if s.snap == nil {
			s.snap = s.active.tree.Copy()
		}
		layers = append(layers, s.snap)
	}
	if s.frozen != nil {
		layers = append(layers, s.frozen.tree)
	}
	return layers
}

// appendLocked writes one record to the current segment, creating it if
// the last rotation left none.
func (s *Store) appendLocked(rec recordv) error {
	if s.seg == nil {
		g, err := createSegment(s.dir, s.nextSeq)
		if err != nil {
			return err
		}
		s.nextSeq++
		s.mu.Lock()
		s.seg, s.active.seg = g, g
		s.mu.Unlock()
	}
	cutFailed, err := s.seg.append(rec)
	if err != nil && !cutFailed && rec.n <= reserveUse && isNoSpace(err) && s.useReserve() {
		// A small commit (an unlink that frees space, say) may use the
		// space held back for it.
		cutFailed, err = s.seg.append(rec)
	}
	if cutFailed {
		s.markBroken(err)
	}
	return err
}

// apply makes a committed transaction's writes visible.
func (s *Store) apply(writes *tree) {
	s.mu.Lock()
	writes.Scan(func(e entry) bool {
		s.active.set(e)
		return true
	})
	s.snap = nil
	full := s.active.size >= s.opts.MemtableSize
	s.mu.Unlock()
	if full {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// markBroken stops the WAL from taking records: after a failed fsync or a
// partial write that could not be cut off, it cannot tell what is on disk.
// Buffered writes still reach the base by flushing.
func (s *Store) markBroken(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken == nil {
		s.broken = fmt.Errorf("kv/wal %s: log unusable, reopen the store: %w", s.dir, err)
	}
}

// View runs fn against one consistent snapshot: the memtables as they are
// and a base View.
func (s *Store) View(fn func(kv.Reader) error) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return kv.ErrClosed
	}
	// The base View must begin before the memtables are snapshot, and the
	// frozen memtable must not be dropped in between: otherwise its batch
	// could be missing from both (committed to the base after our base
	// snapshot, gone from the memtables before ours). viewMu, held shared
	// until the snapshot is taken, keeps flush from dropping it meanwhile.
	s.viewMu.RLock()
	held := true
	release := func() {
		if held {
			held = false
			s.viewMu.RUnlock()
		}
	}
	defer release()
	return s.base.View(func(r kv.Reader) error {
		s.mu.Lock()
		layers := s.layersLocked()
		s.mu.Unlock()
		release()
		return fn(&reader{mem: layers, base: r})
	})
}

// Sync makes every Update committed so far durable against power loss: one
// fdatasync of the current segment. Older segments were synced when sealed,
// and flushed batches are in the base, which fsyncs its commits.
func (s *Store) Sync() error {
	s.mu.Lock()
	closed, broken, g := s.closed, s.broken, s.seg
	s.mu.Unlock()
	switch {
	case closed:
		return kv.ErrClosed
	case broken != nil:
		return broken
	case g == nil:
		return nil
	}
	if err := g.sync(); err != nil {
		s.markBroken(err)
		return err
	}
	return nil
}

// Close flushes every buffered write to the base and closes the base. If
// the flush fails the writes stay in the WAL, synced, for the next Open.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return kv.ErrClosed
	}
	s.closed = true
	s.flushed.Broadcast() // stalled Updates give up
	s.mu.Unlock()

	close(s.stop)
	<-s.done
	err := s.flushAll()
	s.mu.Lock()
	g := s.seg
	s.mu.Unlock()
	if g != nil {
		err = errors.Join(err, g.seal())
	}
	if cerr := s.base.Close(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if cerr := s.lock.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("kv/wal: %w", cerr))
	}
	return err
}
