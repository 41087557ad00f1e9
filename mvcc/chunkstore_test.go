package mvcc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

// refContent is what PutContent must return for data, computed the plain
// way: a fresh chunker, one SHA-256 per chunk, and the whole-file SHA-256
// of inline content and of content that is one chunk, no hole (of longer
// content, none).
func refContent(t *testing.T, data []byte) (*Content, map[Hash][]byte) {
	t.Helper()
	sum := sha256.Sum256(data)
	c := &Content{Size: uint64(len(data)), Hash: sum[:]}
	chunks := map[Hash][]byte{}
	if len(data) <= InlineMax {
		if len(data) > 0 {
			c.Inline = data
		}
		return c, chunks
	}
	var ch cdc // a fresh one, not from the pool
	ch.reset(bytes.NewReader(data))
	buf := make([]byte, chunkMax)
	for {
		k, err := ch.next(buf)
		if errors.Is(err, io.EOF) {
			if len(c.Extents) != 1 || c.Extents[0].Chunk == nil {
				c.Hash = nil
			}
			return c, chunks
		}
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Equal(k, make([]byte, len(k))) {
			c.Extents = appendHole(c.Extents, uint64(len(k)))
			continue
		}
		h := Hash(sha256.Sum256(k))
		chunks[h] = append([]byte(nil), k...)
		c.Extents = append(c.Extents, Extent{Chunk: h[:], Len: uint64(len(k))})
	}
}

func chunkCount(t *testing.T, st *Store) int {
	t.Helper()
	n := 0
	p := []byte{pChunk}
	if err := st.kv.View(func(r kv.Reader) error {
		return r.Scan(p, kv.PrefixEnd(p), func(_, _ []byte) (bool, error) { n++; return true, nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// PutContent (batches cut in place, hashed and framed by a second stage)
// returns exactly the plain computation's content, stores each chunk as
// frame(bytes) under its SHA-256, keeps all-zero chunks as holes, and
// stores nothing again for bytes it already has.
func TestPutContentMatchesReference(t *testing.T) {
	t.Parallel() // its own store; no package state
	st := lcOpen(t).st
	rng := rand.NewChaCha8([32]byte{5})
	rnd := func(n int) []byte { b := make([]byte, n); rng.Read(b); return b }
	repeated := rnd(600 << 10)
	holey := rnd(13 << 20)
	clear(holey[1<<20 : 3<<20])     // holes inside the first batch
	clear(holey[9<<20 : 9<<20+700]) // too short for a hole
	clear(holey[12<<20:])           // trailing holes
	inputs := map[string][]byte{
		"empty":           nil,
		"one byte":        {7},
		"InlineMax":       rnd(InlineMax),
		"InlineMax+1":     rnd(InlineMax + 1),
		"one chunk":       rnd(chunkMin),
		"zeros 300KiB":    make([]byte, 300<<10),
		"batch":           rnd(chunkBatchBytes),
		"3 batches+":      rnd(3*chunkBatchBytes + 12345),
		"holey 13MiB":     holey,
		"all zero 10MiB":  make([]byte, 10<<20),
		"repeated chunks": bytes.Repeat(repeated, 20),
	}
	for name, data := range inputs {
		t.Run(name, func(t *testing.T) {
			want, chunks := refContent(t, data)
			for round := 0; round < 2; round++ {
				before := chunkCount(t, st)
				got, err := st.PutContent(t.Context(), bytes.NewReader(data))
				if err != nil {
					t.Fatal(err)
				}
				if got.Size != want.Size || !bytes.Equal(got.Hash, want.Hash) || !bytes.Equal(got.Inline, want.Inline) {
					t.Fatalf("round %d: size %d hash %x inline %d bytes, want %d %x %d", round, got.Size, got.Hash, len(got.Inline), want.Size, want.Hash, len(want.Inline))
				}
				if fmt.Sprint(got.Extents) != fmt.Sprint(want.Extents) {
					t.Fatalf("round %d: extents\n%v\nwant\n%v", round, got.Extents, want.Extents)
				}
				if round == 1 && chunkCount(t, st) != before {
					t.Fatalf("storing the same bytes again added %d chunks", chunkCount(t, st)-before)
				}
			}
			if err := st.kv.View(func(r kv.Reader) error {
				for h, b := range chunks {
					v, err := r.Get(chunkKey(h))
					if err != nil {
						return err
					}
					if !bytes.Equal(v, frame(b)) {
						return fmt.Errorf("chunk %x is stored as %d bytes that are not frame(its bytes)", h, len(v))
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// failingReader returns its bytes, then err.
type failingReader struct {
	data []byte
	err  error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// A read error in the middle of a large file, or a store that refuses the
// chunks, fails PutContent with that error and leaves no goroutine behind.
func TestPutContentErrors(t *testing.T) {
	e := lcOpen(t)
	data := make([]byte, 4*chunkBatchBytes)
	rand.NewChaCha8([32]byte{6}).Read(data)
	goroutines := runtime.NumGoroutine()
	boom := errors.New("boom")
	for _, cut := range []int{InlineMax + 10, chunkBatchBytes / 2, 3*chunkBatchBytes + 999} {
		_, err := e.st.PutContent(t.Context(), &failingReader{data[:cut], boom})
		if !errors.Is(err, boom) {
			t.Fatalf("read error after %d bytes: got %v", cut, err)
		}
	}
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.PutContent(t.Context(), bytes.NewReader(data)); !errors.Is(err, kv.ErrClosed) {
		t.Fatalf("closed store: got %v, want kv.ErrClosed", err)
	}
	// The storer goroutine has finished its work before PutContent
	// returns; let it (and the closed store's flusher) exit.
	for i := 0; runtime.NumGoroutine() > goroutines && i < 1000; i++ {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > goroutines {
		t.Fatalf("%d goroutines after the failures, %d before", n, goroutines)
	}
}

// Content of one chunk has that chunk's key as its whole-file SHA-256;
// longer content has none (no second pass over its bytes), and diff still
// tells equal content from unequal by its extents.
func TestContentHashOnlyWhenFree(t *testing.T) {
	st := lcOpen(t).st
	put := func(data []byte) *Inode {
		t.Helper()
		c, err := st.PutContent(t.Context(), bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		n := &Inode{Mode: sIFREG | 0o644}
		c.Apply(n)
		return n
	}
	one := randBytes(20, chunkMin+100)
	if n, sum := put(one), sha256.Sum256(one); !bytes.Equal(n.ContentHash, sum[:]) || len(n.Extents) != 1 {
		t.Errorf("one chunk: %d extents, hash %x, want 1 and sha256 %x", len(n.Extents), n.ContentHash, sum)
	}
	big := randBytes(21, 3<<20)
	a, a2 := put(big), put(big)
	big[2<<20] ^= 1
	b := put(big)
	if a.ContentHash != nil || len(a.Extents) < 2 {
		t.Fatalf("3 MiB: %d extents, hash %x, want several and none", len(a.Extents), a.ContentHash)
	}
	if !sameContent(a, a2) || sameContent(a, b) {
		t.Errorf("same content: equal %v (want true), one byte changed %v (want false)", sameContent(a, a2), sameContent(a, b))
	}
}

// A store opened by this build's bolt (which keeps chunks in nested
// buckets) is at format 4, so that a padfs before nested values refuses it
// (ErrFormat) instead of finding its chunks missing; its content reads
// back, also through a bolt that writes flat.
func TestNestedValuesRaiseFormat(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f := storeFormat(t, st); f != formatNestedValues {
		t.Fatalf("format %d after the open, want %d", f, formatNestedValues)
	}
	h, err := st.CreateSession("s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(22, 1<<20)
	writeFile(t, st, h.ID, h.Root, "f", data)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if st, err = openDirFlat(dir); err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.Walk(h.ID, "f", Latest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.ReadAll(n)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
	}
}

// TestSmallContentOneUpdate: the close of a file whose content fits one
// batch is one kv Update (one log record): its chunks go into the commit's
// own transaction, deduplicated as in a separate one.
func TestSmallContentOneUpdate(t *testing.T) {
	st, c := openCounting(t, t.TempDir())
	h, err := st.CreateSession("s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sid := h.ID
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 300<<10) // two chunks or more
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	f, err := st.Create(sid, h.Root, "f", Attr{Mode: sIFREG | 0o644}, "")
	if err != nil {
		t.Fatal(err)
	}
	updates := func(what string, fn func() error) {
		t.Helper()
		before := c.Counts().Updates
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if n := c.Counts().Updates - before; n != 1 {
			t.Fatalf("%s: %d kv Updates, want 1", what, n)
		}
	}
	updates("WriteContent", func() error {
		_, err := st.WriteContent(context.Background(), sid, f.Ino, bytes.NewReader(data), nowNs())
		return err
	})
	chunks := chunkCount(t, st)
	if chunks < 2 {
		t.Fatalf("%d chunks stored for %d bytes, want 2 or more", chunks, len(data))
	}
	// The same bytes again, sparse this time with a hole in front: the
	// chunks are found stored, only the version is new.
	sp := Sparse{R: bytes.NewReader(append(make([]byte, 1<<20), data...)), Size: 1<<20 + int64(len(data)),
		Data: []Range{{1 << 20, int64(len(data))}}}
	updates("WriteSparseAttr", func() error {
		_, err := st.WriteSparseAttr(context.Background(), sid, f.Ino, sp, nowNs(), SetAttr{})
		return err
	})
	if n := chunkCount(t, st); n != chunks {
		t.Fatalf("%d chunks after rewriting the same bytes, want %d", n, chunks)
	}
	n, err := st.LatestInode(sid, f.Ino)
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.ReadAll(n)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[1<<20:], data) || !bytes.Equal(got[:1<<20], make([]byte, 1<<20)) {
		t.Fatal("content read back differs")
	}
}
