package mvcc

import (
	"bytes"
	"fmt"
	"testing"
)

// recordTypes are the record types of records.go, by the fuzzer's selector.
var recordTypes = []func() any{
	func() any { return new(Inode) },
	func() any { return new(Dentry) },
	func() any { return new(SessionHeader) },
	func() any { return new(sessionState) },
	func() any { return new(counters) },
	func() any { return new(Event) },
	func() any { return new(Extent) },
}

// sampleRecords are one filled-in record of each type (the fuzzer's seeds),
// with strings that are not valid UTF-8 where records hold bytes.
func sampleRecords() []any {
	parent := SessionID{1, 2, 3}
	return []any{
		&Inode{Ino: 5, Mode: sIFLNK | 0o777, Nlink: 1, Size: 1, Target: "\xfd", Parent: 2, Name: "a\xfeb",
			Xattrs: map[string][]byte{"user.\xff": {0, 1}}, Extents: []Extent{{Chunk: make([]byte, 32), Len: 8}, {Len: 4}},
			ContentHash: make([]byte, 32), ContentHLC: 7},
		&Dentry{Ino: 9, Type: sIFREG},
		&SessionHeader{ID: SessionID{9}, Name: "caf\u00e9", Created: 3, Root: 2, Parent: &parent, ForkedAt: 2},
		&sessionState{Forgotten: true},
		&counters{NextSeq: 4, LastHLC: 99},
		&Event{Seq: 1, HLC: 5, Op: "rename", Path: "\xff", Path2: "a\xfeb/\xfb", Ino: 3, Size: 6, Hash: "ab", Detail: "x", Also: []string{"\xfe", "c"}},
		&Extent{Len: 1},
	}
}

// FuzzRecordDecode: decoding any bytes as any record type never panics,
// and a record that decodes re-encodes (encode accepts it) into a payload
// that decodes again, to a record with the same encoding.
func FuzzRecordDecode(f *testing.F) {
	for i, r := range sampleRecords() {
		b, err := encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(uint8(i), b[4:])
	}
	f.Fuzz(func(t *testing.T, typ uint8, payload []byte) {
		newRec := recordTypes[int(typ)%len(recordTypes)]
		k := []byte("fuzz")
		v := newRec()
		if err := decode(k, frame(payload), v); err != nil {
			return
		}
		b1, err := encode(v)
		if err != nil {
			t.Fatalf("%T decoded from %x does not re-encode: %v", v, payload, err)
		}
		v2 := newRec()
		if err := decode(k, b1, v2); err != nil {
			t.Fatalf("%T re-encoded as %x does not decode: %v", v, b1, err)
		}
		b2, err := encode(v2)
		if err != nil || !bytes.Equal(b1, b2) {
			t.Fatalf("%T: encodings differ after a round trip: %x vs %x (%v)", v, b1, b2, err)
		}
	})
}

// Every sample record round-trips to equal bytes, and a flipped bit in
// its frame is ErrCorrupt, never a panic.
func TestRecordsRoundTrip(t *testing.T) {
	for i, r := range sampleRecords() {
		b, err := encode(r)
		if err != nil {
			t.Fatal(err)
		}
		v := recordTypes[i]()
		if err := decode([]byte("k"), b, v); err != nil {
			t.Fatalf("%T: %v", r, err)
		}
		if b2, err := encode(v); err != nil || !bytes.Equal(b, b2) {
			t.Errorf("%T: %x came back as %x (%v)", r, b, b2, err)
		}
		if fmt.Sprint(v) != fmt.Sprint(r) {
			t.Errorf("%T: %v came back as %v", r, r, v)
		}
		b[len(b)-1] ^= 1
		if err := decode([]byte("k"), b, recordTypes[i]()); err == nil {
			t.Errorf("%T: a flipped bit decoded", r)
		}
	}
}
