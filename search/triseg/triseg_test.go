package triseg

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/padfs/padfs/search/trigram"
)

func keysOf(text string) []uint32 {
	seen := map[uint32]bool{}
	var ks []uint32
	for i := 0; i+3 <= len(text); i++ {
		k := TriKey(text[i : i+3])
		if !seen[k] {
			seen[k] = true
			ks = append(ks, k)
		}
	}
	return ks
}

func and(ts ...string) *trigram.Query { return &trigram.Query{Op: trigram.And, Trigram: ts} }

// model is what a set must answer: each path's latest text (absent:
// deleted).
type model map[string]string

func (m model) want(ts ...string) []string {
	var out []string
	for p, text := range m {
		ok := true
		for _, t := range ts {
			ok = ok && strings.Contains(text, t)
		}
		if ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// TestSetNewestWinsAcrossMerges: random batches of documents and
// deletions, merged in the background and reopened, answer as the last
// operation on each path says.
func TestSetNewestWinsAcrossMerges(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tri")
	s, err := Open(dir, true, func(err error) { t.Error(err) })
	if err != nil {
		t.Fatal(err)
	}
	s.MaxSegments = 3
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"alpha", "beta", "gamma", "delta", "needle", "hay"}
	m := model{}
	for batch := range 41 { // the last an Add, after the last reopen
		b := NewBuilder()
		for range 1 + rng.IntN(20) {
			p := fmt.Sprintf("d%d/f%d", rng.IntN(3), rng.IntN(30))
			if rng.IntN(4) == 0 {
				b.Delete(p)
				delete(m, p)
				continue
			}
			text := words[rng.IntN(len(words))] + " " + words[rng.IntN(len(words))]
			b.Add(p, KindText, keysOf(text))
			m[p] = text
		}
		if err := s.Add(b); err != nil {
			t.Fatal(err)
		}
		if batch%10 == 9 {
			s.Close()
			if s, err = Open(dir, false, func(err error) { t.Error(err) }); err != nil {
				t.Fatal(err)
			}
			s.MaxSegments = 3
		}
		for _, w := range []string{"nee", "alp", "hay"} {
			got, err := s.Candidates(and(w))
			if err != nil {
				t.Fatal(err)
			}
			if want := m.want(w); !slices.Equal(got, want) {
				t.Fatalf("batch %d, %q: got %v, want %v", batch, w, got, want)
			}
		}
	}
	s.mergeWG.Wait()
	if n := s.Segments(); n > s.MaxSegments {
		t.Errorf("%d segments left once merged, want at most %d", n, s.MaxSegments)
	}
	s.Close()
}

// TestTornAndLeftoverFiles: a temp file a killed writer left is removed,
// a merge's inputs beside its output are ignored, and a half-written
// segment under its final name is reported as damage, not a panic.
func TestTornAndLeftoverFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		b := NewBuilder()
		b.Add(fmt.Sprint("f", i), KindText, keysOf("needle"))
		if err := s.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	os.WriteFile(filepath.Join(dir, ".tmp-123"), []byte("half"), 0o600)
	s, err = Open(dir, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Candidates(and("nee")); len(got) != 2 {
		t.Fatalf("got %v", got)
	}
	if _, err := os.Stat(filepath.Join(dir, ".tmp-123")); err == nil {
		t.Error("temp file left")
	}
	b, _ := os.ReadFile(filepath.Join(dir, segName(0, 0)))
	os.WriteFile(filepath.Join(dir, segName(0, 0)), b[:len(b)/2], 0o600)
	_, err = Open(dir, false, nil)
	if err == nil || !strings.Contains(err.Error(), segName(0, 0)) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("torn segment: %v", err)
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// fixCRCs rewrites the checksums of a segment image as its header lays
// the sections out, so that fuzzing reaches the decoders behind them.
func fixCRCs(b []byte) {
	if len(b) < headerSize {
		return
	}
	le := binary.LittleEndian
	docsOff, docsLen := le.Uint64(b[20:]), le.Uint64(b[28:])
	postOff, postLen := le.Uint64(b[36:]), le.Uint64(b[44:])
	n := uint64(len(b))
	if docsOff <= n && docsLen <= n-docsOff {
		le.PutUint32(b[52:], crc32.Checksum(b[docsOff:docsOff+docsLen], castagnoli))
	}
	nkeys := le.Uint32(b[16:])
	if dictOff := postOff + postLen; postOff <= n && postLen <= n && dictOff <= n && dictLen(nkeys) == n-dictOff {
		// The blocks' checksums first: the dict's covers them.
		blocks := b[dictOff+8*uint64(nkeys):]
		post := b[postOff:dictOff]
		nb := len(blocks) / blockEntry
		for i := range nb {
			start, end := le.Uint64(blocks[i*blockEntry:]), postLen
			if i+1 < nb {
				end = le.Uint64(blocks[(i+1)*blockEntry:])
			}
			if start <= end && end <= postLen {
				le.PutUint32(blocks[i*blockEntry+8:], crc32.Checksum(post[start:end], castagnoli))
			}
		}
		le.PutUint32(b[56:], crc32.Checksum(b[dictOff:], castagnoli))
	}
	le.PutUint32(b[60:], crc32.Checksum(b[:60], castagnoli))
}

// FuzzSegmentDecode: no bytes, damaged as they may be, make the decoder
// panic or loop; an error is one line naming the file. Run with
//
//	go test ./search/triseg -run '^$' -fuzz FuzzSegmentDecode -fuzztime 2m
func FuzzSegmentDecode(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(dir, true, nil)
	if err != nil {
		f.Fatal(err)
	}
	b := NewBuilder()
	b.Add("a.txt", KindText, keysOf("hello needle"))
	b.Add("b.bin", KindBinary, []uint32{BucketKey(Bucket(TriKey("nee")))})
	b.Add("c", KindUnindexed, nil)
	b.Delete("d")
	if err := s.Add(b); err != nil {
		f.Fatal(err)
	}
	seed, _ := os.ReadFile(filepath.Join(dir, segName(0, 0)))
	fixed := slices.Clone(seed)
	if fixCRCs(fixed); !bytes.Equal(fixed, seed) {
		f.Fatal("fixCRCs changed an intact segment")
	}
	f.Add(seed, false)
	f.Add(seed, true)
	f.Add(seed[:headerSize], true)
	f.Fuzz(func(t *testing.T, data []byte, fix bool) {
		data = slices.Clone(data)
		if fix {
			fixCRCs(data)
		}
		const p = "fuzz.tri"
		check := func(err error) {
			if err != nil && (!strings.Contains(err.Error(), p) || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("error %q does not name the file on one line", err)
			}
		}
		seg, err := readSegment(nopCloser{bytes.NewReader(data)}, int64(len(data)), p, 0, 0)
		check(err)
		if err != nil {
			return
		}
		defer seg.Close()
		_, _, err = seg.Paths()
		check(err)
		if err != nil {
			return
		}
		it := &keyIter{s: seg}
		for it.next() {
			_, err := it.docs()
			check(err)
		}
		set := &Set{segs: []*Segment{seg}}
		_, err = set.Candidates(&trigram.Query{Op: trigram.Or, Trigram: []string{"nee", "hel"}})
		check(err)
	})
}

// TestMergeWaitsForPendingBatches: a merge never takes segments newer
// than a batch still being written (the merged range would hide it), and
// with nothing it may take it stops instead of trying again at once.
func TestMergeWaitsForPendingBatches(t *testing.T) {
	s, err := Open(t.TempDir(), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.MaxSegments = 100
	for i := range 4 {
		b := NewBuilder()
		b.Add(fmt.Sprint("f", i), KindText, keysOf("needle"))
		if err := s.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	if i, j := pick(s.segs, map[uint64]bool{2: true}); j > 2 {
		t.Fatalf("pick took [%d, %d) past pending batch 2", i, j)
	}
	if i, j := pick(s.segs, map[uint64]bool{5: true}); i != 0 || j != 4 {
		t.Fatalf("pick took [%d, %d), want [0, 4)", i, j)
	}
	s.mu.Lock()
	s.pending[0] = true // as if batch 0 were still being written
	s.MaxSegments = 1
	s.maybeMergeLocked()
	s.mu.Unlock()
	s.mergeWG.Wait() // returns: the merge gave up
	if n := s.Segments(); n != 4 {
		t.Fatalf("%d segments, want 4", n)
	}
}

// TestPostingsAcrossBlocks: keys of many blocks (blockKeys share a
// checksum) each find exactly their documents, in a segment as written
// and once merged.
func TestPostingsAcrossBlocks(t *testing.T) {
	s, err := Open(t.TempDir(), true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const keys = 10*blockKeys + 7
	want := map[uint32][]string{}
	for batch := range 3 {
		b := NewBuilder()
		for d := range 20 {
			p := fmt.Sprintf("b%d/f%d", batch, d)
			var ks []uint32
			for k := uint32(0); k < keys; k++ {
				if (k+uint32(d)+uint32(batch))%3 == 0 {
					ks = append(ks, k*7)
					want[k*7] = append(want[k*7], p)
				}
			}
			b.Add(p, KindText, ks)
		}
		if err := s.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when string) {
		for k := uint32(0); k < keys; k++ {
			got, err := s.WithKey(k * 7)
			if err != nil {
				t.Fatal(err)
			}
			w := slices.Clone(want[k*7])
			slices.Sort(w)
			if !slices.Equal(got, w) {
				t.Fatalf("%s: key %d: %v, want %v", when, k*7, got, w)
			}
		}
	}
	check("written")
	old := slices.Clone(s.segs)
	s.mu.Lock()
	s.MaxSegments = 1
	s.maybeMergeLocked()
	s.mu.Unlock()
	s.mergeWG.Wait()
	if n := s.Segments(); n != 1 {
		t.Fatalf("%d segments after merging, want 1", n)
	}
	check("merged")
	// Close closes the merged-away files too (a dropped index's bytes go
	// at once, not when the collector finds them).
	s.Close()
	for _, g := range old {
		if _, err := g.f.ReadAt(make([]byte, 1), 0); !errors.Is(err, os.ErrClosed) {
			t.Errorf("%s: read after Close: %v", g.name, err)
		}
	}
}
