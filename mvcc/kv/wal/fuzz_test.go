package wal

import (
	"bytes"
	"testing"
)

func seedRecord(tb testing.TB, n int) []byte {
	w := newTree()
	for i := 0; i < n; i++ {
		w.Set(entry{key: key(i), val: value(i)})
	}
	w.Set(entry{key: []byte("gone"), del: true})
	rec, err := encodeRecord(w)
	if err != nil {
		tb.Fatal(err)
	}
	return rec
}

// FuzzRecord: decoding a record never panics, never reads past its input,
// and what decodes re-encodes to the same bytes.
func FuzzRecord(f *testing.F) {
	f.Add(seedRecord(f, 1))
	f.Add(seedRecord(f, 3))
	f.Add([]byte{})
	f.Add(make([]byte, headerSize))
	f.Fuzz(func(t *testing.T, data []byte) {
		payload, n, err := nextRecord(data)
		if err != nil {
			return
		}
		if n > len(data) || n != headerSize+len(payload) {
			t.Fatalf("record of %d bytes in %d", n, len(data))
		}
		c := keyCollector{vals: true}
		if applyRecord(&c, payload) != nil {
			return
		}
		w := newTree()
		for _, op := range c.ops {
			w.Set(entry{key: op.Key, val: op.Value, del: op.Delete})
		}
		if w.Len() != len(c.ops) {
			return // a key written twice: encodeRecord never does that
		}
		rec, err := encodeRecord(w)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(rec, data[:n]) && sortedOps(c.ops) {
			t.Fatalf("re-encoded %x, was %x", rec, data[:n])
		}
	})
}

func sortedOps(ops []Op) bool {
	for i := 1; i < len(ops); i++ {
		if bytes.Compare(ops[i-1].Key, ops[i].Key) >= 0 {
			return false
		}
	}
	return true
}

// FuzzScanSegment: scanning a segment never panics, the valid prefix and
// torn tail fit in it, and only the newest segment may end torn.
func FuzzScanSegment(f *testing.F) {
	seg := bytes.Join([][]byte{seedRecord(f, 1), seedRecord(f, 2), seedRecord(f, 1)}, nil)
	f.Add(seg, true)
	f.Add(seg[:len(seg)-3], true)
	f.Add(append(append([]byte(nil), seg[:20]...), seg[30:]...), false)
	f.Fuzz(func(t *testing.T, data []byte, newest bool) {
		valid, torn, err := checkSegment("seg", data, newest, nil)
		if err != nil {
			return
		}
		if valid+torn != len(data) || (torn > 0 && !newest) {
			t.Fatalf("valid %d torn %d of %d (newest %v)", valid, torn, len(data), newest)
		}
		if torn > 0 && resync(data, valid) >= 0 {
			t.Fatalf("torn tail at %d has a valid record after it", valid)
		}
	})
}

// FuzzState: the fold record decodes only what it encodes.
func FuzzState(f *testing.F) {
	f.Add(encodeState(State{}))
	f.Add(encodeState(State{Segment: 7}))
	f.Add([]byte(stateMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := decodeState(data)
		if err != nil {
			return
		}
		if !bytes.Equal(encodeState(st), data) {
			t.Fatalf("%x decodes to %+v, which encodes differently", data, st)
		}
	})
}
