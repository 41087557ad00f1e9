package search

import (
	"context"
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
	if _, err := st.Restore(context.Background(), sid, at, mvcc.RestoreOptions{Paths: []string{"a"}}); err != nil {
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

// TestRestoreSeveralRootsReindexesThem: a restore of several paths re-reads
// those subtrees (named in the event's Also), not the whole session; an
// event from before Also, which names them only in its Detail text, still
// re-walks everything.
func TestRestoreSeveralRootsReindexesThem(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a/x": []byte("old a\n"), "b/y": []byte("old b\n"),
		"c/z": []byte("other\n")})
	at, err := st.Now()
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, st, sid, "a/x", []byte("new a\n"))
	putFile(t, st, sid, "b/y", []byte("new b\n"))
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	before := ix.be.stats().Indexed
	if _, err := st.Restore(context.Background(), sid, at, mvcc.RestoreOptions{Paths: []string{"a", "b"}}); err != nil {
		t.Fatal(err)
	}
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	if n := ix.be.stats().Indexed - before; n != 2 {
		t.Errorf("restore of a/ and b/ indexed %d documents, want 2 (a/x, b/y)", n)
	}
	out, code, _ := padGrep(t, ix, sid, []string{"-r", "old"})
	if out != "a/x:old a\nb/y:old b\n" || code != 0 {
		t.Errorf("grep after restore: %q exit %d", out, code)
	}

	old := newChanges()
	old.add(mvcc.Event{Op: mvcc.OpRestore, Path: "a", Detail: "as of 2026-01-01T00:00:00Z; also b"})
	if !old.full {
		t.Errorf("old multi-root restore event: not a full re-walk: %+v", old)
	}
	unknown := newChanges()
	unknown.add(mvcc.Event{Op: "session.frobnicate", Path: "."})
	if !unknown.full {
		t.Errorf("unknown op: not a full re-walk")
	}
}
