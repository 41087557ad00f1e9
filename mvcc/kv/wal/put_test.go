package wal

import (
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

// TestPutSharedAllocation: a small record's key and value share one
// allocation; a reader appending to the key it was given must not reach
// into the value, in the transaction, after commit and after the fold.
func TestPutSharedAllocation(t *testing.T) {
	s, _ := mustOpen(t, t.TempDir(), Options{})
	t.Cleanup(func() { s.Close() })
	check := func(what string, r kv.Reader) {
		t.Helper()
		err := r.Scan([]byte("k"), nil, func(k, v []byte) (bool, error) {
			_ = append(k, "XXXX"...)
			return false, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if v, err := r.Get([]byte("key")); err != nil || string(v) != "value" {
			t.Errorf("%s: Get = %q, %v after appending to the scanned key; want \"value\"", what, v, err)
		}
	}
	err := s.Update(func(tx kv.Txn) error {
		if err := tx.Put([]byte("key"), []byte("value")); err != nil {
			return err
		}
		check("in txn", tx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.View(func(r kv.Reader) error { check("after commit", r); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.View(func(r kv.Reader) error { check("after fold", r); return nil }); err != nil {
		t.Fatal(err)
	}
}
