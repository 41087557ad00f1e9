package wal

import (
	"bytes"
	"slices"
	"sync/atomic"
)

// tree is an ordered set of writes: an insert-only copy-on-write B-tree
// whose items hold no pointers. A memtable holds a million writes during a
// long compaction; as one *entry each (key and value slices) they were
// three pointers apiece for every collection to mark, and the collector's
// mark worker, holding one of two Ps for a quarter of a second, was what a
// writer of another session waited for. Here the keys and small values are
// copied into byte slabs (noscan) and an item is a slab index, an offset
// and lengths (16 bytes); the item arrays are noscan too. Large values
// (chunks) keep their own allocation, one pointer each, in big. The bytes
// of a replaced write stay in their slab, and a replaced large value in
// big, until the tree is dropped (a memtable: at its fold).
//
// Copy is O(1): both trees then share every node and slab, and each copies
// a node before it changes it (owner says whose a node is). A tree is not
// locked: it is either mutated under the Store's locks or, once shared,
// only read. A copy's readers may run while the original is written: the
// original only appends to slabs (bytes past what any copy's items
// reference, slab headers past the copy's length), so what a reader holds
// never changes.
type tree struct {
	owner uint64 // nodes with this owner may change in place
	root  *node
	n     int // items
	// slabs hold the keys, each followed by its value if it is small.
	// A slab is full length from the start and never changes once
	// written up to free: readers slice it without a lock.
	slabs [][]byte
	free  int      // offset of the unwritten part of the last slab
	big   [][]byte // values larger than smallValue, by reference
}

// entry is one key's latest write, as a tree hands it out: slices of the
// tree's slabs (or its caller's, on the way in), valid as long as they are
// referenced and never changed.
type entry struct {
	key, val []byte
	del      bool // a tombstone: the key is deleted
}

// entryOverhead approximates the memory of an entry beyond its bytes.
const entryOverhead = 64

func (e entry) size() int64 { return int64(len(e.key)+len(e.val)) + entryOverhead }

// item is an entry inside a tree. No pointers: the collector skips arrays
// of them.
type item struct {
	slab uint32 // index in slabs of the key (and an inline value after it)
	off  uint32 // offset of the key in the slab
	klen uint32
	val  uint32 // the inline value's length, or a flag and what it says
}

// Flags of item.val.
const (
	valDel = 1 << 31 // a tombstone
	valBig = 1 << 30 // the rest is the value's index in big
)

// maxItems is a node's capacity before it splits (tidwall/btree's default
// degree of 32, as the trees here had before).
const maxItems = 63

// Slab sizes: a transaction's tree starts small, a memtable's grows to
// maxSlab (a large allocation of its own, cheap to free).
const (
	minSlab = 256
	maxSlab = 64 << 10
)

type node struct {
	owner uint64
	items []item
	kids  []*node // nil in a leaf; else len(items)+1
}

// owners hands out tree owner ids.
var owners atomic.Uint64

func newTree() *tree { return &tree{owner: owners.Add(1)} }

// Len is the number of keys.
func (t *tree) Len() int { return t.n }

// Copy returns a tree with the same items in O(1). The copy starts a slab
// of its own for its next write, so that neither writes bytes the other
// may read.
func (t *tree) Copy() *tree {
	c := *t
	c.owner, t.owner = owners.Add(1), owners.Add(1)
	c.slabs = t.slabs[:len(t.slabs):len(t.slabs)]
	c.big = t.big[:len(t.big):len(t.big)]
	if len(c.slabs) > 0 {
		c.free = len(c.slabs[len(c.slabs)-1])
	}
	return &c
}

func (t *tree) key(it item) []byte {
	end := it.off + it.klen
	return t.slabs[it.slab][it.off:end:end]
}

func (t *tree) entry(it item) entry {
	e := entry{key: t.key(it)}
	switch {
	case it.val&valDel != 0:
		e.del = true
	case it.val&valBig != 0:
		e.val = t.big[it.val&^valBig]
	default:
		from := it.off + it.klen
		end := from + it.val
		e.val = t.slabs[it.slab][from:end:end]
	}
	return e
}

// put copies e's key and small value into the slabs (a large value is
// kept as it is: the caller does not change it) and returns its item.
func (t *tree) put(e entry) item {
	n := len(e.key)
	inline := !e.del && len(e.val) <= smallValue
	if inline {
		n += len(e.val)
	}
	if len(t.slabs) == 0 || len(t.slabs[len(t.slabs)-1])-t.free < n {
		size := minSlab
		if len(t.slabs) > 0 {
			size = min(2*len(t.slabs[len(t.slabs)-1]), maxSlab)
		}
		t.slabs = append(t.slabs, make([]byte, max(size, n)))
		t.free = 0
	}
	slab := t.slabs[len(t.slabs)-1]
	it := item{slab: uint32(len(t.slabs) - 1), off: uint32(t.free), klen: uint32(len(e.key))}
	t.free += copy(slab[t.free:], e.key)
	switch {
	case e.del:
		it.val = valDel
	case inline:
		it.val = uint32(len(e.val))
		t.free += copy(slab[t.free:], e.val)
	default:
		it.val = valBig | uint32(len(t.big))
		t.big = append(t.big, e.val)
	}
	return it
}

// Set records e, replacing the write of the same key if there is one (old).
func (t *tree) Set(e entry) (old entry, replaced bool) {
	it := t.put(e)
	key := t.key(it)
	if t.root == nil {
		t.root = &node{owner: t.owner, items: append(make([]item, 0, 4), it)}
		t.n = 1
		return entry{}, false
	}
	t.root = t.mut(t.root)
	old, replaced, med, right := t.insert(t.root, it, key)
	if right != nil {
		t.root = &node{owner: t.owner, items: []item{med}, kids: []*node{t.root, right}}
	}
	if !replaced {
		t.n++
	}
	return old, replaced
}

// mut returns n if this tree may change it, else a copy it may change.
func (t *tree) mut(n *node) *node {
	if n.owner == t.owner {
		return n
	}
	// Room for a few inserts: a commit's keys are often neighbours.
	c := &node{owner: t.owner, items: make([]item, len(n.items), min(len(n.items)+4, maxItems+1))}
	copy(c.items, n.items)
	if n.kids != nil {
		c.kids = make([]*node, len(n.kids), min(len(n.kids)+4, maxItems+2))
		copy(c.kids, n.kids)
	}
	return c
}

// insert puts it into n (which this tree owns). If n splits, it returns
// the median and the new right half for its parent.
func (t *tree) insert(n *node, it item, key []byte) (old entry, replaced bool, med item, right *node) {
	i, found := t.find(n, key)
	if found {
		old = t.entry(n.items[i])
		n.items[i] = it
		return old, true, item{}, nil
	}
	if n.kids == nil {
		n.items = slices.Insert(n.items, i, it)
	} else {
		kid := t.mut(n.kids[i])
		n.kids[i] = kid
		var m item
		var r *node
		if old, replaced, m, r = t.insert(kid, it, key); r == nil {
			return old, replaced, item{}, nil
		}
		n.items = slices.Insert(n.items, i, m)
		n.kids = slices.Insert(n.kids, i+1, r)
	}
	if len(n.items) <= maxItems {
		return old, replaced, item{}, nil
	}
	mid := len(n.items) / 2
	med = n.items[mid]
	right = &node{owner: t.owner, items: append(make([]item, 0, maxItems+1), n.items[mid+1:]...)}
	n.items = n.items[:mid]
	if n.kids != nil {
		right.kids = append(make([]*node, 0, maxItems+2), n.kids[mid+1:]...)
		clear(n.kids[mid+1:]) // no stale pointers past the length
		n.kids = n.kids[:mid+1]
	}
	return old, replaced, med, right
}

// find returns the index of the first item of n not below key, and whether
// it is key.
func (t *tree) find(n *node, key []byte) (int, bool) {
	lo, hi := 0, len(n.items)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		switch c := bytes.Compare(t.key(n.items[m]), key); {
		case c == 0:
			return m, true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return lo, false
}

// Get returns the write of key.
func (t *tree) Get(key []byte) (entry, bool) {
	for n := t.root; n != nil; {
		i, found := t.find(n, key)
		if found {
			return t.entry(n.items[i]), true
		}
		if n.kids == nil {
			break
		}
		n = n.kids[i]
	}
	return entry{}, false
}

// Scan calls fn with each write in key order until it returns false.
func (t *tree) Scan(fn func(entry) bool) { t.Ascend(nil, fn) }

// Ascend calls fn with each write from the key start on, in key order,
// until it returns false.
func (t *tree) Ascend(start []byte, fn func(entry) bool) {
	for it := t.Seek(start); it.Valid(); it.Next() {
		if !fn(it.Entry()) {
			return
		}
	}
}

// iter walks a tree in key order.
type iter struct {
	t     *tree
	depth int
	stack [12]frame // 63^12 items: more than any memory holds
}

// frame is a node on the path to the iterator's item and the index of the
// item in it: the item itself in the top frame, in the others the item
// after the subtree being walked.
type frame struct {
	n *node
	i int
}

// Seek returns an iterator on the first write at or after key (nil: the
// first of all).
func (t *tree) Seek(key []byte) iter {
	it := iter{t: t}
	for n := t.root; n != nil; {
		i, found := 0, false
		if key != nil {
			i, found = t.find(n, key)
		}
		it.stack[it.depth] = frame{n, i}
		it.depth++
		if found || n.kids == nil {
			break
		}
		n = n.kids[i]
	}
	it.settle()
	return it
}

// settle leaves the frames whose items are all walked.
func (it *iter) settle() {
	for it.depth > 0 && it.stack[it.depth-1].i >= len(it.stack[it.depth-1].n.items) {
		it.depth--
	}
}

// Valid reports whether the iterator is on a write (not past the end).
func (it *iter) Valid() bool { return it.depth > 0 }

// Entry is the write the iterator is on.
func (it *iter) Entry() entry {
	f := it.stack[it.depth-1]
	return it.t.entry(f.n.items[f.i])
}

// Next moves to the following write.
func (it *iter) Next() {
	f := &it.stack[it.depth-1]
	f.i++
	if f.n.kids != nil {
		// After an inner item come the leftmost items of the subtree
		// to its right.
		for n := f.n.kids[f.i]; n != nil; n = n.kids[0] {
			it.stack[it.depth] = frame{n, 0}
			it.depth++
			if n.kids == nil {
				break
			}
		}
	}
	it.settle()
}
