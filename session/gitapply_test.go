package session

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// materialize writes session sid's tree as of at into dir: files with git's
// modes (644 or 755), symlinks, directories.
func materialize(t *testing.T, st *mvcc.Store, sid mvcc.SessionID, at mvcc.HLC, dir string) {
	t.Helper()
	err := st.View(func(tx *mvcc.ReadTx) error {
		return tx.WalkTree(sid, at, func(e mvcc.TreeEntry) error {
			p := filepath.Join(dir, e.Path)
			n := e.Node
			switch {
			case n.IsDir():
				return os.Mkdir(p, 0o755)
			case n.IsSymlink():
				return os.Symlink(n.Target, p)
			}
			b, err := tx.Content(n)
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if n.Mode&0o111 != 0 {
				mode = 0o755
			}
			if err := os.WriteFile(p, b, mode); err != nil {
				return err
			}
			return os.Chmod(p, mode)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// listing describes the files and symlinks below dir (directories with
// nothing below them are left out: git does not carry them).
func listing(t *testing.T, dir string) string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." || rel == ".git" || strings.HasPrefix(rel, ".git/") {
			return nil
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			tgt, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s -> %s", rel, tgt))
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out = append(out, fmt.Sprintf("%s %o %q", rel, fi.Mode().Perm()&0o111, b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// The patch of padfs diff -u, applied by the real git apply in a copy of
// the older tree, gives the newer tree: text and binary files added,
// changed and deleted, a mode change, symlinks, renames (of a file and of
// a directory with files below it), a file that became a symlink, and a
// deleted directory. What it cannot carry (an empty directory) is named.
func TestUnifiedPatchAppliesWithGit(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	st, p := openTest(t)
	m, sid, root := st.MVCC(), p.SID(), p.Header().Root
	bin := func(seed byte, n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(i*int(seed)) ^ seed
		}
		b[3] = 0
		return string(b)
	}
	for path, s := range map[string]string{
		"keep.txt": "a\nb\nc\n", "mod.txt": "one\ntwo\nthree\n", "gone.txt": "bye\n",
		"bin.dat": bin(7, 5000), "gone.bin": bin(3, 100), "old-name.txt": "same\n",
		"run.sh": "#!/bin/sh\necho hi\n", "becomes-link": "plain\n",
		"dir/a.txt": "in dir\n", "dir/sub/b.bin": bin(9, 70), "dir/changed.txt": "x\n",
		"doomed/x.txt": "x\n", "doomed/deeper/y.txt": "y\n",
	} {
		if err := p.Write(context.Background(), path, s); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Create(sid, root, "link", mvcc.Attr{Mode: syscall.S_IFLNK | 0o777}, "keep.txt"); err != nil {
		t.Fatal(err)
	}
	from, _ := st.Now()

	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Write(context.Background(), "mod.txt", "one\n2\nthree\nfour"))
	must(p.Write(context.Background(), "bin.dat", bin(7, 5000)[:4000]+"tail"))
	must(p.Write(context.Background(), "new.bin", bin(5, 300)))
	must(p.Write(context.Background(), "new.txt", "hello\n"))
	must(p.Write(context.Background(), "dir/changed.txt", "y\n"))
	must(m.Remove(sid, root, "gone.txt", false))
	must(m.Remove(sid, root, "gone.bin", false))
	must(m.Rename(sid, root, "old-name.txt", root, "new-name.txt", 0))
	must(m.Rename(sid, root, "dir", root, "moved-dir", 0))
	run, err := m.Walk(sid, "run.sh", mvcc.Latest)
	must(err)
	mode := uint32(0o755)
	_, err = m.SetAttr(sid, run.Ino, mvcc.SetAttr{Mode: &mode})
	must(err)
	must(m.Remove(sid, root, "link", false))
	_, err = m.Create(sid, root, "link", mvcc.Attr{Mode: syscall.S_IFLNK | 0o777}, "new.txt")
	must(err)
	must(m.Remove(sid, root, "becomes-link", false))
	_, err = m.Create(sid, root, "becomes-link", mvcc.Attr{Mode: syscall.S_IFLNK | 0o777}, "mod.txt")
	must(err)
	doomed, err := m.Walk(sid, "doomed", mvcc.Latest)
	must(err)
	deeper, err := m.Walk(sid, "doomed/deeper", mvcc.Latest)
	must(err)
	must(m.Remove(sid, deeper.Ino, "y.txt", false))
	must(m.Remove(sid, doomed.Ino, "deeper", true))
	must(m.Remove(sid, doomed.Ino, "x.txt", false))
	must(m.Remove(sid, root, "doomed", true))
	_, err = m.Create(sid, root, "empty-dir", mvcc.Attr{Mode: syscall.S_IFDIR | 0o755}, "")
	must(err)
	to, _ := st.Now()

	changes, err := m.Diff(t.Context(), sid, from, to)
	must(err)
	var patch bytes.Buffer
	lost, err := WriteUnified(context.Background(), &patch, m, sid, to, changes)
	must(err)
	if len(lost) != 1 || !strings.Contains(lost[0], "empty-dir") {
		t.Errorf("what the patch cannot express: %q, want the empty directory", lost)
	}
	if !strings.Contains(patch.String(), "GIT binary patch\nliteral ") {
		t.Errorf("no git binary patch in:\n%s", patch.String())
	}

	base := t.TempDir()
	work, want := filepath.Join(base, "work"), filepath.Join(base, "want")
	must(os.Mkdir(work, 0o755))
	must(os.Mkdir(want, 0o755))
	materialize(t, m, sid, from, work)
	materialize(t, m, sid, to, want)
	pf := filepath.Join(base, "p.patch")
	must(os.WriteFile(pf, patch.Bytes(), 0o644))
	cmd := exec.Command(git, "apply", "--check", "-v", pf)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+base)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply --check: %v\n%s\npatch:\n%s", err, out, patch.String())
	}
	cmd = exec.Command(git, "apply", pf)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+base)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s", err, out)
	}
	if got, wantL := listing(t, work), listing(t, want); got != wantL {
		t.Errorf("after git apply:\n%s\nwant:\n%s\npatch:\n%s", got, wantL, patch.String())
	}
	// And back: git apply -R of the same patch in the newer tree.
	cmd = exec.Command(git, "apply", "-R", pf)
	cmd.Dir = want
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+base)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply -R: %v\n%s", err, out)
	}
	old := filepath.Join(base, "old")
	must(os.Mkdir(old, 0o755))
	materialize(t, m, sid, from, old)
	if got, wantL := listing(t, want), listing(t, old); got != wantL {
		t.Errorf("after git apply -R:\n%s\nwant:\n%s", got, wantL)
	}
}
