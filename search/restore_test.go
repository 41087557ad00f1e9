package search

import (
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// TestRestoreReindexesItsPath: a restore event re-reads the restored
// subtree only (not the whole session), and grep then finds the restored
// content through the index.
func TestRestoreReindexesItsPath(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a/x": []byte("old needle\n"), "b/y": []byte("other\n")})
	at, err := st.Now()
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, st, sid, "a/x", []byte("new text\n"))
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	before := ix.be.stats().Indexed
	if _, err := st.Restore(sid, at, mvcc.RestoreOptions{Paths: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	if n := ix.be.stats().Indexed - before; n != 1 {
		t.Errorf("restore of a/ indexed %d documents, want 1 (a/x only)", n)
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-rn", "needle"})
	if out != "a/x:1:old needle\n" || code != 0 || stats.Scanned {
		t.Errorf("got %q exit %d %+v", out, code, stats)
	}
}
