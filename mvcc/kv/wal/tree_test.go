package wal

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sync"
	"testing"
)

// model is what a tree should hold: key -> entry (copied).
type model map[string]entry

func (m model) set(e entry) {
	m[string(e.key)] = entry{key: bytes.Clone(e.key), val: bytes.Clone(e.val), del: e.del}
}

// checkTree compares t with m through every way of reading it.
func checkTree(t *testing.T, tr *tree, m model, probes [][]byte) {
	t.Helper()
	if tr.Len() != len(m) {
		t.Fatalf("Len %d, want %d", tr.Len(), len(m))
	}
	keys := slices.Sorted(maps.Keys(m))
	var got []string
	tr.Scan(func(e entry) bool {
		got = append(got, string(e.key))
		want := m[string(e.key)]
		if e.del != want.del || !bytes.Equal(e.val, want.val) || (!e.del && e.val == nil) {
			t.Fatalf("key %q: %v %q, want %v %q", e.key, e.del, e.val, want.del, want.val)
		}
		return true
	})
	if !slices.Equal(got, keys) {
		t.Fatalf("Scan gave %d keys %q..., want %d", len(got), got[:min(5, len(got))], len(keys))
	}
	for _, p := range probes {
		e, ok := tr.Get(p)
		want, wok := m[string(p)]
		if ok != wok || (ok && (e.del != want.del || !bytes.Equal(e.val, want.val))) {
			t.Fatalf("Get %q = %v %q, want %v %q", p, ok, e.val, wok, want.val)
		}
		i, _ := slices.BinarySearch(keys, string(p))
		var seen []string
		for it := tr.Seek(p); it.Valid() && len(seen) < 3; it.Next() {
			seen = append(seen, string(it.Entry().key))
		}
		if want := keys[i:min(i+3, len(keys))]; !slices.Equal(seen, want) {
			t.Fatalf("Seek %q gave %q, want %q", p, seen, want)
		}
	}
}

// treeOps drives a tree and its copies from fuzz bytes: each op sets a
// key (of 256, so that splits and replacements both happen) in the newest
// copy, sometimes takes a copy, and checks every copy kept against its
// model.
func treeOps(t *testing.T, data []byte) {
	data = data[:min(len(data), 3*500)] // two levels of nodes; TestTreeLarge makes more
	trees := []*tree{newTree()}
	models := []model{{}}
	var probes [][]byte
	probed := map[string]bool{}
	for len(data) >= 3 {
		op, k, v := data[0], data[1], data[2]
		data = data[3:]
		key := []byte{k}
		if op&4 != 0 {
			key = bytes.Repeat(key, int(op>>3)+1)
		}
		if !probed[string(key)] {
			probed[string(key)] = true
			probes = append(probes, key)
		}
		val := bytes.Repeat([]byte{v}, int(v)*int(op&3)*3) // up to 2295 bytes: some large
		e := entry{key: key, val: val, del: op&3 == 3}
		if e.del {
			e.val = nil
		}
		if op == 0xff && len(trees) < 16 { // each copy is checked: keep it quick
			c := trees[len(trees)-1].Copy()
			trees = append(trees, c)
			models = append(models, maps.Clone(models[len(models)-1]))
			continue
		}
		// Write to the copy or, now and then, to the one it came from.
		w := len(trees) - 1
		if op&0x80 != 0 && op&0x40 != 0 && w > 0 {
			w--
		}
		trees[w].Set(e)
		models[w].set(e)
	}
	for i := range trees {
		checkTree(t, trees[i], models[i], probes)
	}
}

func FuzzTree(f *testing.F) {
	rng := rand.New(rand.NewSource(1))
	for _, n := range []int{10, 100, 500} {
		b := make([]byte, 3*n)
		rng.Read(b)
		f.Add(b)
	}
	f.Fuzz(treeOps)
}

// TestTreeLarge fills a tree deep enough for three levels, taking copies
// on the way, and checks that each copy still holds what it held.
func TestTreeLarge(t *testing.T) {
	tr := newTree()
	m := model{}
	var copies []*tree
	var models []model
	rng := rand.New(rand.NewSource(2))
	var probes [][]byte
	for i := 0; i < 300000; i++ {
		k := binary.BigEndian.AppendUint32(nil, uint32(rng.Intn(200000)))
		e := entry{key: k, val: []byte(fmt.Sprint(i))}
		if i%7 == 0 {
			e = entry{key: k, val: bytes.Repeat([]byte{byte(i)}, smallValue+1+i%100)}
		}
		tr.Set(e)
		m.set(e)
		if i%50000 == 0 {
			copies = append(copies, tr.Copy())
			models = append(models, maps.Clone(m))
		}
		if i%1000 == 0 {
			probes = append(probes, k, append(k, 0), k[:3])
		}
	}
	checkTree(t, tr, m, probes)
	for i := range copies {
		checkTree(t, copies[i], models[i], probes)
	}
}

// TestTreeReadersWhileWriting: copies are read while the tree they came
// from takes writes (go test -race checks that they share nothing the
// writer changes).
func TestTreeReadersWhileWriting(t *testing.T) {
	tr := newTree()
	var wg sync.WaitGroup
	for round := 0; round < 50; round++ {
		snap := tr.Copy()
		want := snap.Len()
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			snap.Scan(func(e entry) bool {
				if _, ok := snap.Get(e.key); !ok {
					t.Errorf("key %q of the copy not found in it", e.key)
				}
				n++
				return true
			})
			if n != want {
				t.Errorf("copy of %d keys scanned %d", want, n)
			}
		}()
		for i := 0; i < 2000; i++ {
			k := fmt.Appendf(nil, "k%07d", (round*7919+i*104729)%100000)
			tr.Set(entry{key: k, val: k})
		}
	}
	wg.Wait()
}
