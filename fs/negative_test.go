package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
)

// Names looked up and not found are cached by the kernel (a name created
// behind the mount's back stays hidden), until InvalidateSession drops the
// negative entries: in the root, in a subdirectory, in an .asof view.
func TestNegativeEntries(t *testing.T) {
	mnt, st, m := mountTest(t)
	sid := sessionOf(t, m)
	sh(t, mnt, "mkdir d")
	for _, p := range []string{"ghost", "d/ghost", "d/.gitignore"} {
		if _, err := os.Stat(filepath.Join(mnt, p)); !os.IsNotExist(err) {
			t.Fatalf("stat %s: %v", p, err)
		}
	}
	root, _ := st.Header(sid)
	d, err := st.Walk(sid, "d", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dir  mvcc.Ino
		name string
	}{{root.Root, "ghost"}, {d.Ino, "ghost"}, {d.Ino, ".gitignore"}} {
		if _, err := st.Create(sid, c.dir, c.name, mvcc.Attr{Mode: 0o644}, ""); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel answers from its negative entries...
	if _, err := os.Stat(filepath.Join(mnt, "d/ghost")); !os.IsNotExist(err) {
		t.Errorf("negative entry not cached: stat d/ghost: %v", err)
	}
	// ...until the change is announced (synchronously here).
	m.invalidate(sid)
	for _, p := range []string{"ghost", "d/ghost", "d/.gitignore"} {
		if _, err := os.Stat(filepath.Join(mnt, p)); err != nil {
			t.Errorf("after InvalidateSession: %v", err)
		}
	}
	m.negMu.Lock()
	left := len(m.negs)
	m.negMu.Unlock()
	if left != 0 {
		t.Errorf("%d negative entries still remembered", left)
	}
	// Through the mount, the kernel replaces its negative entries itself.
	sh(t, mnt, "test ! -e d/new && touch d/new && test -e d/new && mkdir -p e && test ! -e e/x && echo x > e/x && cat e/x >/dev/null")
}

// A view of a time that is not past yet is never cached negatively: files
// created later show in it.
func TestNegativeEntriesFutureView(t *testing.T) {
	mnt, _, _ := mountTest(t)
	future := "2200-01-01T00:00:00Z"
	sh(t, mnt, "touch a && test ! -e .asof/"+future+"/b && touch b && test -e .asof/"+future+"/b")
}

// In a mount of all sessions, a fork that takes over a session name shows
// at that name after InvalidateSession, and a new session's ULID resolves
// at once.
func TestNegativeEntriesSessionsRoot(t *testing.T) {
	st, err := storeopen.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	old, err := st.CreateSession("work", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	m := mountAt(t, st, mnt, Options{})
	sh(t, mnt, "echo old > work/f && test ! -e work/g")
	if _, err := os.Stat(filepath.Join(mnt, "01ARZ3NDEKTSV4RRFFQ69G5FAV")); !os.IsNotExist(err) {
		t.Fatalf("unknown session: %v", err)
	}
	// Names are unique among live sessions: the old one gives its up.
	if err := st.RenameSession(old.ID, "work-old"); err != nil {
		t.Fatal(err)
	}
	h, err := st.Fork(t.Context(), old.ID, mvcc.Latest, mvcc.ForkOptions{Name: "work"})
	if err != nil {
		t.Fatal(err)
	}
	root, _ := st.Header(h.ID)
	if _, err := st.Create(h.ID, root.Root, "g", mvcc.Attr{Mode: 0o644}, ""); err != nil {
		t.Fatal(err)
	}
	m.invalidate(h.ID)
	if got := sh(t, mnt, "cat "+h.ID.String()+"/f; ls work"); got != "old\nf\ng\n" {
		t.Errorf("after the fork: %q, want the fork's files under its id and name", got)
	}
	if got := sh(t, mnt, "ls"); !strings.Contains(got, h.ID.String()) {
		t.Errorf("root lists %q", got)
	}
}
