package wal

import (
	"fmt"

	"github.com/padfs/padfs/mvcc/kv"
)

// Bulk writes. A commit of a large file puts megabytes of chunks; through
// the log they were written to the disk twice (the record, then the fold
// into the base) and copied into the memtable on the way. UpdateBulk puts
// a transaction of large puts into the base at once, in a base transaction
// of its own, which bolt fsyncs before it returns: the bytes go to the
// disk once, and the memtable never holds them.
//
// It is safe for content-addressed values only (kv.BulkUpdater): such a
// transaction may survive a power loss that loses earlier log records.
// While a compaction copies the base (whose Updates wait for the whole
// copy), bulk transactions go through the log like any other: a large
// file's writer must not wait seconds for a redaction elsewhere.
// A key that a memtable holds (a put, or a tombstone a fold has not yet
// applied) goes through the log, so that no fold or replay can undo the
// bulk put; a delete that comes after it is ordered after it anyway.
// Readers: a View holds viewMu from the start of its base snapshot to the
// snapshot of the memtables, so after the barrier below no View whose base
// snapshot lacks the bulk puts can see a later record that refers to them.
const (
	// bulkMin is the fewest bytes of values for which one base commit
	// (two fsyncs) is cheaper than the log: smaller transactions (a
	// small file's chunks, at every close) go through the log.
	bulkMin = 4 << 20
	// bulkValue is the smallest value counted as bulk; a transaction
	// with any smaller put or a delete goes through the log.
	bulkValue = inlineVal
)

var _ kv.BulkUpdater = (*Store)(nil)

// UpdateBulk is Update whose writes, if they are all puts of large values
// (at least bulkMin bytes in all) of keys no memtable holds, go straight
// into the base.
func (s *Store) UpdateBulk(fn func(kv.Txn) error) error {
	s.writeMu.Lock()
	locked := true
	defer func() {
		if locked {
			s.writeMu.Unlock()
		}
	}()
	t, err := s.runLocked(fn, true)
	if err != nil || t.writes.Len() == 0 {
		return err
	}
	if s.compacting.Load() || !bulk(t.writes, t.mem[1:]) {
		t.own()
		return s.logLocked(t.writes)
	}
	// Other Updates need not wait for the base commit's fsyncs.
	s.writeMu.Unlock()
	locked = false
	err = s.base.Update(func(tx kv.Txn) error {
		var err error
		t.writes.Scan(func(e entry) bool {
			err = kv.PutStable(tx, e.key, e.val)
			return err == nil
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("kv/wal %s: bulk update: %w", s.dir, err)
	}
	// A barrier: Views that began their base snapshot before the commit
	// have snapshot the memtables by now (see above).
	s.viewMu.Lock()
	//lint:ignore SA2001 the empty critical section is the barrier
	s.viewMu.Unlock()
	return nil
}

// bulk reports whether writes may skip the log: only large puts, enough
// bytes of them, and no key that a memtable layer holds.
func bulk(writes *tree, layers []*tree) bool {
	n := 0
	ok := true
	writes.Scan(func(e entry) bool {
		if e.del || len(e.val) < bulkValue {
			ok = false
			return false
		}
		if _, found := lookup(layers, e.key); found {
			ok = false
			return false
		}
		n += len(e.val)
		return true
	})
	return ok && n >= bulkMin
}
