// Package rawscan is test support for purges and redactions: it greps the
// raw bytes of every file of a data directory (store, WAL, search index),
// so a test can prove that a hard forget or a redaction left no byte of
// the erased content anywhere on disk.
package rawscan

import (
	"bytes"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// walks bounds how often Hits starts over because the files changed under it.
const walks = 20

// Hits lists the regular files below dir whose raw bytes contain marker.
//
// The files may change while it reads them: a WAL segment folded into
// padfs.db and removed, an index segment merged away by a running mount or
// a background indexer. Bytes that moved from a file not read yet into one
// already read would be missed, so Hits lists the files (path, size,
// modification time) before and after reading them and starts over when
// the two listings differ or a file vanished; after walks tries it returns
// the last try's hits. Any other error fails the test.
func Hits(t testing.TB, dir, marker string) []string {
	t.Helper()
	var hits []string
	for i := 0; i < walks; i++ {
		before := list(t, dir)
		var vanished bool
		hits, vanished = read(t, before, []byte(marker))
		if !vanished && maps.Equal(before, list(t, dir)) {
			break
		}
	}
	return hits
}

type stamp struct {
	size  int64
	mtime int64
}

// list stamps every regular file below dir.
func list(t testing.TB, dir string) map[string]stamp {
	t.Helper()
	files := map[string]stamp{}
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
		fi, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		files[p] = stamp{fi.Size(), fi.ModTime().UnixNano()}
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s for the marker: %v", dir, err)
	}
	return files
}

// read lists the files whose bytes contain marker; vanished says one of
// them was gone.
func read(t testing.TB, files map[string]stamp, marker []byte) (hits []string, vanished bool) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			vanished = true
			continue
		}
		if err != nil {
			t.Fatalf("scan for the marker: %v", err)
		}
		if bytes.Contains(b, marker) {
			hits = append(hits, p)
		}
	}
	return hits, vanished
}
