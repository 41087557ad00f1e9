package bolt

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

// TestCompactManyBatches: a store of several copy batches (the copy's
// transactions skip their fdatasyncs, one makes the file durable before
// the rename) compacts to the same keys without the deleted bytes, and the
// compacted store syncs its commits again (bbolt's NoSync is back off).
func TestCompactManyBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "padfs.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 10<<10) }
	const n = 3 * compactBatch / (20 << 10) // three batches of 20 KiB values
	for i := 0; i < n; i += 100 {
		err := s.Update(func(tx kv.Txn) error {
			for j := i; j < min(i+100, n); j++ {
				if err := tx.Put(fmt.Appendf(nil, "big/%06d", j), val(j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	marker := []byte("SECRET-MARKER-many-batches")
	put(t, s, "secret", string(marker))
	if err := s.Update(func(tx kv.Txn) error { return tx.Delete([]byte("secret")) }); err != nil {
		t.Fatal(err)
	}
	var calls, last, total int64
	if err := s.Compact(func(done, tot int64) { calls++; last, total = done, tot }); err != nil {
		t.Fatal(err)
	}
	if calls < 4 || last != total || total != n {
		t.Errorf("progress: %d calls, last %d/%d; want 3 batches or more of %d keys", calls, last, total, n)
	}
	if s.db.NoSync || s.db.NoGrowSync {
		t.Error("the compacted store's commits skip fdatasync")
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, marker) {
		t.Error("deleted value still in the file after Compact")
	}
	put(t, s, "after", "1")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = Open(path, Options{}); err != nil {
		t.Fatal(err)
	}
	err = s.View(func(r kv.Reader) error {
		for i := 0; i < n; i++ {
			v, err := r.Get(fmt.Appendf(nil, "big/%06d", i))
			if err != nil || !bytes.Equal(v, val(i)) {
				return fmt.Errorf("big/%06d after compact and reopen: %d bytes, %v", i, len(v), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "after"); got != "1" {
		t.Errorf("after: %q", got)
	}
}
