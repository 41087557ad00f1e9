// Package rawscan is test support for purges and redactions: it greps the
// raw bytes of every file of a data directory (store, WAL, search index),
// so a test can prove that a hard forget or a redaction left no byte of
// the erased content anywhere on disk.
package rawscan

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// walks bounds how often Hits starts over because a file vanished under it.
const walks = 20

// Hits lists the regular files below dir whose raw bytes contain marker.
//
// A file removed while it walks (a WAL segment folded into padfs.db, an
// index segment merged away by a running mount or a background indexer) is
// skipped, and the walk starts over: its bytes may have moved into a file
// already read, so a walk that lost a file is not a snapshot. After walks
// tries the last walk's hits are returned. Any other error fails the test.
func Hits(t testing.TB, dir, marker string) []string {
	t.Helper()
	var hits []string
	for i := 0; i < walks; i++ {
		var vanished bool
		hits, vanished = walk(t, dir, []byte(marker))
		if !vanished {
			break
		}
	}
	return hits
}

func walk(t testing.TB, dir string, marker []byte) (hits []string, vanished bool) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				vanished = true
				return nil
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				vanished = true
				return nil
			}
			return err
		}
		if bytes.Contains(b, marker) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s for the marker: %v", dir, err)
	}
	return hits, vanished
}
