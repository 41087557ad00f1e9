package wal

import (
	"bytes"
)

// memtable is the set of writes that are in the WAL but not yet in the base.
type memtable struct {
	tree *tree
	size int64    // approximate bytes, to trigger a flush
	seg  *segment // the segment holding these writes' records, if any
	// kept are older segments replayed into this memtable at Open because
	// the base had no room for them; they go with seg after the flush.
	kept []*segment
}

func newMemtable() *memtable { return &memtable{tree: newTree()} }

// set records e, replacing any earlier write of the same key. It copies
// e's key and small value; a large value must not change (see tree).
func (m *memtable) set(e entry) {
	if old, ok := m.tree.Set(e); ok {
		m.size -= old.size()
	}
	m.size += e.size()
}

// lookup returns the newest write of key in the layers (a tombstone if it
// was deleted), or found == false if the base must be asked.
func lookup(layers []*tree, key []byte) (e entry, found bool) {
	for _, t := range layers {
		if e, ok := t.Get(key); ok {
			return e, true
		}
	}
	return entry{}, false
}

// mergeIter walks the union of several trees in key order within
// [start, end). Where trees share a key, the earliest tree wins. It yields
// tombstones too: they must hide the base's keys.
type mergeIter struct {
	its []iter
	end []byte
	cur entry
	ok  bool // cur is a write; false at the end
}

func newMergeIter(layers []*tree, start, end []byte) *mergeIter {
	m := &mergeIter{end: end, its: make([]iter, len(layers))}
	for i, t := range layers {
		m.its[i] = t.Seek(start)
	}
	m.pick()
	return m
}

// next moves to the following key.
func (m *mergeIter) next() {
	for i := range m.its {
		if it := &m.its[i]; it.Valid() && bytes.Equal(it.Entry().key, m.cur.key) {
			it.Next()
		}
	}
	m.pick()
}

// pick makes cur the smallest key under the iterators.
func (m *mergeIter) pick() {
	m.cur, m.ok = entry{}, false
	for i := range m.its {
		if !m.its[i].Valid() {
			continue
		}
		if e := m.its[i].Entry(); !m.ok || bytes.Compare(e.key, m.cur.key) < 0 {
			m.cur, m.ok = e, true
		}
	}
	if m.ok && m.end != nil && bytes.Compare(m.cur.key, m.end) >= 0 {
		m.cur, m.ok = entry{}, false
	}
}
