package search

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// verifyIndex checks the files of a session index before bleve opens it:
// bleve and bbolt trust their files and panic or fault on damage, often on
// goroutines of their own. Every zap segment ends with the CRC-32 of what
// precedes it, and root.bolt passes bbolt's consistency check, or the
// index is damaged (and rebuilt: it is derived data). Reading the
// segments once per open is the price; an index is opened once per
// worker.
func verifyIndex(dir string) error {
	segs, err := filepath.Glob(filepath.Join(dir, "store", "*.zap"))
	if err != nil {
		return err
	}
	for _, p := range segs {
		if err := verifySegment(p); err != nil {
			return err
		}
	}
	root := filepath.Join(dir, "store", "root.bolt")
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return verifyBolt(root)
}

// verifySegment checks a zap segment's trailing CRC-32 (IEEE, of every
// byte before it).
func verifySegment(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() < 4 {
		return fmt.Errorf("segment %s: %d bytes, too short", p, fi.Size())
	}
	h := crc32.NewIEEE()
	if _, err := io.CopyN(h, f, fi.Size()-4); err != nil {
		return fmt.Errorf("segment %s: %w", p, err)
	}
	var tail [4]byte
	if _, err := io.ReadFull(f, tail[:]); err != nil {
		return fmt.Errorf("segment %s: %w", p, err)
	}
	if got, want := h.Sum32(), binary.BigEndian.Uint32(tail[:]); got != want {
		return fmt.Errorf("segment %s: checksum %08x, footer says %08x", p, got, want)
	}
	return nil
}

// verifyBolt runs bbolt's consistency check on p (read-only).
func verifyBolt(p string) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s: bbolt panicked: %v", p, v)
		}
	}()
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s: %w", p, errors.Join(errs...))
		}
		return nil
	})
}
