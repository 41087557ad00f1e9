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

// Hits lists the regular files below dir whose raw bytes contain marker.
// A file removed while it walks (a WAL segment, an index segment merged
// away by a running mount or a background indexer) is skipped; any other
// error fails the test.
func Hits(t testing.TB, dir, marker string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
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
				return nil
			}
			return err
		}
		if bytes.Contains(b, []byte(marker)) {
			hits = append(hits, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s for the marker: %v", dir, err)
	}
	return hits
}
