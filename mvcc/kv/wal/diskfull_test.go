package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
	"golang.org/x/sys/unix"
)

// smallDisk mounts a tmpfs of size bytes (unmounted at cleanup), or skips.
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

func freeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	return int64(fs.Bavail) * int64(fs.Bsize)
}

// TestFoldNetOfDeletes: on a disk the log filled, so that no fold into the
// base succeeds, deleting what the log holds makes the next fold succeed
// and gives the space back: the puts a later record deletes never reach
// the base.
func TestFoldNetOfDeletes(t *testing.T) {
	dir := smallDisk(t, 8<<20)
	b := openBase(t, dir)
	s, err := Open(filepath.Join(dir, "wal"), b, Options{FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Update(func(tx kv.Txn) error { return tx.Put([]byte("keep"), []byte("me")) }); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte{0xa5}, 256<<10)
	n := 0
	for ; n < 100; n++ {
		if err = s.Update(func(tx kv.Txn) error { return tx.Put(key(n), big) }); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after %d puts of 256 KiB: %v, want ENOSPC", n, err)
	}
	if err := s.Flush(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("fold of a full log into the base on a full disk: %v, want ENOSPC", err)
	}
	if err := s.Update(func(tx kv.Txn) error {
		for i := range n {
			if err := tx.Delete(key(i)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("deleting on the full disk: %v", err)
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("fold after the deletes: %v", err)
	}
	if free := freeBytes(t, dir); free < 5<<20 {
		t.Errorf("after the fold only %d KiB are free", free>>10)
	}
	checkN(t, s, 0)
	if err := s.View(func(r kv.Reader) error {
		v, err := r.Get([]byte("keep"))
		if err == nil && string(v) != "me" {
			err = fmt.Errorf("keep = %q", v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
