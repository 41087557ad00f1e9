// Package bolt is the embedded kv.Store driver: one bbolt file, one bucket
// (each large value nested in a bucket of its own: bigvalue.go).
//
// Every Update is one bbolt read-write transaction and is fsync'ed when it
// commits, so it survives a power loss as soon as Update returns; Sync has
// nothing left to do. Views are bbolt read transactions and run alongside
// the writer. The file is locked while open: a second process fails after
// Options.Timeout with ErrLocked instead of waiting forever.
//
// bbolt panics on some corrupt files. Open, and the driver's own calls into
// bbolt, turn such a panic into an error wrapping ErrCorrupt that names the
// file; a panic raised by the caller's callback is left alone.
package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
	"golang.org/x/sys/unix"
)

var (
	// ErrLocked means another process (another padfs) has the file open.
	// It is kv.ErrLocked.
	ErrLocked = kv.ErrLocked
	// ErrCorrupt means the file is not a readable padfs store.
	ErrCorrupt = errors.New("corrupt store or not a padfs (bbolt) file")
)

// Limits of the underlying bbolt; a layer buffering writes in front of this
// driver must reject larger keys and values itself.
const (
	MaxKeySize   = bbolt.MaxKeySize
	MaxValueSize = bbolt.MaxValueSize
)

// bucketName is the one bucket holding every key.
var bucketName = []byte("padfs")

// compactBatch bounds one transaction of the compaction copy: bbolt holds
// a transaction's nodes and, at commit, a buffer per page in memory.
const compactBatch = 8 << 20

// Options tunes Open. The zero value is a good default.
type Options struct {
	// Timeout bounds the wait for another process's lock on the file
	// (default 1s).
	Timeout time.Duration
	// Mode is the permission of a newly created file (default 0600).
	Mode fs.FileMode
	// Flat keeps every value flat in the bucket, as padfs did before
	// nested values (bigvalue.go); MinFormat is then 0. For tests of
	// stores of older formats.
	Flat bool
	// MmapSize is the initial size of the memory map (default on 64-bit
	// systems: 64 GiB of address space, not of disk nor of memory). A writer
	// that must grow the map holds bbolt's map lock while it copies its
	// dirty nodes out of the map and remaps: every View, and so every commit
	// through the WAL, waits. With 1 GiB, a 1 GiB session's redaction
	// (its new chunks beside the old ones) crossed 2 GiB in a fold, and a
	// writer of another session waited 240-270 ms.
	MmapSize int
}

// DefaultMmapSize is Options.MmapSize's default on 64-bit systems.
const DefaultMmapSize = 64 << 30

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = time.Second
	}
	if o.Mode == 0 {
		o.Mode = 0o600
	}
	if o.MmapSize == 0 && strconv.IntSize == 64 {
		o.MmapSize = DefaultMmapSize
	}
	return o
}

// Store is a kv.Store and kv.Compactor over one bbolt file.
type Store struct {
	path string
	opts Options

	// mu is held shared by every transaction and exclusively by Close and
	// by Compact's swap of the files, which drop or swap db.
	mu sync.RWMutex
	db *bbolt.DB // nil once closed
	// upMu is held by every Update and by Compact while it copies, so the
	// copy misses no write while Views go on.
	upMu sync.Mutex

	faulted atomic.Pointer[error] // set once bbolt panicked: see broke
}

var (
	_ kv.Store        = (*Store)(nil)
	_ kv.Compactor    = (*Store)(nil)
	_ kv.Generationer = (*Store)(nil)
)

// Open opens or creates the store file at path.
func Open(path string, opts Options) (*Store, error) {
	opts = opts.withDefaults()
	db, err := openDB(path, opts)
	if err != nil {
		return nil, err
	}
	// A compaction cut short by a crash leaves its copy behind. We hold the
	// lock on path, so nobody else is compacting it.
	if err := os.Remove(compactPath(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = db.Close()
		return nil, fmt.Errorf("kv/bolt: remove stale %s: %w", compactPath(path), err)
	}
	return &Store{path: path, opts: opts, db: db}, nil
}

// openDB opens path with bbolt and makes sure our bucket exists. It never
// panics: bbolt's panics on corrupt files become ErrCorrupt.
func openDB(path string, opts Options) (db *bbolt.DB, err error) {
	if err := checkBeforeOpen(path); err != nil {
		return nil, err
	}
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	var file *os.File // captured so a panic can still release the lock
	bopts := &bbolt.Options{
		Timeout:         opts.Timeout,
		InitialMmapSize: opts.MmapSize,
		// The hashmap freelist stays fast when a big store is fragmented.
		FreelistType: bbolt.FreelistMapType,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			if err == nil {
				file = f
			}
			return f, err
		},
	}
	defer func() {
		if p := recover(); p != nil {
			if db != nil {
				_ = db.Close()
			} else if file != nil {
				// bbolt's mapping of the file outlives this descriptor and
				// would keep the flock, so drop the lock explicitly. The
				// mapping itself leaks on this rare path.
				_ = unix.Flock(int(file.Fd()), unix.LOCK_UN)
				_ = file.Close()
			}
			db, err = nil, fmt.Errorf("kv/bolt: open %s: %w: %v", path, ErrCorrupt, p)
		}
	}()

	db, err = bbolt.Open(path, opts.Mode, bopts)
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("kv/bolt: open %s: %w (gave up after %v)", path, ErrLocked, opts.Timeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch):
		return nil, fmt.Errorf("kv/bolt: open %s: %w: %w", path, ErrCorrupt, err)
	case err != nil:
		return nil, fmt.Errorf("kv/bolt: open %s: %w", path, err)
	}

	// Look before creating: an existing store opens without a commit.
	var found bool
	err = db.View(func(tx *bbolt.Tx) error {
		found = tx.Bucket(bucketName) != nil
		return nil
	})
	if err == nil && !found {
		err = db.Update(func(tx *bbolt.Tx) error {
			_, err := tx.CreateBucketIfNotExists(bucketName)
			return err
		})
	}
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("kv/bolt: open %s: %w", path, err)
	}
	return db, nil
}

// Path returns the file the store was opened from.
func (s *Store) Path() string { return s.path }

// View runs fn in a bbolt read transaction.
func (s *Store) View(fn func(kv.Reader) error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() { s.faultRecover(old, &err, recover()) }()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return kv.ErrClosed
	}
	if f := s.faulted.Load(); f != nil {
		return *f
	}
	r := &reader{s: s}
	defer r.leave(r.enter(), &err)
	var fnErr error
	err = s.db.View(func(tx *bbolt.Tx) error {
		if r.b = tx.Bucket(bucketName); r.b == nil {
			return fmt.Errorf("kv/bolt %s: bucket %q missing: %w", s.path, bucketName, ErrCorrupt)
		}
		fnErr = r.call(func() error { return fn(r) })
		return fnErr
	})
	return s.txError("view", err, fnErr)
}

// Update runs fn in a bbolt read-write transaction, committed (and
// fsync'ed) when fn returns nil.
func (s *Store) Update(fn func(kv.Txn) error) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() { s.faultRecover(old, &err, recover()) }()
	s.upMu.Lock()
	defer s.upMu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return kv.ErrClosed
	}
	if f := s.faulted.Load(); f != nil {
		return *f
	}
	t := &txn{reader{s: s, writable: true}}
	defer t.leave(t.enter(), &err)
	var fnErr error
	err = s.db.Update(func(tx *bbolt.Tx) error {
		if t.b = tx.Bucket(bucketName); t.b == nil {
			return fmt.Errorf("kv/bolt %s: bucket %q missing: %w", s.path, bucketName, ErrCorrupt)
		}
		fnErr = t.call(func() error { return fn(t) })
		return fnErr
	})
	err = s.txError("commit", err, fnErr)
	if err != fnErr && errors.Is(err, unix.ENOSPC) {
		s.releaseTail()
	}
	return err
}

// errKeep rolls back releaseTail's transaction.
var errKeep = errors.New("nothing to commit")

// releaseTail gives back to the file system the blocks a commit that ran
// out of space wrote past the end of the data: bbolt keeps the file as
// grown, and on a full disk those blocks are the very room the next write
// (a log record that deletes, say) needs. The pages past the data are
// unused, so a hole there reads as what bbolt expects: nothing. It runs in
// a write transaction, so that no commit writes there meanwhile.
func (s *Store) releaseTail() {
	_ = s.db.Update(func(tx *bbolt.Tx) error {
		f, err := os.OpenFile(s.path, os.O_WRONLY, 0)
		if err != nil {
			return errKeep
		}
		defer f.Close()
		fi, err := f.Stat()
		if end := tx.Size(); err == nil && fi.Size() > end {
			_ = unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, end, fi.Size()-end)
		}
		return errKeep
	})
}

// txError returns the caller's own error unchanged and wraps bbolt's.
func (s *Store) txError(op string, err, fnErr error) error {
	switch {
	case err == nil:
		return nil
	case fnErr != nil && err == fnErr:
		return err
	case errors.Is(err, berrors.ErrDatabaseNotOpen):
		return kv.ErrClosed
	case !errors.Is(err, unix.ENOSPC) && strings.Contains(err.Error(), unix.ENOSPC.Error()):
		// bbolt formats a failed grow with %s: put the errno back, so that
		// a full disk is ENOSPC and not EIO.
		return fmt.Errorf("kv/bolt %s: %s: %w (%v)", s.path, op, unix.ENOSPC, err)
	}
	return fmt.Errorf("kv/bolt %s: %s: %w", s.path, op, err)
}

// Generation returns the file's inode number and the transaction id of
// its current meta page.
func (s *Store) Generation() (g kv.Generation, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() { s.faultRecover(old, &err, recover()) }()
	var st unix.Stat_t
	if err := unix.Stat(s.path, &st); err != nil {
		return g, fmt.Errorf("kv/bolt: stat %s: %w", s.path, err)
	}
	g.File = st.Ino
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return g, kv.ErrClosed
	}
	if f := s.faulted.Load(); f != nil {
		return g, *f
	}
	err = s.db.View(func(tx *bbolt.Tx) error {
		g.TxID = uint64(tx.ID())
		return nil
	})
	return g, err
}

// Sync returns at once: every Update was fsync'ed when it committed.
func (s *Store) Sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return kv.ErrClosed
	}
	return nil
}

// Close waits for running transactions and closes the file.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return kv.ErrClosed
	}
	if f := s.faulted.Load(); f != nil {
		s.db = nil // bbolt may hold its own locks: leave the file to exit
		return *f
	}
	err := s.db.Close()
	s.db = nil
	if err != nil {
		return fmt.Errorf("kv/bolt %s: close: %w", s.path, err)
	}
	return nil
}
