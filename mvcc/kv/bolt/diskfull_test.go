package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
	"golang.org/x/sys/unix"
)

// TestFullDiskGivesBackTheTail: a commit that runs out of space leaves
// the blocks it wrote past the data free again, for the next (smaller)
// write, and the store stays whole.
func TestFullDiskGivesBackTheTail(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	free := func() int64 {
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil {
			t.Fatal(err)
		}
		return int64(fs.Bavail) * int64(fs.Bsize)
	}
	s, err := Open(filepath.Join(dir, "padfs.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx kv.Txn) error { return tx.Put([]byte("keep"), []byte("me")) }); err != nil {
		t.Fatal(err)
	}
	before := free()
	big := bytes.Repeat([]byte{0x5a}, 1<<20)
	err = s.Update(func(tx kv.Txn) error {
		for i := range 8 {
			if err := tx.Put(fmt.Appendf(nil, "big/%d", i), big); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("8 MiB into a 4 MiB disk: %v, want ENOSPC", err)
	}
	if after := free(); after < before-64<<10 {
		t.Errorf("the failed commit kept %d KiB of the disk (%d KiB free before, %d after)", (before-after)>>10, before>>10, after>>10)
	}
	if err := s.Update(func(tx kv.Txn) error { return tx.Put([]byte("small"), big[:100<<10]) }); err != nil {
		t.Fatalf("a small commit after the failed one: %v", err)
	}
	// The store reopens whole, with both commits.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(filepath.Join(dir, "padfs.db"), Options{}); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.View(func(r kv.Reader) error {
		v, err := r.Get([]byte("keep"))
		if err == nil && string(v) != "me" {
			err = fmt.Errorf("keep = %q", v)
		}
		if w, _ := r.Get([]byte("small")); len(w) != 100<<10 {
			err = errors.Join(err, fmt.Errorf("small has %d bytes", len(w)))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
