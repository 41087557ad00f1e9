package mvcc

import (
	"fmt"
	"testing"

	"github.com/padfs/padfs/internal/rawscan"
	"github.com/padfs/padfs/mvcc/kv"
)

// inodeVersions counts the versions left in the inode chain of path.
func inodeVersions(t *testing.T, e *lcEnv, sid SessionID, path string) int {
	t.Helper()
	ino := e.ino(sid, path)
	n := 0
	if err := e.st.View(func(tx *ReadTx) error {
		return scanKeys(tx.r, inodeChain(sid, ino), func(k, _ []byte) error {
			n++
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func keepLastContent(name string, i int) string {
	return fmt.Sprintf("%s version %d MARKER-keeplast-%s-%02d\n", name, i, name, i)
}

// writeTen writes f.txt and g.txt ten times each and returns the point
// right after each write of f.txt.
func writeTen(e *lcEnv, sid SessionID) []HLC {
	var at []HLC
	for i := 1; i <= 10; i++ {
		e.write(sid, "f.txt", []byte(keepLastContent("f", i)))
		at = append(at, e.now())
		e.write(sid, "g.txt", []byte(keepLastContent("g", i)))
	}
	return at
}

// checkKeepLast3: after prune --before T --keep-last 3 the three newest
// versions of f.txt read as of their own points, older points read the
// state as of T, and only three versions are left in the chain.
func checkKeepLast3(t *testing.T, e *lcEnv, sid SessionID, at []HLC, asof bool) {
	t.Helper()
	for i, p := range at {
		want := keepLastContent("f", 10)
		if asof && i >= 7 {
			want = keepLastContent("f", i+1)
		}
		if got := e.mustRead(sid, "f.txt", p); got != want {
			t.Errorf("f.txt as of version %d: %q, want %q", i+1, got, want)
		}
	}
	for _, f := range []string{"f.txt", "g.txt"} {
		if n := inodeVersions(t, e, sid, f); n != 3 {
			t.Errorf("%s keeps %d inode versions, want 3", f, n)
		}
	}
}

// Issue 10.1: prune --before T --keep-last N keeps the N newest versions
// of each file however old, reads them as of their points, and frees the
// rest (bytes too, after a compaction).
func TestPruneKeepLast(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("keeplast")
	at := writeTen(e, sid)
	tt := e.now()
	if err := e.st.Sync(); err != nil {
		t.Fatal(err)
	}
	if len(rawscan.Hits(t, e.dir, "MARKER-keeplast-f-01")) == 0 {
		t.Fatal("marker not on disk before the prune: the test proves nothing")
	}
	before := storedBytes(t, e.st)
	dry, err := e.st.Prune(sid, PruneOptions{Before: tt, UnlinkedBefore: tt, KeepLast: 3, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if storedBytes(t, e.st) != before {
		t.Fatal("dry run changed the store")
	}
	r, err := e.st.Prune(sid, PruneOptions{Before: tt, UnlinkedBefore: tt, KeepLast: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dry %+v\nreal %+v", dry, r)
	// Per file: versions 8 and 9 were superseded before T and kept (10 is
	// current); the empty version of the create and 1..7 went. The root
	// directory's inode keeps its last 3 too (2 of them superseded).
	if r.KeptLast != 6 || dry.KeptLast != r.KeptLast || dry.Versions != r.Versions || dry.Bytes != r.Bytes {
		t.Fatalf("dry run said %+v, the prune did %+v", dry, r)
	}
	checkKeepLast3(t, e, sid, at, true)

	// Two more writes and the same policy again: the window moves on.
	e.write(sid, "f.txt", []byte(keepLastContent("f", 11)))
	p11 := e.now()
	e.write(sid, "f.txt", []byte(keepLastContent("f", 12)))
	t2 := e.now()
	r, err = e.st.Prune(sid, PruneOptions{Before: t2, UnlinkedBefore: t2, KeepLast: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Versions != 2 {
		t.Fatalf("second prune: %+v, want versions 8 and 9 of f.txt gone", r)
	}
	if got := e.mustRead(sid, "f.txt", at[9]); got != keepLastContent("f", 10) {
		t.Fatalf("f.txt as of version 10: %q", got)
	}
	if got := e.mustRead(sid, "f.txt", p11); got != keepLastContent("f", 11) {
		t.Fatalf("f.txt as of version 11: %q", got)
	}
	if got := e.mustRead(sid, "f.txt", at[7]); got != keepLastContent("f", 12) {
		t.Fatalf("f.txt as of pruned version 8: %q, want the state as of T", got)
	}
	if n := inodeVersions(t, e, sid, "f.txt"); n != 3 {
		t.Fatalf("f.txt keeps %d inode versions, want 3", n)
	}

	if err := e.st.Compact(nil); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		hits := rawscan.Hits(t, e.dir, fmt.Sprintf("MARKER-keeplast-f-%02d", i))
		if i <= 9 && len(hits) > 0 {
			t.Errorf("pruned version %d of f.txt remains in %v", i, hits)
		}
		if i >= 10 && len(hits) == 0 {
			t.Errorf("kept version %d of f.txt is not on disk", i)
		}
	}
}

// A file unlinked before T keeps no versions: --keep-last is for files
// that exist.
func TestPruneKeepLastUnlinked(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("keeplast-gone")
	writeTen(e, sid)
	ino := e.ino(sid, "g.txt")
	dir, name := e.parent(sid, "g.txt")
	if err := e.st.Remove(sid, dir, name, false); err != nil {
		t.Fatal(err)
	}
	tt := e.now()
	if _, err := e.st.Prune(sid, PruneOptions{Before: tt, UnlinkedBefore: tt, KeepLast: 3}); err != nil {
		t.Fatal(err)
	}
	n := 0
	if err := e.st.View(func(tx *ReadTx) error {
		return scanKeys(tx.r, inodeChain(sid, ino), func(k, _ []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("unlinked g.txt keeps %d inode versions", n)
	}
	if n := inodeVersions(t, e, sid, "f.txt"); n != 3 {
		t.Fatalf("f.txt keeps %d inode versions, want 3", n)
	}
}

// History without S records (an older padfs) is scanned chain by chain;
// --keep-last keeps the same versions there, and reads as of their points
// read the state as of T (without records a read cannot prove that a kept
// version was current at a point).
func TestPruneKeepLastWithoutRecords(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("keeplast-old")
	at := writeTen(e, sid)
	tt := e.now()
	err := e.st.kv.Update(func(tx kv.Txn) error {
		for _, pre := range [][]byte{{pSuperseded}, {pPrune}} {
			if err := scanKeys(tx, pre, func(k, _ []byte) error { return tx.Delete(k) }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.reopen()
	r, err := e.st.Prune(sid, PruneOptions{Before: tt, UnlinkedBefore: tt, KeepLast: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Scanned == 0 || r.KeptLast == 0 {
		t.Fatalf("receipt %+v", r)
	}
	checkKeepLast3(t, e, sid, at, false)
}

// A version kept for a checkpoint below a gap is not shown at the points
// of the deleted versions above it, even when a later prune's N reaches
// it: the S record of the next version left names another predecessor.
func TestPruneKeepLastGapBelow(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("keeplast-gap")
	var at []HLC
	for i := 1; i <= 10; i++ {
		e.write(sid, "f.txt", []byte(keepLastContent("f", i)))
		at = append(at, e.now())
		if i == 5 {
			if _, err := e.st.CreateCheckpoint(sid, "cp5"); err != nil {
				t.Fatal(err)
			}
		}
	}
	tt := e.now()
	if _, err := e.st.Prune(sid, PruneOptions{Before: tt, UnlinkedBefore: tt, KeepLast: 2}); err != nil {
		t.Fatal(err)
	}
	// Left: 10, 9 (N=2) and 5 (the checkpoint's).
	if n := inodeVersions(t, e, sid, "f.txt"); n != 3 {
		t.Fatalf("f.txt keeps %d inode versions, want 3", n)
	}
	if _, err := e.st.Prune(sid, PruneOptions{Before: tt, UnlinkedBefore: tt, KeepLast: 5}); err != nil {
		t.Fatal(err)
	}
	for i, want := range map[int]string{
		9: keepLastContent("f", 10), 8: keepLastContent("f", 9),
		7: keepLastContent("f", 10), 6: keepLastContent("f", 10), 5: keepLastContent("f", 10), // deleted: the state as of T
	} {
		if got := e.mustRead(sid, "f.txt", at[i]); got != want {
			t.Errorf("f.txt as of version %d: %q, want %q", i+1, got, want)
		}
	}
	cp, ok, err := checkpointOf(e.st, sid, "cp5")
	if err != nil || !ok {
		t.Fatalf("checkpoint cp5: %v %v", ok, err)
	}
	if got := e.mustRead(sid, "f.txt", cp); got != keepLastContent("f", 5) {
		t.Errorf("f.txt as of cp5: %q", got)
	}
}

// --keep-last reads the records of the commits before T and at most N keys
// of each inode chain they name, never every chain of the store.
func TestPruneKeepLastCostFollowsRecords(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("keeplast-cost")
	for i := 0; i < 200; i++ {
		e.write(sid, fmt.Sprintf("f%03d", i%50), []byte(fmt.Sprintf("v%d\n", i)))
	}
	t1 := e.now()
	for i := 0; i < 500; i++ {
		e.write(sid, fmt.Sprintf("f%03d", 50+i%50), []byte(fmt.Sprintf("w%d\n", i)))
	}
	r, err := e.st.Prune(sid, PruneOptions{Before: t1, UnlinkedBefore: t1, KeepLast: 3})
	if err != nil {
		t.Fatal(err)
	}
	commits := 0
	for _, ev := range e.events(sid, LogFilter{}) {
		if ev.HLC <= t1 {
			commits++
		}
	}
	if r.Records == 0 || r.Records > commits || r.Scanned != 0 || r.KeptLast == 0 {
		t.Fatalf("prune of the first %d commits: %+v", commits, r)
	}
	for i := 0; i < 50; i++ {
		if n := inodeVersions(t, e, sid, fmt.Sprintf("f%03d", i)); n != 3 {
			t.Fatalf("f%03d keeps %d versions, want 3", i, n)
		}
	}
}

// A rewrite through O_TRUNC is two versions (the empty one, then the
// content) and counts as one save, with and without S records.
func TestPruneKeepLastCountsSaves(t *testing.T) {
	for _, records := range []bool{true, false} {
		t.Run(fmt.Sprintf("records=%v", records), func(t *testing.T) {
			e := lcOpen(t)
			sid := e.session("keeplast-saves")
			var at []HLC
			zero := uint64(0)
			for i := 1; i <= 10; i++ {
				if i > 1 {
					if _, err := e.st.SetAttr(sid, e.ino(sid, "f.txt"), SetAttr{Size: &zero}); err != nil {
						t.Fatal(err)
					}
				}
				e.write(sid, "f.txt", []byte(keepLastContent("f", i)))
				at = append(at, e.now())
			}
			tt := e.now()
			if !records {
				if err := e.st.kv.Update(func(tx kv.Txn) error {
					for _, pre := range [][]byte{{pSuperseded}, {pPrune}} {
						if err := scanKeys(tx, pre, func(k, _ []byte) error { return tx.Delete(k) }); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				e.reopen()
			}
			if _, err := e.st.Prune(sid, PruneOptions{Before: tt, UnlinkedBefore: tt, KeepLast: 3}); err != nil {
				t.Fatal(err)
			}
			// 10, its truncation, 9, its truncation, 8.
			if n := inodeVersions(t, e, sid, "f.txt"); n != 5 {
				t.Fatalf("f.txt keeps %d inode versions, want 5", n)
			}
			if !records {
				return // no records: reads before T read the state as of T
			}
			for i, p := range at {
				want := keepLastContent("f", 10)
				if i >= 7 {
					want = keepLastContent("f", i+1)
				}
				if got := e.mustRead(sid, "f.txt", p); got != want {
					t.Errorf("f.txt as of save %d: %q, want %q", i+1, got, want)
				}
			}
		})
	}
}
