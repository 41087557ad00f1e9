package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"testing/iotest"
)

func cdcLens(t *testing.T, r io.Reader) []int {
	t.Helper()
	var lens []int
	if err := eachChunk(r, func(d []byte, _ bool) error {
		lens = append(lens, len(d))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return lens
}

func randBytes(seed byte, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b)
	return b
}

// The boundaries of a fixed input never change by accident: they decide
// which stored chunks a new write shares (a change of the table or the
// sizes stops deduplication against everything stored before).
func TestCDCBoundariesPinned(t *testing.T) {
	got := fmt.Sprint(cdcLens(t, bytes.NewReader(randBytes(7, 1<<20))))
	const want = "[41779 82252 42566 85338 60310 108737 84049 108367 78595 82473 35119 89424 39987 19094 83472 7014]"
	if got != want {
		t.Errorf("chunk lengths of the pinned input:\n%s\nwant\n%s", got, want)
	}
}

// Boundaries do not depend on how the reader splits its reads, chunks stay
// within chunkMin..chunkMax (but the last), and their bytes are the input.
func TestCDCReadSplitsAndBounds(t *testing.T) {
	data := randBytes(8, 5<<20+12345)
	want := cdcLens(t, bytes.NewReader(data))
	for name, r := range map[string]io.Reader{
		"half":    iotest.HalfReader(bytes.NewReader(data)),
		"onebyte": iotest.OneByteReader(bytes.NewReader(data[:600<<10])),
	} {
		got := cdcLens(t, r)
		if name == "onebyte" {
			if w := cdcLens(t, bytes.NewReader(data[:600<<10])); fmt.Sprint(got) != fmt.Sprint(w) {
				t.Errorf("%s: %v, want %v", name, got, w)
			}
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	total := 0
	for i, n := range want {
		total += n
		if n > chunkMax || (n < chunkMin && i != len(want)-1) {
			t.Errorf("chunk %d of %d is %d bytes", i, len(want), n)
		}
	}
	if total != len(data) {
		t.Errorf("chunks hold %d bytes, want %d", total, len(data))
	}
	if avg := len(data) / len(want); avg < 48<<10 || avg > 128<<10 {
		t.Errorf("average chunk %d bytes, want about 80 KiB", avg)
	}
}

// An edit in the middle of a file changes only the chunks around it: the
// boundaries resynchronize after it.
func TestCDCEditIsLocal(t *testing.T) {
	data := randBytes(9, 4<<20)
	edited := append(append(append([]byte(nil), data[:2<<20]...), "inserted bytes"...), data[2<<20:]...)
	set := func(b []byte) map[string]bool {
		m := map[string]bool{}
		_ = eachChunk(bytes.NewReader(b), func(d []byte, _ bool) error {
			m[string(d)] = true
			return nil
		})
		return m
	}
	a, b := set(data), set(edited)
	fresh := 0
	for c := range b {
		if !a[c] {
			fresh++
		}
	}
	if fresh > 2 {
		t.Errorf("an insertion made %d new chunks of %d, want at most 2", fresh, len(b))
	}
}

// A read error ends chunking with that error, not with a short chunk.
func TestCDCReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(bytes.NewReader(randBytes(10, 300<<10)), iotest.ErrReader(boom))
	n := 0
	err := eachChunk(r, func([]byte, bool) error { n++; return nil })
	if !errors.Is(err, boom) {
		t.Fatalf("eachChunk: %v after %d chunks, want boom", err, n)
	}
}

// A run of zeros is cut into hole chunks.
func TestCDCZerosAreHoles(t *testing.T) {
	data := append(randBytes(11, 100<<10), make([]byte, 1<<20)...)
	data = append(data, randBytes(12, 100<<10)...)
	holes := 0
	_ = eachChunk(bytes.NewReader(data), func(d []byte, hole bool) error {
		if hole {
			holes += len(d)
		}
		return nil
	})
	if holes < 1<<20-2*chunkMax {
		t.Errorf("%d hole bytes in a 1 MiB run of zeros", holes)
	}
}

func BenchmarkCDC(b *testing.B) {
	data := randBytes(1, 64<<20)
	b.SetBytes(int64(len(data)))
	for range b.N {
		for p := data; len(p) > 0; {
			p = p[cdcCut(p):]
		}
	}
}

// cdcCutBytewise is cdcCut one byte a step, as FastCDC defines it.
func cdcCutBytewise(data []byte) int {
	n := len(data)
	if n <= chunkMin {
		return n
	}
	n = min(n, chunkMax)
	var h uint64
	i := chunkMin
	for ; i < min(n, cdcNormal); i++ {
		if h = h<<1 + gear[data[i]]; h&cdcMaskS == 0 {
			return i + 1
		}
	}
	for ; i < n; i++ {
		if h = h<<1 + gear[data[i]]; h&cdcMaskL == 0 {
			return i + 1
		}
	}
	return n
}

// The unrolled hash cuts where the bytewise one does, at every offset of
// its eight-byte step: on random and low-entropy bytes and on inputs of
// lengths around the bounds.
func TestCDCMatchesBytewise(t *testing.T) {
	low := randBytes(13, 4<<20)
	for i := range low {
		low[i] &= 3
	}
	inputs := [][]byte{randBytes(14, 8<<20), low}
	for _, l := range []int{chunkMin - 1, chunkMin, chunkMin + 1, chunkMin + 7, cdcNormal - 3, cdcNormal, cdcNormal + 5, chunkMax - 1, chunkMax, chunkMax + 9} {
		inputs = append(inputs, randBytes(byte(l), l))
	}
	offsets := map[int]bool{}
	for k, in := range inputs {
		for p, pos := in, 0; len(p) > 0; {
			got, want := cdcCut(p), cdcCutBytewise(p)
			if got != want {
				t.Fatalf("input %d at %d: cut after %d bytes, bytewise %d", k, pos, got, want)
			}
			offsets[got%8] = true
			p, pos = p[got:], pos+got
		}
	}
	if len(offsets) != 8 {
		t.Errorf("cuts fell at only %d of the 8 offsets of a step", len(offsets))
	}
}
