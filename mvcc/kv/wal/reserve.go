package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/padfs/padfs/mvcc/kv"
	"golang.org/x/sys/unix"
)

// Disk full. A write that finds no space fails with ENOSPC and changes
// nothing; the log keeps every record until a flush succeeds; and so that
// a full disk can be emptied through the mount (an unlink is a commit, and
// needs a log record), the WAL holds back reserveSize bytes in dir/RESERVE,
// released for a small record that finds no space and taken again after
// the next successful flush.
const (
	reserveFile = "RESERVE"
	reserveSize = 1 << 20
	reserveUse  = 64 << 10 // records up to this size may use the reserve
)

func isNoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

// keepReserve (re)creates the reserve if it is missing; without the space
// it does nothing.
func (s *Store) keepReserve() {
	path := filepath.Join(s.dir, reserveFile)
	if fi, err := os.Stat(path); err == nil && fi.Size() == reserveSize {
		return
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, reserveSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // no space for it now; the next flush tries again
	}
}

// useReserve releases the reserve and reports whether there was one.
func (s *Store) useReserve() bool {
	path := filepath.Join(s.dir, reserveFile)
	if err := os.Remove(path); err != nil {
		return false
	}
	s.log.Warn("kv/wal: disk full; released the reserved space for a small commit", "dir", s.dir)
	return true
}

// replayInMemory loads the segments into the active memtable instead of
// the base and keeps them on disk until the flush that moves them there.
func (s *Store) replayInMemory(segs []*segment) error {
	tx := &memTxn{m: s.active}
	records := 0
	for i, g := range segs {
		data, err := os.ReadFile(g.path)
		if err != nil {
			return fmt.Errorf("kv/wal: replay: %w", err)
		}
		valid, torn, err := checkSegment(g.path, data, i == len(segs)-1, func(_ int, payload []byte) error {
			records++
			return applyRecord(tx, payload)
		})
		if err != nil {
			return err
		}
		if torn > 0 {
			// Newer segments will follow this one: the torn tail must go.
			if err := cutSegment(g.path, int64(valid)); err != nil {
				return err
			}
		}
	}
	s.active.kept = segs
	s.log.Info("kv/wal: recovered into memory", "dir", s.dir, "segments", len(segs), "records", records)
	return nil
}

// memTxn applies replayed records to a memtable.
type memTxn struct{ m *memtable }

func (t *memTxn) Get([]byte) ([]byte, error) { return nil, nil }
func (t *memTxn) Scan(_, _ []byte, _ func(k, v []byte) (bool, error)) error {
	return nil
}
func (t *memTxn) Put(k, v []byte) error {
	t.m.set(entry{key: k, val: cloneValue(v)}) // the tree copies k
	return nil
}
func (t *memTxn) Delete(k []byte) error {
	t.m.set(entry{key: k, del: true})
	return nil
}

var _ kv.Txn = (*memTxn)(nil)
