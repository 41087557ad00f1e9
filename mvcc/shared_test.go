package mvcc

import (
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// openShared returns two Stores on one KV: two processes sharing a store,
// as padfs processes on several hosts share a PostgreSQL one.
func openShared(t *testing.T) (a, b *Store) {
	t.Helper()
	dir := t.TempDir()
	bs, err := bolt.Open(filepath.Join(dir, StoreFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(filepath.Join(dir, WALDir), bs, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { w.Close() }) })
	if a, err = New(w); err != nil {
		t.Fatal(err)
	}
	if b, err = New(w); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestSharedHLC: a process whose clock is an hour behind still stamps its
// commits after every commit of the other process (max(local clock, the
// store's high-water mark + 1)), and Now bounds them all.
func TestSharedHLC(t *testing.T) {
	a, b := openShared(t)
	b.clock.wall = func() time.Time { return time.Now().Add(-time.Hour) }
	ha, err := a.CreateSession("a", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	hb, err := b.CreateSession("b", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var last HLC
	for i := range 5 {
		for _, p := range []struct {
			st *Store
			h  *SessionHeader
		}{{a, ha}, {b, hb}} {
			n := writeFile(t, p.st, p.h.ID, p.h.Root, "f", []byte{byte(i)})
			if n.HLC <= last {
				t.Fatalf("commit %d stamped %s, not after the previous commit %s", i, n.HLC, last)
			}
			last = n.HLC
		}
	}
	if now, err := b.Now(); err != nil || now <= last {
		t.Fatalf("Now() on the slow process = %s, %v; want after the last commit %s", now, err, last)
	}
}

// TestSharedPathCache: a directory renamed by another process is named by
// its new path in this process's next log event.
func TestSharedPathCache(t *testing.T) {
	a, b := openShared(t)
	h, err := a.CreateSession("s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	d, err := a.Create(h.ID, h.Root, "d", Attr{Mode: sIFDIR | 0o755}, "")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, a, h.ID, d.Ino, "f1", []byte("1")) // caches d's path
	if err := b.Rename(h.ID, h.Root, "d", h.Root, "e", 0); err != nil {
		t.Fatal(err)
	}
	writeFile(t, a, h.ID, d.Ino, "f2", []byte("2"))
	var paths []string
	if err := a.View(func(t *ReadTx) error {
		return t.Events(h.ID, 0, func(ev Event) bool {
			paths = append(paths, ev.Path)
			return true
		})
	}); err != nil {
		t.Fatal(err)
	}
	if got := paths[len(paths)-1]; got != "e/f2" {
		t.Fatalf("log after another process renamed d to e: %q; last event names %q, want e/f2", paths, got)
	}
}

// TestPollOthers: commits of another process reach this process's
// watchers through PollOthers; our own commits are not reported twice.
func TestPollOthers(t *testing.T) {
	a, b := openShared(t)
	var mu sync.Mutex
	var heard []Event
	b.Watch(func(_ SessionID, ev Event) {
		mu.Lock()
		heard = append(heard, ev)
		mu.Unlock()
	})
	h, err := a.CreateSession("s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := b.PollOthers(); err != nil || n != 0 {
		t.Fatalf("first poll: %d, %v; want a baseline (0)", n, err)
	}
	writeFile(t, a, h.ID, h.Root, "x", []byte("1"))
	writeFile(t, a, h.ID, h.Root, "y", []byte("2"))
	if n, err := b.PollOthers(); err != nil || n != 1 {
		t.Fatalf("poll after two commits of the other process: %d sessions, %v; want 1", n, err)
	}
	mu.Lock()
	if len(heard) != 1 || heard[0].Path != "y" {
		t.Errorf("watcher heard %+v; want the newest event (y)", heard)
	}
	heard = nil
	mu.Unlock()
	writeFile(t, b, h.ID, h.Root, "z", []byte("3")) // ours: heard at commit
	if n, err := b.PollOthers(); err != nil || n != 0 {
		t.Fatalf("poll after our own commit: %d, %v; want 0", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range heard {
		if ev.Path != "z" {
			t.Errorf("watcher heard %+v; want only our own commits (z), once", heard)
		}
	}
}

// TestFollowClose: Close stops the poller Follow started (and a second
// Follow is a no-op).
func TestFollowClose(t *testing.T) {
	a, _ := openShared(t)
	a.Follow(time.Millisecond)
	a.Follow(time.Millisecond)
	time.Sleep(5 * time.Millisecond)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSharedPruneKeepsTheClock: a prune by a process whose clock is an
// hour behind never moves the store's high-water mark back, so the other
// process's next commit is still after every earlier one.
func TestSharedPruneKeepsTheClock(t *testing.T) {
	a, b := openShared(t)
	b.clock.wall = func() time.Time { return time.Now().Add(-time.Hour) }
	h, err := a.CreateSession("s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, a, h.ID, h.Root, "f", []byte("1"))
	last := writeFile(t, a, h.ID, h.Root, "f", []byte("2")).HLC
	if _, err := b.Prune(h.ID, PruneOptions{Before: last}); err != nil {
		t.Fatal(err)
	}
	// a's own clock would stamp after last anyway; a third store, with a
	// clock as far behind as b's, shows what the prune left in the store.
	c, err := New(a.kv)
	if err != nil {
		t.Fatal(err)
	}
	c.clock.wall = b.clock.wall
	if n := writeFile(t, c, h.ID, h.Root, "f", []byte("3")); n.HLC <= last {
		t.Fatalf("commit after a prune by a lagging process stamped %s, not after %s", n.HLC, last)
	}
}
