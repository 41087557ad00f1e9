package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// entry is what the tree comparison checks of one name.
type entry struct {
	Type   string // "dir", "file", "symlink", "other"
	Perm   fs.FileMode
	Size   int64  // files and symlinks only
	SHA256 string // files only
	Target string // symlinks only
}

func (e entry) String() string {
	switch e.Type {
	case "file":
		return fmt.Sprintf("file %v size %d sha256 %.12s", e.Perm, e.Size, e.SHA256)
	case "symlink":
		return fmt.Sprintf("symlink -> %q", e.Target)
	default:
		return fmt.Sprintf("%s %v", e.Type, e.Perm)
	}
}

// scanTree describes every name below root (root itself included as ".",
// without following symlinks): type, permission bits (with setuid, setgid,
// sticky), size, content hash and link target.
func scanTree(root string) (map[string]entry, error) {
	out := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{Perm: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)}
		switch {
		case fi.Mode().IsDir():
			e.Type = "dir"
		case fi.Mode().IsRegular():
			e.Type, e.Size = "file", fi.Size()
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			h := sha256.New()
			n, err := io.Copy(h, f)
			f.Close()
			if err != nil {
				return fmt.Errorf("read %s: %w", p, err)
			}
			if n != fi.Size() {
				return fmt.Errorf("%s: stat says %d bytes, read %d", p, fi.Size(), n)
			}
			e.SHA256 = hex.EncodeToString(h.Sum(nil))
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Type, e.Perm = "symlink", 0 // symlink modes are not meaningful on Linux
			if e.Target, err = os.Readlink(p); err != nil {
				return err
			}
			e.Size = fi.Size()
		default:
			e.Type = "other"
		}
		out[rel] = e
		return nil
	})
	return out, err
}

// treeDiff lists the differences between two trees (at most max), empty
// when they are equal.
func treeDiff(want, got string, max int) ([]string, error) {
	w, err := scanTree(want)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", want, err)
	}
	g, err := scanTree(got)
	if err != nil {
		return nil, fmt.Errorf("scan %s: %w", got, err)
	}
	names := map[string]bool{}
	for n := range w {
		names[n] = true
	}
	for n := range g {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var diffs []string
	for _, n := range sorted {
		we, win := w[n]
		ge, gin := g[n]
		var d string
		switch {
		case !gin:
			d = fmt.Sprintf("%s: missing (want %v)", n, we)
		case !win:
			d = fmt.Sprintf("%s: unexpected %v", n, ge)
		case we != ge:
			d = fmt.Sprintf("%s: got %v, want %v", n, ge, we)
		default:
			continue
		}
		diffs = append(diffs, d)
		if len(diffs) == max {
			diffs = append(diffs, "...")
			break
		}
	}
	return diffs, nil
}

// requireSameTree fails the test unless got has exactly want's names,
// types, modes, sizes, content and link targets.
func requireSameTree(t *testing.T, what, want, got string) {
	t.Helper()
	diffs, err := treeDiff(want, got, 20)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if len(diffs) > 0 {
		t.Fatalf("%s: %s differs from %s:\n  %s", what, got, want, strings.Join(diffs, "\n  "))
	}
}

// TestTreeDiffSeesEveryDifference checks the helper itself on plain
// directories (no FUSE needed).
func TestTreeDiffSeesEveryDifference(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	build := func(root string) {
		for _, d := range []string{"d/e"} {
			os.MkdirAll(filepath.Join(root, d), 0o755)
		}
		os.WriteFile(filepath.Join(root, "f"), []byte("hello"), 0o644)
		os.WriteFile(filepath.Join(root, "x"), []byte("#!/bin/sh\n"), 0o755)
		os.Symlink("d/e", filepath.Join(root, "l"))
	}
	build(a)
	build(b)
	if diffs, err := treeDiff(a, b, 10); err != nil || len(diffs) != 0 {
		t.Fatalf("equal trees: %v %v", diffs, err)
	}
	os.WriteFile(filepath.Join(b, "f"), []byte("hellO"), 0o644)  // content
	os.Chmod(filepath.Join(b, "x"), 0o644)                       // mode
	os.Remove(filepath.Join(b, "l"))                             // target
	os.Symlink("d", filepath.Join(b, "l"))                       //
	os.WriteFile(filepath.Join(b, "d", "new"), nil, 0o644)       // extra name
	os.Remove(filepath.Join(b, "d", "e"))                        // missing dir
	os.WriteFile(filepath.Join(b, "d", "e"), []byte("e"), 0o755) // type
	diffs, err := treeDiff(a, b, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"f: got", "x: got", "l: got", "d/new: unexpected", "d/e: got"} {
		found := false
		for _, d := range diffs {
			found = found || strings.HasPrefix(d, want)
		}
		if !found {
			t.Errorf("no difference %q reported; got %q", want, diffs)
		}
	}
}
