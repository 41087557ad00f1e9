package mvcc

import (
	"bytes"
	"context"
	"github.com/padfs/padfs/internal/rawscan"
	"testing"
)

func TestOrphanChunksAreSweptAndCommitsRestoreThem(t *testing.T) {
	st, sid, root := openTest(t)
	// Bytes stored for a commit that never happened.
	orphan := bytes.Repeat([]byte("orphan-marker "), 1000)
	if _, err := st.PutContent(t.Context(), bytes.NewReader(orphan)); err != nil {
		t.Fatal(err)
	}
	kept := writeFile(t, st, sid, root, "kept", bytes.Repeat([]byte("kept "), 2000))
	before := countPrefix(t, st, pChunk)
	n, err := st.sweepOrphanChunks()
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 || countPrefix(t, st, pChunk) != before-1 {
		t.Fatalf("swept %d chunks (%d -> %d), want exactly the orphan", n, before, countPrefix(t, st, pChunk))
	}
	if got := readFile(t, st, sid, "kept", Latest); got != string(bytes.Repeat([]byte("kept "), 2000)) {
		t.Fatalf("referenced content damaged by the sweep (%d bytes)", len(got))
	}
	_ = kept

	// A sweep between PutContent and the commit: the commit stores the
	// chunks again instead of referencing missing ones. (The content is
	// larger than a batch: one batch's chunks are put by the commit
	// itself, and no sweep can come between.)
	f, err := st.Create(sid, root, "late", Attr{Mode: sIFREG | 0o644}, "")
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("late bytes "), chunkBatchBytes/10)
	r := bytes.NewReader(data)
	swept, calls := false, 0
	err = st.commitContent(context.Background(), r, func(c *Content) error {
		calls++
		if !swept {
			swept = true
			if _, err := st.sweepOrphanChunks(); err != nil {
				return err
			}
		}
		_, err := st.Update(sid, func(t *WriteTx) error {
			n, err := t.Latest(f.Ino)
			if err != nil {
				return err
			}
			if err := t.applyContent(c, n); err != nil {
				return err
			}
			t.SetEvent(Event{Op: "write"})
			return t.PutInode(n)
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, st, sid, "late", Latest); got != string(data) {
		t.Fatal("content committed after a sweep does not read back")
	}
	if calls != 2 {
		t.Fatalf("commit ran %d times, want 2 (the sweep took the chunks before the first)", calls)
	}
}

// TestCompactSweepsOrphans: content stored for a commit that never came is
// on disk until padfs compact, which deletes it (a purge or a redaction
// looks only at the chunks its versions named).
func TestCompactSweepsOrphans(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("s")
	e.write(sid, "kept.bin", bigText(4, 200<<10, "KEPT-MARK-9a1c", 1000))
	if _, err := e.st.PutContent(context.Background(), bytes.NewReader(bigText(5, 200<<10, "ORPHAN-MARK-77d2", 1000))); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Compact(nil); err != nil {
		t.Fatal(err)
	}
	if hits := rawscan.Hits(t, e.dir, "ORPHAN-MARK-77d2"); len(hits) > 0 {
		t.Fatalf("orphan content on disk after Compact: %v", hits)
	}
	if len(rawscan.Hits(t, e.dir, "KEPT-MARK-9a1c")) == 0 {
		t.Fatal("referenced content gone after Compact")
	}
}
