package trigram

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestASCIILower checks the word-at-a-time lowering against a byte loop,
// for every byte value at every position of a word and on random text.
func TestASCIILower(t *testing.T) {
	slow := func(b []byte) []byte {
		out := bytes.Clone(b)
		for i, c := range out {
			if 'A' <= c && c <= 'Z' {
				out[i] = c + 'a' - 'A'
			}
		}
		return out
	}
	var cases [][]byte
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			b := []byte("xYz@[`{Q")
			b[pos] = byte(c)
			cases = append(cases, b, append([]byte("pre"), b...))
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200; i++ {
		b := make([]byte, r.IntN(100))
		for j := range b {
			b[j] = byte(r.IntN(256))
		}
		cases = append(cases, b)
	}
	for _, b := range cases {
		if got, want := ASCIILower([]byte("keep"), b), append([]byte("keep"), slow(b)...); !bytes.Equal(got, want) {
			t.Fatalf("ASCIILower(%q) = %q, want %q", b, got[4:], want[4:])
		}
	}
}
