package fs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// eventsOf counts the session's events by op.
func eventsOf(t *testing.T, st *mvcc.Store, m *Server) (map[mvcc.Op]int, int) {
	t.Helper()
	ops := map[mvcc.Op]int{}
	total := 0
	err := st.View(func(tx *mvcc.ReadTx) error {
		return tx.Events(sessionOf(t, m), 0, func(ev mvcc.Event) bool {
			ops[ev.Op]++
			total++
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return ops, total
}

// TestSmallFileTwoCommits: a small file written and removed costs two
// commits, not three: its create joins its first content (mvcc/held.go).
func TestSmallFileTwoCommits(t *testing.T) {
	mnt, st, m := mountTest(t)
	// The first create reserves the inode numbers of the next ones.
	sh(t, mnt, "echo warm > warm")
	_, before := eventsOf(t, st, m)
	if got := sh(t, mnt, "for i in 1 2 3 4 5; do echo hi $i > f$i; done; cat f3; : > empty; rm f*"); got != "hi 3\n" {
		t.Fatalf("cat: %q", got)
	}
	ops, after := eventsOf(t, st, m)
	if n := after - before; n != 11 {
		t.Errorf("6 files created, written and 5 removed: %d commits (%v), want 11", n, ops)
	}
	if ops[mvcc.OpWrite] != 1 {
		t.Errorf("%d write commits, want warm's only (each other joins its create)", ops[mvcc.OpWrite])
	}
}

// TestHeldCreateVisible: a created file not yet closed is there for the
// mount at once (stat, listing, rename, link, xattr), and for the store
// once anything but its own writes touched it; its close commits it.
func TestHeldCreateVisible(t *testing.T) {
	mnt, st, m := mountTest(t)
	sid := sessionOf(t, m)
	f, err := os.Create(filepath.Join(mnt, "a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "a")); err != nil {
		t.Fatalf("stat of a file being created: %v", err)
	}
	if got := sh(t, mnt, "ls"); got != "a\n" {
		t.Fatalf("ls while a is open: %q", got)
	}
	if _, err := st.Walk(sid, "a", mvcc.Latest); err != nil {
		t.Fatalf("the store after a listing: %v", err)
	}
	if _, err := f.Write([]byte("one\n")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// Rename, link and xattr of a file whose create is still held.
	g, err := os.Create(filepath.Join(mnt, "b"))
	if err != nil {
		t.Fatal(err)
	}
	if got := sh(t, mnt, "mv b c && ln c d && setfattr -n user.k -v v c 2>/dev/null; echo ok"); got != "ok\n" {
		t.Fatalf("mv/ln: %q", got)
	}
	if _, err := g.Write([]byte("two\n")); err != nil {
		t.Fatal(err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	// Unlinked before its close: nothing to keep.
	h, err := os.Create(filepath.Join(mnt, "e"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "e")); err != nil {
		t.Fatal(err)
	}
	h.Write([]byte("gone\n"))
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, mnt, "cat a c d; ls"); got != "one\ntwo\ntwo\na\nc\nd\n" {
		t.Fatalf("after: %q", got)
	}
	for name, want := range map[string]string{"a": "one\n", "c": "two\n", "d": "two\n"} {
		n, err := st.Walk(sid, name, mvcc.Latest)
		if err != nil {
			t.Fatalf("%s in the store: %v", name, err)
		}
		if got, err := st.ReadAll(n); err != nil || string(got) != want {
			t.Errorf("%s in the store: %q %v, want %q", name, got, err, want)
		}
	}
}
