package mvcc

import (
	"bytes"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
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
	var n int
	if err := st.kv.Update(func(tx kv.Txn) (err error) { n, err = deleteOrphanChunks(tx); return err }); err != nil {
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
	// chunks again instead of referencing missing ones.
	f, err := st.Create(sid, root, "late", Attr{Mode: sIFREG | 0o644}, "")
	if err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte("late bytes "), 1000)
	r := bytes.NewReader(data)
	swept := false
	err = st.commitContent(r, func(c *Content) error {
		if !swept {
			swept = true
			if err := st.kv.Update(func(tx kv.Txn) error { _, err := deleteOrphanChunks(tx); return err }); err != nil {
				return err
			}
		}
		_, err := st.Update(sid, func(t *WriteTx) error {
			n, err := t.Latest(f.Ino)
			if err != nil {
				return err
			}
			c.Apply(n)
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
}
