package wal

import (
	"bytes"

	"github.com/tidwall/btree"
)

// entry is one key's latest write. Entries are never changed once in a
// tree, so snapshots can share them.
type entry struct {
	key, val []byte
	del      bool // a tombstone: the key is deleted
}

// entryOverhead approximates the memory of an entry beyond its bytes.
const entryOverhead = 64

func (e *entry) size() int64 { return int64(len(e.key)+len(e.val)) + entryOverhead }

// tree is an ordered set of entries. Copy is copy-on-write and O(1), which
// is what makes reader snapshots cheap. Trees are not locked: a tree is
// either mutated under the Store's locks or, once shared, only read.
type tree = btree.BTreeG[*entry]

func newTree() *tree {
	return btree.NewBTreeGOptions(func(a, b *entry) bool {
		return bytes.Compare(a.key, b.key) < 0
	}, btree.Options{NoLocks: true})
}

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

// set records e, replacing any earlier write of the same key.
func (m *memtable) set(e *entry) {
	if old, ok := m.tree.Set(e); ok {
		m.size -= old.size()
	}
	m.size += e.size()
}

// lookup returns the newest write of key in the layers (a tombstone if it
// was deleted), or found == false if the base must be asked.
func lookup(layers []*tree, key []byte) (e *entry, found bool) {
	probe := entry{key: key}
	for _, t := range layers {
		if e, ok := t.Get(&probe); ok {
			return e, true
		}
	}
	return nil, false
}

// mergeIter walks the union of several trees in key order within
// [start, end). Where trees share a key, the earliest tree wins. It yields
// tombstones too: they must hide the base's keys.
type mergeIter struct {
	its []btree.IterG[*entry]
	ok  []bool // its[i] is on an item
	end []byte
	cur *entry // nil at the end
}

func newMergeIter(layers []*tree, start, end []byte) *mergeIter {
	m := &mergeIter{end: end}
	probe := &entry{key: start}
	for _, t := range layers {
		it := t.Iter()
		ok := it.Seek(probe)
		m.its = append(m.its, it)
		m.ok = append(m.ok, ok)
	}
	m.pick()
	return m
}

// next moves to the following key.
func (m *mergeIter) next() {
	for i := range m.its {
		if m.ok[i] && bytes.Equal(m.its[i].Item().key, m.cur.key) {
			m.ok[i] = m.its[i].Next()
		}
	}
	m.pick()
}

// pick makes cur the smallest key under the iterators.
func (m *mergeIter) pick() {
	m.cur = nil
	for i := range m.its {
		if !m.ok[i] {
			continue
		}
		if e := m.its[i].Item(); m.cur == nil || bytes.Compare(e.key, m.cur.key) < 0 {
			m.cur = e
		}
	}
	if m.cur != nil && m.end != nil && bytes.Compare(m.cur.key, m.end) >= 0 {
		m.cur = nil
	}
}
