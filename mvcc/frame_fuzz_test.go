package mvcc

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzFrame: the checksum frame of every record and chunk read from disk
// never panics on any bytes, accepts what frame wrote, and refuses a value
// whose checksum does not match as ErrCorrupt.
func FuzzFrame(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0})
	f.Add(frame([]byte("chunk bytes")))
	f.Add(frame(nil))
	f.Fuzz(func(t *testing.T, val []byte) {
		p, err := unframe([]byte("k"), val)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unframe(%x): %v, want ErrCorrupt", val, err)
			}
		} else if !bytes.Equal(frame(p), val) {
			t.Fatalf("unframe(%x) accepted a value frame does not write", val)
		}
		// Whatever the bytes, framing them round-trips, and one flipped
		// bit is refused.
		fr := frame(val)
		if got, err := unframe([]byte("k"), fr); err != nil || !bytes.Equal(got, val) {
			t.Fatalf("round trip of %x: %x %v", val, got, err)
		}
		fr[len(fr)-1] ^= 1
		if _, err := unframe([]byte("k"), fr); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("a flipped bit in the frame of %x was accepted", val)
		}
	})
}
