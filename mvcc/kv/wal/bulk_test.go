package wal

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// bulkValues are enough large values for a bulk transaction.
func bulkValues(tag byte) map[string][]byte {
	vals := map[string][]byte{}
	for i := range bulkMin/(64<<10) + 1 {
		vals[fmt.Sprintf("chunk/%c%04d", tag, i)] = bytes.Repeat([]byte{tag, byte(i)}, 32<<10)
	}
	return vals
}

func putBulk(t *testing.T, s *Store, vals map[string][]byte) {
	t.Helper()
	if err := s.UpdateBulk(func(tx kv.Txn) error {
		for k, v := range vals {
			if err := tx.Put([]byte(k), v); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func checkValues(t *testing.T, r kv.Reader, vals map[string][]byte, what string) {
	t.Helper()
	for k, want := range vals {
		got, err := r.Get([]byte(k))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: %s holds %d bytes, want %d", what, k, len(got), len(want))
		}
	}
}

// A bulk transaction is in the base when UpdateBulk returns (not in the
// log, not in a memtable), and so survives a crash with no log at all.
func TestUpdateBulkSkipsLog(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	vals := bulkValues('a')
	putBulk(t, s, vals)
	if err := s.base.View(func(r kv.Reader) error { checkValues(t, r, vals, "base"); return nil }); err != nil {
		t.Fatal(err)
	}
	if n := s.active.tree.Len(); n != 0 {
		t.Fatalf("the memtable holds %d entries after a bulk update", n)
	}
	if segs := segmentFiles(t, dir); len(segs) != 0 {
		t.Fatalf("a bulk update wrote log segments %v", segs)
	}
	// Small writes still go through the log, and the store reads both.
	putN(t, s, 0, 10)
	s.crash()
	s, _ = mustOpen(t, dir, Options{})
	defer s.Close()
	checkN(t, s, 10)
	if err := s.View(func(r kv.Reader) error { checkValues(t, r, vals, "after crash"); return nil }); err != nil {
		t.Fatal(err)
	}
}

// A key whose tombstone a fold has not yet applied must not go straight
// into the base: the fold would delete it after the put.
func TestUpdateBulkAfterPendingDelete(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	vals := bulkValues('b')
	putBulk(t, s, vals)
	var one string
	for k := range vals {
		one = k
		break
	}
	if err := s.Update(func(tx kv.Txn) error { return tx.Delete([]byte(one)) }); err != nil {
		t.Fatal(err)
	}
	putBulk(t, s, vals) // one key has a pending tombstone: through the log
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.View(func(r kv.Reader) error { checkValues(t, r, vals, "after the fold"); return nil }); err != nil {
		t.Fatal(err)
	}
	s.crash()
	s, _ = mustOpen(t, dir, Options{})
	defer s.Close()
	if err := s.View(func(r kv.Reader) error { checkValues(t, r, vals, "after crash"); return nil }); err != nil {
		t.Fatal(err)
	}
}

// Too few bytes, or a delete among the writes: the log, as Update.
func TestUpdateBulkSmallGoesToLog(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	defer s.Close()
	small := map[string][]byte{"chunk/x": bytes.Repeat([]byte{1}, 64<<10)}
	putBulk(t, s, small)
	if n := s.active.tree.Len(); n != 1 {
		t.Fatalf("a small bulk update left %d memtable entries, want 1", n)
	}
	// The memtable's copy is its own: the caller may reuse its buffer.
	small["chunk/x"][0] = 2
	if err := s.View(func(r kv.Reader) error {
		v, err := r.Get([]byte("chunk/x"))
		if err == nil && v[0] != 1 {
			t.Errorf("the memtable's value changed with the caller's buffer")
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// While a compaction runs (the base's Updates wait for its whole copy), a
// bulk transaction goes through the log and the memtable instead.
func TestUpdateBulkDuringCompactionGoesToLog(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	s.compacting.Store(true)
	vals := bulkValues('c')
	putBulk(t, s, vals)
	s.compacting.Store(false)
	if n := s.active.tree.Len(); n != len(vals) {
		t.Fatalf("the memtable holds %d entries, want the %d of the bulk transaction", n, len(vals))
	}
	if err := s.View(func(r kv.Reader) error { checkValues(t, r, vals, "view"); return nil }); err != nil {
		t.Fatal(err)
	}
}
