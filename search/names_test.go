package search

import (
	"context"
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// TestNonUTF8Paths: a path is bytes; the index keeps it as its document ID
// and gives back exactly those bytes, so grep reads the file through the
// index (no scan) and search names it.
func TestNonUTF8Paths(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a\xfeb/f\xfc": []byte("needle here\n"), "ok": []byte("hay\n")})
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Rebuild(t.Context(), sid, nil); err != nil {
		t.Fatal(err)
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-rn", "needle"})
	if out != "a\xfeb/f\xfc:1:needle here\n" || code != 0 || stats.Scanned || stats.Candidates != 1 {
		t.Errorf("grep: %q exit %d %+v", out, code, stats)
	}
	hits, err := ix.Search(context.Background(), sid, "needle", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Path != "a\xfeb/f\xfc" || hits[0].Degraded {
		t.Errorf("search: %+v, want one hit a\\xfeb/f\\xfc from the index", hits)
	}

	// Catching up from the log: the old ID is deleted, the new one added.
	d, err := st.Walk(sid, "a\xfeb", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	root, err := st.Walk(sid, ".", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(sid, d.Ino, "f\xfc", root.Ino, "\xfd", 0); err != nil {
		t.Fatal(err)
	}
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	out, code, stats = padGrep(t, ix, sid, []string{"-rn", "needle"})
	if out != "\xfd:1:needle here\n" || code != 0 || stats.Scanned || stats.Candidates != 1 {
		t.Errorf("grep after rename: %q exit %d %+v", out, code, stats)
	}
}
