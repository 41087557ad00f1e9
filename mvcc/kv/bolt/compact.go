package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
	"go.etcd.io/bbolt"
)

// compactPath is the temporary copy Compact writes next to the store.
func compactPath(path string) string { return path + ".compact" }

// Bounds of one step of the compaction copy: Updates (the WAL's folds)
// wait for at most one step, and a pause as long as the step follows it,
// so that the copy takes at most about half of a core from the writers. compactSync bounds what
// the copy writes between two fdatasyncs (taken between steps), so that
// the last one, which Updates wait for, is short.
const (
	compactStepBytes = 4 << 20
	compactStepTime  = 2 * time.Millisecond
	compactYield     = 128 // keys between two runtime.Gosched
	compactSync      = compactStepBytes
)

// compaction is a Compact under way. It copies one snapshot of the store
// (src, taken when it began), so its work is bounded however fast writers
// go; every Update since writes to the copy too (mirror), in commit order
// (under upMu). A key of the snapshot already in the copy, or deleted
// since, is left alone: the copy holds it newer. The copy's steps and the
// mirrors are write transactions of dst, which bbolt serializes.
type compaction struct {
	dst *bbolt.DB
	// The copy's own: the snapshot, where it is, keys copied.
	src  *bbolt.Tx // nil once copied
	b    *bbolt.Bucket
	cur  *bbolt.Cursor
	k, v []byte // the snapshot's next key to copy, and its entry value
	done int64

	dirty atomic.Int64 // bytes written to dst since its last fdatasync

	mu sync.Mutex
	// deleted holds the keys deleted since the snapshot: not to copy.
	deleted map[string]bool
	err     error // a write to the copy failed: the compaction fails
}

func (c *compaction) failed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// mirrorOp is one write of an Update made during a compaction.
type mirrorOp struct {
	k, v []byte
	del  bool
}

// Compact rewrites the store into a fresh file holding only live keys and
// puts it in place of the old one, so that no page of the file still holds
// deleted bytes (bbolt only reuses freed pages, it never wipes them).
// progress, if not nil, is called with the number of keys copied so far and
// the total, never with a lock held.
//
// It copies a snapshot of the store in short steps (compactStepBytes,
// compactStepTime), each one write transaction of the copy, each followed
// by a pause. Views and Updates go on throughout, and Updates write to the
// copy as well, so the copy misses nothing (and the WAL in front keeps
// folding, instead of collecting every commit in memory meanwhile). Only
// the swap of the files at the end holds off transactions. Close stops a
// Compact at its next step.
//
// The copy is written without fsync, fdatasync'ed between steps and before
// it is renamed over the original (a crash before leaves only a copy,
// which Open removes); the directory is fsync'ed after. The copy stays
// open throughout, so its lock moves with it and no other process can
// open the store in between.
func (s *Store) Compact(progress func(done, total int64)) (err error) {
	s.compactMu.Lock()
	defer s.compactMu.Unlock()
	report := func(done, total int64) {
		if progress != nil {
			progress(done, total)
		}
	}
	tmp := compactPath(s.path)
	total, err := s.liveKeys()
	if err != nil {
		return err
	}
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kv/bolt %s: compact: %w", s.path, err)
	}
	dst, err := openDB(tmp, s.opts)
	if err != nil {
		return fmt.Errorf("kv/bolt %s: compact: %w", s.path, err)
	}
	dst.NoSync, dst.NoGrowSync = true, true
	c := &compaction{dst: dst, deleted: map[string]bool{}}
	report(0, total)
	// failLocked ends a failed compaction; the caller holds upMu.
	failLocked := func(err error) error {
		s.cp = nil
		s.upMu.Unlock()
		if c.src != nil {
			_ = c.src.Rollback()
		}
		_ = dst.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("kv/bolt %s: compact: %w", s.path, err)
	}
	fail := func(err error) error {
		s.upMu.Lock()
		return failLocked(err)
	}
	// From the snapshot on, every Update writes to the copy too.
	s.upMu.Lock()
	if err := s.snapshot(c); err != nil {
		return failLocked(err)
	}
	s.cp = c
	s.upMu.Unlock()
	for {
		if err := c.failed(); err != nil {
			return fail(err)
		}
		if s.closing.Load() {
			return fail(kv.ErrClosed)
		}
		t0 := time.Now()
		end, err := s.copyStep(c)
		if err != nil {
			return fail(err)
		}
		took := time.Since(t0)
		report(min(c.done, total), total)
		if end || c.dirty.Load() >= compactSync {
			c.dirty.Store(0)
			if err := dst.Sync(); err != nil {
				return fail(err)
			}
		}
		if end {
			break
		}
		time.Sleep(min(took, 10*time.Millisecond))
	}
	// No Update runs from here to the swap.
	s.upMu.Lock()
	if err := c.failed(); err != nil {
		return failLocked(err)
	}
	// What the Updates since the last sync wrote to the copy.
	if err := dst.Sync(); err != nil {
		return failLocked(err)
	}
	dst.NoSync, dst.NoGrowSync = false, false
	// Views still read the old file through its descriptor.
	if err := os.Rename(tmp, s.path); err != nil {
		return failLocked(err)
	}
	// The swap, the only step no transaction may overlap: closing the old
	// file and the directory's fsync come after it.
	s.mu.Lock()
	old := s.db
	if s.db != nil {
		s.db = dst
	}
	s.mu.Unlock()
	s.cp = nil
	s.upMu.Unlock()
	if old == nil {
		_ = dst.Close()
		return kv.ErrClosed
	}
	report(total, total)
	if err := old.Close(); err != nil {
		return fmt.Errorf("kv/bolt %s: compact: close old file: %w", s.path, err)
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		return fmt.Errorf("kv/bolt %s: compact: %w", s.path, err)
	}
	return nil
}

// liveKeys counts the keys of the store (the compaction's progress total).
func (s *Store) liveKeys() (total int64, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() { s.faultRecover(old, &err, recover()) }()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usable(); err != nil {
		return 0, err
	}
	r := &reader{s: s}
	defer r.leave(r.enter(), &err)
	err = s.db.View(func(tx *bbolt.Tx) error {
		src := tx.Bucket(bucketName)
		if src == nil {
			return fmt.Errorf("bucket %q missing: %w", bucketName, ErrCorrupt)
		}
		// KeyN counts a nested value twice (its entry and the value in
		// its bucket); BucketN counts src and each nested bucket.
		st := src.Stats()
		total = int64(st.KeyN - (st.BucketN - 1))
		return nil
	})
	return total, err
}

// snapshot begins the read transaction the compaction copies. The caller
// holds upMu.
func (s *Store) snapshot(c *compaction) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() { s.faultRecover(old, &err, recover()) }()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.usable(); err != nil {
		return err
	}
	r := &reader{s: s}
	defer r.leave(r.enter(), &err)
	if c.src, err = s.db.Begin(false); err != nil {
		return err
	}
	if c.b = c.src.Bucket(bucketName); c.b == nil {
		return fmt.Errorf("bucket %q missing: %w", bucketName, ErrCorrupt)
	}
	c.cur = c.b.Cursor()
	c.k, c.v = c.cur.First()
	return nil
}

// copyStep copies the snapshot's next keys into the copy in one
// transaction of at most compactStepBytes and about compactStepTime, and
// reports whether the snapshot is copied (and released).
func (s *Store) copyStep(c *compaction) (end bool, err error) {
	if c.src == nil {
		return true, nil
	}
	old := debug.SetPanicOnFault(true)
	defer func() { s.faultRecover(old, &err, recover()) }()
	if f := s.faulted.Load(); f != nil {
		return false, *f
	}
	r := &reader{s: s}
	defer r.leave(r.enter(), &err)
	err = c.dst.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketName)
		// Keys arrive in order: pack pages nearly full.
		b.FillPercent = 0.9
		in := b.Cursor()
		c.mu.Lock()
		defer c.mu.Unlock()
		t0 := time.Now()
		for n, size := 0, 0; c.k != nil; c.k, c.v = c.cur.Next() {
			if n > 0 && (size >= compactStepBytes || time.Since(t0) >= compactStepTime) {
				c.dirty.Add(int64(size))
				return nil
			}
			if n++; n%compactYield == 0 {
				runtime.Gosched() // let a waiting writer have this core
			}
			if c.deleted[string(c.k)] {
				delete(c.deleted, string(c.k))
				continue
			}
			if k, _ := in.Seek(c.k); bytes.Equal(k, c.k) {
				continue // written since the snapshot
			}
			v := entryValue(c.b, c.k, c.v)
			if err := putValue(b, c.k, v, s.opts.Flat); err != nil {
				return err
			}
			size += len(c.k) + len(v)
			c.done++
		}
		return nil
	})
	if err != nil || c.k != nil {
		return false, err
	}
	// The copy's last transaction holds no reference into the snapshot
	// any more: release it.
	err = c.src.Rollback()
	c.src, c.b, c.cur = nil, nil, nil
	c.mu.Lock()
	c.deleted = nil
	c.mu.Unlock()
	return true, err
}

// mirror writes to the copy what a committed Update wrote. The caller
// holds upMu. A failure fails the compaction, not the Update, which is
// committed.
func (s *Store) mirror(c *compaction, ops []mirrorOp) {
	if len(ops) == 0 || c.failed() != nil {
		return
	}
	setErr := func(err error) {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
	}
	defer func() {
		if p := recover(); p != nil {
			setErr(fmt.Errorf("write to the copy: %v", p))
		}
	}()
	size := 0
	err := c.dst.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketName)
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, o := range ops {
			var err error
			if o.del {
				err = deleteValue(b, o.k)
				if c.deleted != nil {
					c.deleted[string(o.k)] = true
				}
			} else {
				err = putValue(b, o.k, o.v, s.opts.Flat)
			}
			if err != nil {
				return err
			}
			size += len(o.k) + len(o.v)
		}
		return nil
	})
	if err != nil {
		setErr(fmt.Errorf("write to the copy: %w", err))
	}
	c.dirty.Add(int64(size))
}

// syncDir makes a rename or an unlink in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// usable returns why the store cannot be used (closed, or faulted), if so.
// The caller holds mu.
func (s *Store) usable() error {
	if s.db == nil {
		return kv.ErrClosed
	}
	if f := s.faulted.Load(); f != nil {
		return *f
	}
	return nil
}
