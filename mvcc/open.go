package mvcc

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/padfs/padfs/mvcc/kv/bolt"
)

// StoreFile is the bbolt file inside a data directory.
const StoreFile = "padfs.db"

// OpenDir opens (creating if needed) the store in data directory dir.
// TODO(core): put the write-ahead log (mvcc/kv/wal) in front of bolt.
func OpenDir(dir string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	b, err := bolt.Open(filepath.Join(dir, StoreFile), bolt.Options{})
	if err != nil {
		return nil, err
	}
	st, err := New(b)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StoreFile), err)
	}
	return st, nil
}
