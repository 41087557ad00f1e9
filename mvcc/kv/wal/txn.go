package wal

import (
	"bytes"
	"fmt"

	"github.com/padfs/padfs/mvcc/kv"
)

var (
	_ kv.Reader  = (*reader)(nil)
	_ kv.Firster = (*reader)(nil)
	_ kv.Txn     = (*txn)(nil)
)

// reader reads memtable layers (newest first) over a base reader.
type reader struct {
	mem  []*tree
	base kv.Reader
}

func (r *reader) Get(key []byte) ([]byte, error) {
	if e, ok := lookup(r.mem, key); ok {
		if e.del {
			return nil, nil
		}
		return e.val, nil
	}
	return r.base.Get(key)
}

func (r *reader) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) error {
	return scan(r.mem, r.base, start, end, fn)
}

// First is a Scan stopped at its first key, without the merge iterator:
// the smallest key at or after start in any layer is the answer unless it
// is a memtable tombstone (then it takes the Scan).
func (r *reader) First(start, end []byte) ([]byte, []byte, error) {
	var best entry
	found := false
	for _, t := range r.mem {
		// Where layers share a key the newest (first) one wins.
		if it := t.Seek(start); it.Valid() {
			if e := it.Entry(); !found || bytes.Compare(e.key, best.key) < 0 {
				best, found = e, true
			}
		}
	}
	if found && end != nil && bytes.Compare(best.key, end) >= 0 {
		found = false
	}
	bk, bv, err := kv.First(r.base, start, end)
	if err != nil {
		return nil, nil, err
	}
	if !found || (bk != nil && bytes.Compare(bk, best.key) < 0) {
		return bk, bv, nil // no layer holds bk: it is below every layer's first key
	}
	if best.del {
		return kv.First(scanOnly{r}, start, end)
	}
	return best.key, best.val, nil
}

// scanOnly hides a Reader's First.
type scanOnly struct{ kv.Reader }

// scan merges the memtable layers into the base's scan: a memtable entry
// shadows the base's value of its key, and a tombstone hides it.
func scan(layers []*tree, base kv.Reader, start, end []byte, fn func(k, v []byte) (bool, error)) error {
	m := newMergeIter(layers, start, end)
	// emitBefore yields the memtable's keys below k (all if k is nil).
	emitBefore := func(k []byte) (bool, error) {
		for m.ok && (k == nil || bytes.Compare(m.cur.key, k) < 0) {
			e := m.cur
			m.next()
			if e.del {
				continue
			}
			if more, err := fn(e.key, e.val); err != nil || !more {
				return false, err
			}
		}
		return true, nil
	}
	stopped := false
	err := base.Scan(start, end, func(k, v []byte) (bool, error) {
		more, err := emitBefore(k)
		if err == nil && more {
			if m.ok && bytes.Equal(m.cur.key, k) {
				e := m.cur
				m.next()
				if e.del {
					return true, nil
				}
				v = e.val
			}
			more, err = fn(k, v)
		}
		stopped = !more
		return more, err
	})
	if err != nil || stopped {
		return err
	}
	_, err = emitBefore(nil)
	return err
}

// txn buffers its writes in a tree that shadows every other layer.
type txn struct {
	reader // mem[0] is writes
	s      *Store
	writes *tree
	// borrow: large values are kept as the caller's slices, which stay
	// unchanged until the transaction ends (UpdateBulk); own copies them
	// before they go into the memtable.
	borrow bool
}

func (t *txn) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) error {
	// Scan a copy of the writes (O(1), copy-on-write): fn may write to the
	// transaction while we iterate.
	layers := append([]*tree{t.writes.Copy()}, t.mem[1:]...)
	return scan(layers, t.base, start, end, fn)
}

// smallValue is the largest value a tree copies into its slabs after its
// key; larger ones (chunks) keep an allocation of their own, which Put
// does not zero first.
const smallValue = 1024

func (t *txn) Put(key, value []byte) error {
	switch {
	case len(key) == 0:
		return fmt.Errorf("kv/wal %s: put: empty key", t.s.dir)
	case len(key) > t.s.opts.MaxKeySize:
		return fmt.Errorf("kv/wal %s: put: key of %d bytes exceeds the limit of %d", t.s.dir, len(key), t.s.opts.MaxKeySize)
	case len(value) > t.s.opts.MaxValueSize:
		return fmt.Errorf("kv/wal %s: put: value of %d bytes exceeds the limit of %d", t.s.dir, len(value), t.s.opts.MaxValueSize)
	}
	// Copy: the caller may reuse its buffers (the tree copies keys and
	// small values). A nil value is stored as empty so that Get tells it
	// from an absent key.
	val := value
	if len(value) > smallValue && !t.borrow {
		val = cloneValue(value)
	}
	t.writes.Set(entry{key: key, val: val})
	return nil
}

// cloneValue copies a large value. make+copy, not append: the compiler
// then skips zeroing the new value (a chunk's 80 KiB, on average) before
// copying into it.
func cloneValue(v []byte) []byte {
	c := make([]byte, len(v))
	copy(c, v)
	return c
}

// own replaces the borrowed values of the writes by copies.
func (t *txn) own() {
	if !t.borrow {
		return
	}
	t.borrow = false
	// A new list: copies of the tree made for Scan share the old one.
	big := make([][]byte, len(t.writes.big))
	for i, v := range t.writes.big {
		big[i] = cloneValue(v)
	}
	t.writes.big = big
}

func (t *txn) Delete(key []byte) error {
	if len(key) == 0 {
		return nil // no such key can exist
	}
	t.writes.Set(entry{key: key, del: true})
	return nil
}
