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

	"github.com/blevesearch/bleve/v2/util"
	bolt "go.etcd.io/bbolt"
)

// verifyIndex checks the files of a session index before bleve opens it:
// bleve and bbolt trust their files and panic or fault on damage, often on
// goroutines of their own. root.bolt passes bbolt's consistency check, and
// every zap segment a snapshot in it names ends with the CRC-32 of what
// precedes it, or the index is damaged (and rebuilt: it is derived data).
// A segment no snapshot names is one scorch was writing when its process
// died (a kill -9 amid a persist or a merge): scorch never reads it and
// removes it, so it is not damage. Reading the segments once per open is
// the price; an index is opened once per worker.
func verifyIndex(dir string) error {
	root := filepath.Join(dir, "store", "root.bolt")
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil // nothing persisted yet: scorch reads no segment
	}
	segs, err := verifyBolt(root)
	if err != nil {
		return err
	}
	for _, name := range segs {
		if err := verifySegment(filepath.Join(dir, "store", name)); err != nil {
			return err
		}
	}
	return nil
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

// verifyBolt runs bbolt's consistency check on p (read-only) and returns
// the segment files its snapshots name (scorch's "s" bucket: a bucket per
// snapshot, in it a bucket per segment whose "p" key is its file name).
func verifyBolt(p string) (segs []string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("%s: bbolt panicked: %v", p, v)
		}
	}()
	db, err := bolt.Open(p, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%s: %w", p, errors.Join(errs...))
		}
		segs = snapshotSegments(tx)
		return nil
	})
	return segs, err
}

// snapshotSegments lists, once each, the segment files that the snapshots
// in tx name.
func snapshotSegments(tx *bolt.Tx) []string {
	snaps := tx.Bucket(util.BoltSnapshotsBucket)
	if snaps == nil {
		return nil
	}
	seen := map[string]bool{}
	var segs []string
	_ = snaps.ForEachBucket(func(k []byte) error {
		snap := snaps.Bucket(k)
		return snap.ForEachBucket(func(k []byte) error {
			if name := snap.Bucket(k).Get(util.BoltPathKey); len(name) > 0 && !seen[string(name)] {
				seen[string(name)] = true
				segs = append(segs, filepath.Base(string(name)))
			}
			return nil
		})
	})
	return segs
}
