package search

import (
	"errors"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/padfs/padfs/mvcc"
)

// errStopped ends a catch-up or build cut short by Close; what it did not
// record as covered is redone at the next Open.
var errStopped = errors.New("search index: stopped")

// batcher feeds documents to bleve in batches of bounded size. Scorch
// builds one segment per batch on the caller's goroutine, so with
// parallel > 1 full batches are committed on that many goroutines at once
// and land in any order: fine for documents that all show the same state
// (a build, a catch-up to one HLC), not for a deletion and a document of
// the same id (see delete). The covered sequence number goes in the last
// batch, after all others are in: a crash before it leaves the old
// number, and the work since is redone.
type batcher struct {
	bl    bleve.Index
	b     *bleve.Batch
	bytes int64
	docs  int
	// maxBytes and maxDocs bound one batch.
	maxBytes int64
	maxDocs  int
	slots    chan struct{} // one per batch in flight
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
	// room, if set, checks for disk space before a batch is committed.
	room func() error
	// added counts the current batch's documents (not deletions);
	// committed, if set, is told how many once bleve has them.
	added     int
	committed func(docs int)
}

func newBatcher(bl bleve.Index, parallel int, maxBytes int64, maxDocs int) *batcher {
	return &batcher{bl: bl, b: bl.NewBatch(), slots: make(chan struct{}, max(parallel, 1)),
		maxBytes: maxBytes, maxDocs: maxDocs}
}

// index adds doc (size bytes of content) and commits the batch when full.
func (bt *batcher) index(doc *document.Document, size int64) error {
	if err := bt.b.IndexAdvanced(doc); err != nil {
		return err
	}
	bt.bytes += size
	bt.docs++
	bt.added++
	if bt.bytes < bt.maxBytes && bt.docs < bt.maxDocs {
		return nil
	}
	return bt.flush()
}

// delete removes the document id. Batches in flight at once land in any
// order: flush and wait before adding documents a deletion must precede.
func (bt *batcher) delete(id string) error {
	bt.b.Delete(id)
	bt.docs++
	return nil
}

// flush commits the current batch (in the background when parallel > 1).
func (bt *batcher) flush() error {
	b, added := bt.b, bt.added
	bt.b, bt.bytes, bt.docs, bt.added = bt.bl.NewBatch(), 0, 0, 0
	bt.slots <- struct{}{}
	if err := bt.failed(); err != nil {
		<-bt.slots
		return err
	}
	if bt.room != nil {
		if err := bt.room(); err != nil {
			<-bt.slots
			return err
		}
	}
	if cap(bt.slots) == 1 {
		defer func() { <-bt.slots }()
		return bt.commit(b, added)
	}
	bt.wg.Add(1)
	go func() {
		defer bt.wg.Done()
		defer func() { <-bt.slots }()
		if err := bt.commit(b, added); err != nil {
			bt.mu.Lock()
			bt.err = errors.Join(bt.err, err)
			bt.mu.Unlock()
		}
	}()
	return nil
}

func (bt *batcher) failed() error {
	bt.mu.Lock()
	defer bt.mu.Unlock()
	return bt.err
}

// wait waits for the batches in flight (call it on every path out).
func (bt *batcher) wait() error {
	bt.wg.Wait()
	return bt.failed()
}

// finish commits the rest with (seq, at) recorded as covered, after every
// earlier batch is in.
func (bt *batcher) finish(seq uint64, at mvcc.HLC) error {
	if err := bt.wait(); err != nil {
		return err
	}
	if bt.room != nil {
		if err := bt.room(); err != nil {
			return err
		}
	}
	bt.b.SetInternal(keySeq, u64(seq))
	bt.b.SetInternal(keyHLC, u64(uint64(at)))
	return bt.commit(bt.b, bt.added)
}

// commit hands b (holding added documents) to bleve.
func (bt *batcher) commit(b *bleve.Batch, added int) error {
	err := safeBatch(bt.bl, b)
	if err == nil && bt.committed != nil && added > 0 {
		bt.committed(added)
	}
	return err
}

// safeBatch commits b, turning a panic of bleve into a panicError (batches
// run on goroutines of their own, where no caller's recover reaches).
func safeBatch(bl bleve.Index, b *bleve.Batch) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{what: "batch", v: v}
		}
	}()
	return bl.Batch(b)
}

// stopped reports whether stop is closed.
func stopped(stop <-chan struct{}) bool {
	select {
	case <-stop:
		return true
	default:
		return false
	}
}
