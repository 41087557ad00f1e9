package mvcc

import (
	"os"
	"path/filepath"

	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// OpenDir opens a data directory's store the way internal/storeopen does
// (bolt behind the WAL), which mvcc's own tests cannot import; storeopen's
// tests cover its damage checks.
func OpenDir(dir string) (*Store, error) { return openDirMmap(dir, 0) }

// openDirMmap is OpenDir with bbolt's initial memory map of mmap bytes (0:
// its default).
func openDirMmap(dir string, mmap int) (*Store, error) {
	return openDirOpts(dir, bolt.Options{MmapSize: mmap})
}

// openDirFlat is OpenDir with bolt keeping every value flat, as before
// format 4: the store keeps the format it has (tests of older formats).
func openDirFlat(dir string) (*Store, error) { return openDirOpts(dir, bolt.Options{Flat: true}) }

func openDirOpts(dir string, bo bolt.Options) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	b, err := bolt.Open(filepath.Join(dir, StoreFile), bo)
	if err != nil {
		return nil, err
	}
	w, err := wal.Open(filepath.Join(dir, WALDir), b, wal.Options{})
	if err != nil {
		b.Close()
		return nil, err
	}
	st, err := New(w)
	if err != nil {
		w.Close()
		return nil, err
	}
	return st, nil
}
