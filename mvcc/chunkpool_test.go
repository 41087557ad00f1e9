package mvcc

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// Recycled chunkers (eachChunk's pool) cut exactly where a fresh one does,
// whatever they chunked before: boundaries decide deduplication.
func TestEachChunkPooledBoundaries(t *testing.T) {
	r := rand.NewChaCha8([32]byte{3})
	inputs := make([][]byte, 4)
	for i := range inputs {
		inputs[i] = make([]byte, 300<<10+i*77777)
		r.Read(inputs[i])
	}
	fresh := func(data []byte) []int {
		var c cdc
		c.reset(bytes.NewReader(data))
		buf := make([]byte, chunkMax)
		var lens []int
		for {
			ch, err := c.next(buf)
			if errors.Is(err, io.EOF) {
				return lens
			}
			if err != nil {
				t.Fatal(err)
			}
			lens = append(lens, len(ch))
		}
	}
	for round := 0; round < 3; round++ {
		for i, data := range inputs {
			var lens []int
			var got []byte
			if err := eachChunk(bytes.NewReader(data), func(d []byte, hole bool) error {
				lens = append(lens, len(d))
				got = append(got, d...)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			want := fresh(data)
			if !bytes.Equal(got, data) || len(lens) != len(want) {
				t.Fatalf("round %d input %d: %d chunks, fresh chunker %d", round, i, len(lens), len(want))
			}
			for k := range lens {
				if lens[k] != want[k] {
					t.Fatalf("round %d input %d: chunk %d is %d bytes, fresh chunker %d", round, i, k, lens[k], want[k])
				}
			}
		}
	}
}
