package mvcc

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/bolt"
)

// failingChunks is a kv store whose Updates that put chunks fail once ok
// of them have committed, while failing is set (a disk that fills up
// during a large commit).
type failingChunks struct {
	kv.Store
	failing atomic.Bool
	ok      atomic.Int64
}

var errChunksFull = errors.New("injected: no space for chunks")

func (f *failingChunks) Update(fn func(kv.Txn) error) error {
	return f.Store.Update(func(tx kv.Txn) error {
		ct := &chunkCounter{Txn: tx}
		if err := fn(ct); err != nil {
			return err
		}
		if ct.chunks > 0 && f.failing.Load() && f.ok.Add(-1) < 0 {
			return errChunksFull
		}
		return nil
	})
}

type chunkCounter struct {
	kv.Txn
	chunks int
}

func (c *chunkCounter) Put(k, v []byte) error {
	if len(k) > 0 && k[0] == pChunk {
		c.chunks++
	}
	return c.Txn.Put(k, v)
}

// The storer's committer (a goroutine of its own, behind the hashing)
// reports the first batch that failed: a commit of many batches and a
// stream fail with that error, neither hangs nor returns a content, and
// the store takes the next commit.
func TestChunkStorerBatchFailure(t *testing.T) {
	b, err := bolt.Open(filepath.Join(t.TempDir(), StoreFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	f := &failingChunks{Store: b}
	st, err := New(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	for _, ok := range []int64{0, 2} {
		f.ok.Store(ok)
		f.failing.Store(true)
		data := streamData(10*chunkBatchBytes, uint64(ok)+1)
		if c, err := st.PutContent(ctx, bytes.NewReader(data)); !errors.Is(err, errChunksFull) {
			t.Fatalf("PutContent of %d batches, batch %d failing: content %v, error %v; want %v", 10, ok+1, c != nil, err, errChunksFull)
		}
		f.ok.Store(ok)
		s := st.NewStream()
		for p := data; len(p) > 0; p = p[min(len(p), 1<<20):] {
			s.Write(p[:min(len(p), 1<<20)])
		}
		c, err := s.finish()
		s.release()
		if !errors.Is(err, errChunksFull) {
			t.Fatalf("stream of %d bytes, batch %d failing: content %v, error %v; want %v", len(data), ok+1, c != nil, err, errChunksFull)
		}
		f.failing.Store(false)
		c, err = st.PutContent(ctx, bytes.NewReader(data))
		if err != nil || c.Size != uint64(len(data)) {
			t.Fatalf("PutContent after the failures: %v, %v", c, err)
		}
	}
}
