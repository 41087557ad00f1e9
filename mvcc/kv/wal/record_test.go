package wal

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

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
	w.Set(&entry{key: []byte("b"), val: []byte("2")})
	w.Set(&entry{key: []byte("a"), val: []byte{}})
	w.Set(&entry{key: []byte("c"), del: true})
	w.Set(&entry{key: bytes.Repeat([]byte("k"), 300), val: bytes.Repeat([]byte{0}, 70000)})
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
