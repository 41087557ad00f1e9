package mvcc

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// streamData is n pseudo-random bytes with a run of zeros in the middle
// (a hole) so that the stream's hole handling is compared too.
func streamData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	data := make([]byte, n)
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if n > 8*chunkMax {
		clear(data[n/3 : n/3+3*chunkMax])
	}
	return data
}

// A stream fed in writes of any size stores exactly the content
// PutContent stores for the same bytes: the same chunks, holes and hash.
func TestStreamMatchesPutContent(t *testing.T) {
	st, _, _ := openTest(t)
	for _, size := range []int{InlineMax + 1, chunkMax - 1, chunkMax + 1, 3*streamBuf + 12345, 20 << 20} {
		data := streamData(size, uint64(size))
		want, err := st.PutContent(t.Context(), bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(size), 2))
		s := st.NewStream()
		for p := data; len(p) > 0; {
			n := min(len(p), 1+r.IntN(2<<20))
			s.Write(p[:n])
			p = p[n:]
		}
		got, err := s.finish()
		s.release()
		if err != nil {
			t.Fatal(err)
		}
		if got.Size != want.Size || !bytes.Equal(got.Hash, want.Hash) || !slices.EqualFunc(got.Extents, want.Extents, func(a, b Extent) bool {
			return a.Len == b.Len && bytes.Equal(a.Chunk, b.Chunk)
		}) {
			t.Fatalf("size %d: the stream's content differs from PutContent's (%d extents vs %d)", size, len(got.Extents), len(want.Extents))
		}
	}
}

// The chunks a stream stored are not swept as orphans before the commit
// names them; after a cancel they are.
func TestStreamPinsChunksUntilCommit(t *testing.T) {
	st, sid, root := openTest(t)
	f, err := st.Create(sid, root, "streamed", Attr{Mode: sIFREG | 0o644}, "")
	if err != nil {
		t.Fatal(err)
	}
	data := streamData(3*streamBatch, 7)
	s := st.NewStream()
	s.Write(data[:2*streamBatch])
	waitChunks(t, st, 100)
	if n, err := st.sweepOrphanChunks(); err != nil || n != 0 {
		t.Fatalf("sweep deleted %d streamed chunks (err %v), want none", n, err)
	}
	s.Write(data[2*streamBatch:])
	sp := Sparse{R: bytes.NewReader(data), Size: int64(len(data)), Data: []Range{{0, int64(len(data))}}}
	if _, err := st.WriteStreamAttr(t.Context(), sid, f.Ino, s, sp, 1, SetAttr{}); err != nil {
		t.Fatal(err)
	}
	s.release()
	if got := readFile(t, st, sid, "streamed", Latest); got != string(data) {
		t.Fatalf("streamed file reads back %d bytes, not what was written", len(got))
	}
	if n, err := st.sweepOrphanChunks(); err != nil || n != 0 {
		t.Fatalf("sweep after the commit deleted %d chunks (err %v)", n, err)
	}
	if len(st.pins.m) != 0 {
		t.Fatalf("%d chunks still pinned after the commit", len(st.pins.m))
	}

	// Cancelled: its chunks become orphans that the sweep frees.
	other := streamData(2*streamBatch, 8)
	s = st.NewStream()
	s.Write(other)
	waitChunks(t, st, countPrefix(t, st, pChunk)+100)
	s.Cancel()
	s.release()
	if n, err := st.sweepOrphanChunks(); err != nil || n == 0 {
		t.Fatalf("sweep after a cancel deleted %d chunks (err %v), want the stream's", n, err)
	}
}

// A chunk deleted before the commit despite the pin (another process's
// sweep) makes the commit store the content again from sp.
func TestStreamCommitRestoresDeletedChunk(t *testing.T) {
	st, sid, root := openTest(t)
	f, err := st.Create(sid, root, "f", Attr{Mode: sIFREG | 0o644}, "")
	if err != nil {
		t.Fatal(err)
	}
	data := streamData(6<<20, 9)
	s := st.NewStream()
	s.Write(data)
	c, err := s.finish()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.kv.Update(func(tx kv.Txn) error { return tx.Delete(chunkKey(Hash(c.Extents[0].Chunk))) }); err != nil {
		t.Fatal(err)
	}
	sp := Sparse{R: bytes.NewReader(data), Size: int64(len(data)), Data: []Range{{0, int64(len(data))}}}
	if _, err := st.WriteStreamAttr(t.Context(), sid, f.Ino, s, sp, 1, SetAttr{}); err != nil {
		t.Fatal(err)
	}
	s.release()
	if got := readFile(t, st, sid, "f", Latest); got != string(data) {
		t.Fatalf("file reads back %d bytes, not what was written", len(got))
	}
}

// What a stream has stored reads back while it runs and after a Stop,
// and stays pinned until Release.
func TestStreamStoredReadsBack(t *testing.T) {
	st, _, _ := openTest(t)
	data := streamData(3*streamBatch+12345, 11)
	s := st.NewStream()
	s.Write(data[:2*streamBatch+777])
	// The first batch (a batch's worth is being filled, unstored).
	s.WaitBacklog(t.Context(), streamBuf, streamBatch+streamBuf)
	c := s.Stored()
	if c.Size < streamBatch-streamBuf || c.Size > 2*streamBatch+777 {
		t.Fatalf("stored %d bytes of %d written, want at least a batch", c.Size, 2*streamBatch+777)
	}
	check := func(c *Content) {
		t.Helper()
		n := &Inode{}
		c.Apply(n)
		got := make([]byte, c.Size)
		if _, err := st.ReadAt(n, got, 0); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data[:c.Size]) {
			t.Fatalf("the %d bytes stored read back different", c.Size)
		}
	}
	check(c)
	s.Write(data[2*streamBatch+777:])
	s.Stop()
	if n, err := st.sweepOrphanChunks(); err != nil || n != 0 {
		t.Fatalf("sweep after a stop deleted %d chunks (err %v), want none", n, err)
	}
	check(s.Stored())
	s.release()
	if n, err := st.sweepOrphanChunks(); err != nil || n == 0 {
		t.Fatalf("sweep after the release deleted %d chunks (err %v), want the stream's", n, err)
	}

	// Finished: every byte.
	s = st.NewStream()
	s.Write(data)
	if _, err := s.finish(); err != nil {
		t.Fatal(err)
	}
	if c := s.Stored(); c.Size != uint64(len(data)) {
		t.Fatalf("a finished stream stored %d bytes of %d", c.Size, len(data))
	}
	check(s.Stored())
	s.release()
}

// waitChunks waits until at least n chunks are stored (a stream's storer
// works in the background).
func waitChunks(t *testing.T, st *Store, n int) {
	t.Helper()
	for start := time.Now(); countPrefix(t, st, pChunk) < n; time.Sleep(10 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatalf("%d chunks stored while streaming, want %d before the commit", countPrefix(t, st, pChunk), n)
		}
	}
}
