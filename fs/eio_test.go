package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// faultyKV passes through to a real driver, except that while armed its
// Updates, or its reads, fail with EIO: a disk that returns I/O errors.
type faultyKV struct {
	kv.Store
	failUpdates, failReads atomic.Int32 // calls left to fail
}

var errInjected = fmt.Errorf("injected: %w", syscall.EIO)

func (f *faultyKV) Update(fn func(kv.Txn) error) error {
	if f.failUpdates.Add(-1) >= 0 {
		return errInjected
	}
	return f.Store.Update(fn)
}

func (f *faultyKV) View(fn func(kv.Reader) error) error {
	if f.failReads.Add(-1) >= 0 {
		return errInjected
	}
	return f.Store.View(fn)
}

// TestStoreEIO: I/O errors from the store reach the caller as EIO (a
// write's close, a read), commit nothing half, and leave the mount up:
// once the disk answers again everything works, and after a reopen every
// acknowledged write is there and nothing of the failed ones.
func TestStoreEIO(t *testing.T) {
	data := t.TempDir()
	var fk *faultyKV
	st := openStoreOver(t, data, func(w *wal.Store) kv.Store { fk = &faultyKV{Store: w}; return fk })
	closed := false
	t.Cleanup(func() {
		if !closed {
			st.Close()
		}
	})
	h, err := st.CreateSession("eio", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	m := mountAt(t, st, mnt, Options{Session: &h.ID, SpillDir: filepath.Join(data, "spill")})

	sh(t, mnt, "echo before > kept.txt")
	// Every commit fails for a while: the writer's close reports EIO
	// (the create is committed with the content, mvcc/held.go, so it is
	// the close that fails; the shell would not say).
	fk.failUpdates.Store(1 << 20)
	if err := os.WriteFile(filepath.Join(mnt, "lost.txt"), []byte("lost\n"), 0o644); !errors.Is(err, syscall.EIO) {
		t.Fatalf("a write whose commit failed: %v, want EIO", err)
	}
	// Its create is still held, uncommitted: reads go on meanwhile.
	if _, err := os.ReadDir(mnt); err != nil {
		t.Errorf("listing while a held create cannot commit: %v", err)
	}
	if _, err := shErr(mnt, "mkdir d"); err == nil {
		t.Error("mkdir with a failing store succeeded")
	}
	fk.failUpdates.Store(0)
	// A file written while the store worked, closed while it fails: the
	// close(2) reports EIO (the data was not acknowledged).
	f, err := os.Create(filepath.Join(mnt, "late.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	fk.failUpdates.Store(1 << 20)
	if err := f.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close with a failing store: %v, want EIO", err)
	}
	fk.failUpdates.Store(0)
	// Reads that fail get EIO too; the mount stays up.
	// (kept.txt's pages and entry are in the kernel's cache, so ask for
	// names the kernel has not seen: a failing disk must not answer
	// ENOENT for them.)
	fk.failReads.Store(1 << 20)
	_, err = os.Stat(filepath.Join(mnt, "never-looked-up"))
	_, rerr := os.ReadDir(filepath.Join(mnt, "d-never-listed"))
	fk.failReads.Store(0)
	if !errors.Is(err, syscall.EIO) {
		t.Errorf("lookup with a failing store: %v, want EIO", err)
	}
	if !errors.Is(rerr, syscall.EIO) {
		t.Errorf("opendir with a failing store: %v, want EIO", rerr)
	}
	// The disk answers again: the mount works as before.
	if got := sh(t, mnt, "cat kept.txt; echo after > after.txt; cat after.txt; mkdir d2 && ls"); got != "before\nafter\nafter.txt\nd2\nkept.txt\nlate.txt\nlost.txt\n" {
		t.Fatalf("after the errors: %q", got)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	closed = true
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopened without faults: the acknowledged writes are there, and no
	// trace of the failed ones.
	st2, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	for name, want := range map[string]string{"kept.txt": "before\n", "after.txt": "after\n"} {
		n, err := st2.Walk(h.ID, name, mvcc.Latest)
		if err != nil {
			t.Fatalf("%s after reopen: %v", name, err)
		}
		got, err := st2.ReadAll(n)
		if err != nil || string(got) != want {
			t.Errorf("%s after reopen: %q %v, want %q", name, got, err, want)
		}
	}
	// lost.txt, whose close failed, stayed dirty like late.txt: retried
	// later, it is whole or empty, never half.
	if n, err := st2.Walk(h.ID, "lost.txt", mvcc.Latest); err == nil {
		got, _ := st2.ReadAll(n)
		if len(got) != 0 && string(got) != "lost\n" {
			t.Errorf("lost.txt, whose commit failed, holds %q", got)
		}
	}
	if _, err := st2.Walk(h.ID, "d", mvcc.Latest); err == nil {
		t.Error("directory d, whose mkdir failed, exists")
	}
}
