package mvcc

import (
	"errors"
)

// OpenDir opens (creating if needed) the store in data directory dir:
// dir/padfs.db (bbolt) behind the write-ahead log in dir/wal/.
// TODO(core): wire mvcc/kv/bolt and mvcc/kv/wal once they land.
func OpenDir(dir string) (*Store, error) {
	return nil, errors.New("mvcc.OpenDir: storage drivers not wired yet")
}
