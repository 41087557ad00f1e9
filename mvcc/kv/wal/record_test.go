package wal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// opsTxn records the ops applied to it.
type opsTxn struct{ ops []string }

func (o *opsTxn) Get([]byte) ([]byte, error) { return nil, nil }
func (o *opsTxn) Scan(_, _ []byte, _ func(k, v []byte) (bool, error)) error {
	return nil
}
func (o *opsTxn) Put(k, v []byte) error {
	o.ops = append(o.ops, fmt.Sprintf("put %q=%q", k, v))
	return nil
}
func (o *opsTxn) Delete(k []byte) error { o.ops = append(o.ops, fmt.Sprintf("del %q", k)); return nil }

var _ kv.Txn = (*opsTxn)(nil)

func sampleRecord(t *testing.T) []byte {
	t.Helper()
	w := newTree()
	w.Set(entry{key: []byte("b"), val: []byte("2")})
	w.Set(entry{key: []byte("a"), val: []byte{}})
	w.Set(entry{key: []byte("c"), del: true})
	w.Set(entry{key: bytes.Repeat([]byte("k"), 300), val: bytes.Repeat([]byte{0}, 70000)})
	rec, err := encodeRecord(w)
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestRecordRoundTrip(t *testing.T) {
	rec := sampleRecord(t)
	data := append(append([]byte(nil), rec...), rec...)
	payload, n, err := nextRecord(data)
	if err != nil || n != len(rec) {
		t.Fatalf("nextRecord: n=%d err=%v; want %d", n, err, len(rec))
	}
	var o opsTxn
	if err := applyRecord(&o, payload); err != nil {
		t.Fatal(err)
	}
	want := []string{`put "a"=""`, `put "b"="2"`, `del "c"`}
	if len(o.ops) != 4 || fmt.Sprint(o.ops[:3]) != fmt.Sprint(want) {
		t.Errorf("ops %q; want %q and the big put", o.ops, want)
	}
}

func TestRecordDamage(t *testing.T) {
	rec := sampleRecord(t)
	for _, l := range []int{0, 1, headerSize - 1, headerSize, headerSize + 1, len(rec) / 2, len(rec) - 1} {
		if _, _, err := nextRecord(rec[:l]); !errors.Is(err, errTorn) {
			t.Errorf("record cut at %d bytes: %v; want errTorn", l, err)
		}
	}
	// CRC-32C catches every single-byte error, header included.
	for i := 0; i < len(rec); i += 1 + i/64 {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x40
		if _, _, err := nextRecord(bad); !errors.Is(err, errTorn) {
			t.Errorf("byte %d flipped: %v; want errTorn", i, err)
		}
	}
	if _, _, err := nextRecord(make([]byte, 64)); !errors.Is(err, errTorn) {
		t.Errorf("zeros: %v; want errTorn", err)
	}
	if err := applyRecord(&opsTxn{}, []byte{1, 9}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("malformed payload: %v; want ErrCorrupt", err)
	}
}

// A record with more large values than one pwritev takes (they are written
// from the memtable, not copied into the record) survives a crash whole,
// next to small values that are copied.
func TestRecordManyLargeValues(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	n := iovMax + 300
	val := func(i int) []byte {
		size := inlineVal + 1 + i%3
		if i%5 == 0 {
			size = i % 64 // small: inline
		}
		return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, size/2+1)[:size]
	}
	err := s.Update(func(tx kv.Txn) error {
		for i := range n {
			if err := tx.Put(fmt.Appendf(nil, "k%05d", i), val(i)); err != nil {
				return err
			}
		}
		return tx.Delete([]byte("k99999"))
	})
	if err != nil {
		t.Fatal(err)
	}
	s.crash()
	s, _ = mustOpen(t, dir, Options{})
	defer s.Close()
	err = s.View(func(r kv.Reader) error {
		for i := range n {
			v, err := r.Get(fmt.Appendf(nil, "k%05d", i))
			if err != nil {
				return err
			}
			if !bytes.Equal(v, val(i)) {
				return fmt.Errorf("key %d after replay: %d bytes, want %d", i, len(v), len(val(i)))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// encodeRecordv's pieces joined are the record encodeRecord copied whole
// before it: the same bytes on disk.
func TestRecordvMatchesFlat(t *testing.T) {
	w := newTree()
	w.Set(entry{key: []byte("a"), val: bytes.Repeat([]byte{1}, inlineVal)})
	w.Set(entry{key: []byte("b"), val: bytes.Repeat([]byte{2}, inlineVal+1)})
	w.Set(entry{key: []byte("c"), del: true})
	w.Set(entry{key: []byte("d"), val: bytes.Repeat([]byte{3}, 3*inlineVal)})
	v, err := encodeRecordv(w)
	if err != nil {
		t.Fatal(err)
	}
	flat := bytes.Join(v.bufs, nil)
	if len(flat) != v.n || len(v.bufs) != 4 {
		t.Fatalf("%d pieces of %d bytes, n=%d; want 4 pieces (framing, b, framing, d) of n bytes", len(v.bufs), len(flat), v.n)
	}
	payload, size, err := nextRecord(flat)
	if err != nil || size != len(flat) {
		t.Fatalf("nextRecord: size %d err %v; want %d", size, err, len(flat))
	}
	var o opsTxn
	if err := applyRecord(&o, payload); err != nil {
		t.Fatal(err)
	}
	if len(o.ops) != 4 || o.ops[2] != `del "c"` {
		t.Errorf("ops %.80q", o.ops)
	}
}
