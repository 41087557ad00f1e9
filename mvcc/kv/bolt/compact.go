package bolt

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"

	"github.com/padfs/padfs/mvcc/kv"
	"go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// compactPath is the temporary copy Compact writes next to the store.
func compactPath(path string) string { return path + ".compact" }

// Compact rewrites the store into a fresh file holding only live keys and
// puts it in place of the old one, so that no page of the file still holds
// deleted bytes (bbolt only reuses freed pages, it never wipes them).
// progress, if not nil, is called with the number of keys copied so far and
// the total. Updates wait while it copies; Views go on, and wait only for
// the swap of the files at the end. (Behind the WAL, whose writes collect
// in its memtable meanwhile, no writer waits for the copy.)
//
// The copy is committed (fsync'ed) by bbolt, renamed over the original and
// the directory fsync'ed. The copy stays open throughout, so its lock moves
// with it and no other process can open the store in between.
func (s *Store) Compact(progress func(done, total int64)) (err error) {
	s.upMu.Lock()
	defer s.upMu.Unlock()
	s.mu.RLock()
	if err := s.usable(); err != nil {
		s.mu.RUnlock()
		return err
	}
	tmp := compactPath(s.path)
	if err := os.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.mu.RUnlock()
		return fmt.Errorf("kv/bolt %s: compact: %w", s.path, err)
	}
	dst, err := openDB(tmp, s.opts)
	if err != nil {
		s.mu.RUnlock()
		return fmt.Errorf("kv/bolt %s: compact: %w", s.path, err)
	}
	fail := func(err error) error {
		_ = dst.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("kv/bolt %s: compact: %w", s.path, err)
	}
	// The copy is no store until the rename: its transactions skip
	// bbolt's fdatasyncs (two a commit, and an fsync each time the file
	// grows by 16 MiB), and one fdatasync makes the whole file, its size
	// too, durable before the rename. The fdatasyncs of a batch stalled
	// the filesystem's journal for the WAL's appends meanwhile (a 64 MiB
	// batch's: 136-269 ms, a writer's pwritev in them up to 162 ms).
	dst.NoSync, dst.NoGrowSync = true, true
	err = s.copyTo(dst, progress)
	s.mu.RUnlock()
	if err == nil {
		err = dst.Sync()
	}
	// From the swap on, commits are durable again.
	dst.NoSync, dst.NoGrowSync = false, false
	if err != nil {
		return fail(err)
	}
	// Views still read the old file through its descriptor; no Update
	// runs (upMu), so nothing written is missing from the copy.
	if err := os.Rename(tmp, s.path); err != nil {
		return fail(err)
	}
	// The swap, the only step no transaction may overlap: closing the old
	// file and the directory's fsync come after it.
	s.mu.Lock()
	old := s.db
	if s.db != nil {
		s.db = dst
	}
	s.mu.Unlock()
	if old == nil {
		_ = dst.Close()
		return kv.ErrClosed
	}
	if err := old.Close(); err != nil {
		return fmt.Errorf("kv/bolt %s: compact: close old file: %w", s.path, err)
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		return fmt.Errorf("kv/bolt %s: compact: %w", s.path, err)
	}
	return nil
}

// copyTo copies every key of s.db into dst in bounded transactions.
func (s *Store) copyTo(dst *bbolt.DB, progress func(done, total int64)) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() { s.faultRecover(old, &err, recover()) }()
	r := &reader{s: s}
	defer r.leave(r.enter(), &err)
	report := func(done, total int64) {
		if progress != nil {
			r.call(func() error { progress(done, total); return nil })
		}
	}
	return s.db.View(func(tx *bbolt.Tx) error {
		src := tx.Bucket(bucketName)
		if src == nil {
			return fmt.Errorf("bucket %q missing: %w", bucketName, ErrCorrupt)
		}
		// KeyN counts a nested value twice (its entry and the value in
		// its bucket); BucketN counts src and each nested bucket.
		st := src.Stats()
		total := int64(st.KeyN - (st.BucketN - 1))
		var done int64
		report(done, total)
		c := src.Cursor()
		k, v := c.First()
		for k != nil {
			err := dst.Update(func(tx *bbolt.Tx) error {
				b := tx.Bucket(bucketName)
				// Keys arrive in order: pack pages nearly full.
				b.FillPercent = 0.9
				for size := 0; k != nil && size < compactBatch; k, v = c.Next() {
					v = entryValue(src, k, v)
					if err := putValue(b, k, v, s.opts.Flat); err != nil {
						return err
					}
					size += len(k) + len(v)
					done++
				}
				return nil
			})
			if err != nil {
				return err
			}
			startWriteback(dst)
			report(done, total)
		}
		return nil
	})
}

// startWriteback starts writing the copy's dirty pages to disk without
// waiting for them, so that the fdatasync before the rename finds little
// left to write (the disk sees the copy as a steady stream, not one burst
// at the end). An error here only means the final fdatasync writes more.
func startWriteback(db *bbolt.DB) {
	f, err := os.Open(db.Path())
	if err != nil {
		return
	}
	_ = unix.SyncFileRange(int(f.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE)
	_ = f.Close()
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
