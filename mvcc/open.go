package mvcc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// Files and directories inside a data directory.
const (
	StoreFile     = "padfs.db"   // bbolt
	WALDir        = "wal"        // the group-commit log in front of it
	QuarantineDir = "quarantine" // what fsck --repair moved out of the store or log
)

// corruptOpen is a store that cannot be opened because of damage: it is
// ErrCorrupt and says what fsck --repair would do about it.
type corruptOpen struct {
	err  error
	hint string
}

func (e *corruptOpen) Error() string   { return e.err.Error() + "; " + e.hint }
func (e *corruptOpen) Unwrap() []error { return []error{e.err, ErrCorrupt} }

// OpenDir opens (creating if needed) the store in data directory dir:
// dir/padfs.db (bbolt) behind the group-commit log in dir/wal/. A commit is
// in the log (the kernel's page cache) when it returns, so it survives a
// kill -9 of padfs; Sync makes it survive a power loss; the log is folded
// into bbolt about once a second in one transaction.
func OpenDir(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := checkStoreFile(dir); err != nil {
		return nil, err
	}
	b, err := bolt.Open(filepath.Join(dir, StoreFile), bolt.Options{})
	if errors.Is(err, bolt.ErrCorrupt) {
		return nil, &corruptOpen{err, "padfs cannot rebuild it: restore " + StoreFile + " from a backup"}
	}
	if err != nil {
		return nil, err
	}
	w, err := wal.Open(filepath.Join(dir, WALDir), b, wal.Options{})
	if err != nil {
		b.Close()
		switch {
		case errors.Is(err, wal.ErrRolledBack):
			err = &corruptOpen{err, rollbackHint}
		case errors.Is(err, wal.ErrCorrupt):
			err = &corruptOpen{err, fmt.Sprintf("`padfs fsck --repair` keeps the log before the damage and moves the rest to %s",
				filepath.Join(dir, QuarantineDir))}
		}
		return nil, err
	}
	st, err := New(w)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StoreFile), err)
	}
	// The names of a new data directory, store file and log directory must
	// survive a power loss as much as their contents do.
	if err := errors.Join(syncDir(dir), syncDir(filepath.Dir(dir))); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}

// ErrCorruptWAL is wrapped by OpenDir when the write-ahead log holds a
// damaged record that is not a torn tail.
var ErrCorruptWAL = wal.ErrCorrupt

const rollbackHint = "`padfs fsck --repair` accepts the store as it is"

// checkStoreFile refuses to let bbolt create an empty store where the log
// says a store was: a padfs.db deleted or truncated to nothing.
func checkStoreFile(dir string) error {
	walDir := filepath.Join(dir, WALDir)
	st, found, err := wal.ReadState(walDir)
	if err != nil {
		return &corruptOpen{err, "`padfs fsck --repair` removes it"}
	}
	if !found {
		return nil
	}
	path := filepath.Join(dir, StoreFile)
	fi, err := os.Stat(path)
	detail := ""
	switch {
	case errors.Is(err, os.ErrNotExist):
		detail = path + " is missing"
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case fi.Size() == 0:
		detail = path + " is empty"
	default:
		return nil
	}
	return &corruptOpen{&wal.RollbackError{Path: wal.StatePath(walDir), Record: st, Detail: detail}, rollbackHint}
}
