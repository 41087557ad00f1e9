package mvcc

import (
	"bytes"
	"testing"
)

// TestEncodeToMatchesEncode: a commit's puts encode into one reused buffer;
// each record must be the bytes encode gives (the on-disk format), also
// after a larger record grew the buffer, and a record the decoder would
// not read back is refused as by encode.
func TestEncodeToMatchesEncode(t *testing.T) {
	recs := append(sampleRecords(),
		&supersession{Superseded: [][]byte{[]byte("I\x01k"), bytes.Repeat([]byte{7}, 900)}, Tombs: [][]byte{[]byte("D\x02t")}},
		&liveEntry{Ino: 4, Type: sIFDIR, HLC: 12},
		&Inode{Ino: 1, Name: string(bytes.Repeat([]byte("n"), 2000))}, // outgrows a small buffer
		&Dentry{Ino: 2},
	)
	var small [16]byte
	buf := bytes.NewBuffer(small[:0])
	for i, r := range recs {
		want, err := encode(r)
		if err != nil {
			t.Fatalf("record %d (%T): encode: %v", i, r, err)
		}
		got, err := encodeTo(buf, r)
		if err != nil {
			t.Fatalf("record %d (%T): encodeTo: %v", i, r, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("record %d (%T): encodeTo = %x, encode = %x", i, r, got, want)
		}
	}
	big := &Inode{Xattrs: map[string][]byte{}}
	for i := 0; i < 1<<20+1; i++ { // more pairs than the decoder allows
		big.Xattrs[string(u64(uint64(i)))] = nil
	}
	if _, err := encodeTo(buf, big); err == nil {
		t.Error("encodeTo accepted a record the decoder refuses")
	}
}
