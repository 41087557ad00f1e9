package search

import (
	"errors"
	"fmt"
	"hash/fnv"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/triseg"
)

// errStopped ends a catch-up or build cut short by Close; what it did not
// record as covered is redone at the next Open.
var errStopped = errors.New("search index: stopped")

// batcher feeds documents to bleve in batches of bounded size, split into
// streams by document id. Scorch builds one segment per batch on the
// caller's goroutine, most of indexing's CPU: with parallel > 1 the
// streams commit at once, each on a goroutine of its own (two streams use
// both cores of a small machine, also for the last, partial batches). A
// stream commits its batches one after another and an id always goes to
// the same stream, so the operations on one id (a deletion, then the
// document again; two versions) land in the order given; batches of
// different streams land in any order. The covered sequence number goes
// in the last batch, after every stream's others are in: a crash before
// it leaves the old number, and the work since is redone.
type batcher struct {
	bl bleve.Index
	// tri takes each batch's trigram half, before bleve its other half.
	tri *triseg.Set
	// maxBytes and maxDocs bound one batch.
	maxBytes int64
	maxDocs  int
	streams  []*stream
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
	// room, if set, checks for disk space before a batch is committed.
	room func() error
	// committed, if set, is told how many documents (not deletions) a
	// batch held once bleve has them.
	committed func(docs int)
}

// stream is one sequence of batches.
type stream struct {
	b     *bleve.Batch
	tb    *triseg.Builder
	bytes int64
	docs  int // operations in b: documents and deletions
	added int // documents in b
	// busy holds a token while one of the stream's batches is committed.
	busy chan struct{}
}

func newBatcher(bl bleve.Index, tri *triseg.Set, parallel int, maxBytes int64, maxDocs int) *batcher {
	bt := &batcher{bl: bl, tri: tri, maxBytes: maxBytes, maxDocs: maxDocs, streams: make([]*stream, max(parallel, 1))}
	for i := range bt.streams {
		bt.streams[i] = &stream{b: bl.NewBatch(), tb: triseg.NewBuilder(), busy: make(chan struct{}, 1)}
	}
	return bt
}

// stream returns the stream of document id.
func (bt *batcher) stream(id string) *stream {
	if len(bt.streams) == 1 {
		return bt.streams[0]
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return bt.streams[h.Sum32()%uint32(len(bt.streams))]
}

// index adds doc and its trigram entry td (size bytes of content) and
// commits its stream's batch when full.
func (bt *batcher) index(doc *document.Document, td triDoc, size int64) error {
	s := bt.stream(doc.ID())
	if err := s.b.IndexAdvanced(doc); err != nil {
		return err
	}
	s.tb.Add(doc.ID(), td.kind, td.keys)
	s.bytes += size
	s.docs++
	s.added++
	if s.bytes < bt.maxBytes && s.docs < bt.maxDocs {
		return nil
	}
	return bt.flushStream(s)
}

// delete removes the document id (before any later document of that id).
func (bt *batcher) delete(id string) error {
	s := bt.stream(id)
	s.b.Delete(id)
	s.tb.Delete(id)
	s.docs++
	return nil
}

// flush commits every stream's current batch (in the background with
// more than one stream); wait waits for them.
func (bt *batcher) flush() error {
	for _, s := range bt.streams {
		if s.docs == 0 {
			continue
		}
		if err := bt.flushStream(s); err != nil {
			return err
		}
	}
	return nil
}

// flushStream commits s's current batch once its previous one is in.
func (bt *batcher) flushStream(s *stream) error {
	b, tb, added := s.b, s.tb, s.added
	s.b, s.tb, s.bytes, s.docs, s.added = bt.bl.NewBatch(), triseg.NewBuilder(), 0, 0, 0
	s.busy <- struct{}{}
	if err := bt.failed(); err != nil {
		<-s.busy
		return err
	}
	if bt.room != nil {
		if err := bt.room(); err != nil {
			<-s.busy
			return err
		}
	}
	if len(bt.streams) == 1 {
		defer func() { <-s.busy }()
		return bt.commit(b, tb, added)
	}
	bt.wg.Add(1)
	go func() {
		defer bt.wg.Done()
		defer func() { <-s.busy }()
		if err := bt.commit(b, tb, added); err != nil {
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
// other batch is in: with several streams their last batches at once,
// then the position in a batch of its own.
func (bt *batcher) finish(seq uint64, at mvcc.HLC) error {
	b, tb, added := bt.bl.NewBatch(), triseg.NewBuilder(), 0
	if s := bt.streams[0]; len(bt.streams) == 1 {
		b, tb, added = s.b, s.tb, s.added
		s.b, s.tb, s.bytes, s.docs, s.added = bt.bl.NewBatch(), triseg.NewBuilder(), 0, 0, 0
	} else if err := bt.flush(); err != nil {
		return err
	}
	if err := bt.wait(); err != nil {
		return err
	}
	if bt.room != nil {
		if err := bt.room(); err != nil {
			return err
		}
	}
	b.SetInternal(keySeq, u64(seq))
	b.SetInternal(keyHLC, u64(uint64(at)))
	return bt.commit(b, tb, added)
}

// commit writes tb to the trigram segments, then hands b (holding added
// documents) to bleve: once bleve has a batch, and the covered sequence
// number with the last one, the trigrams of its documents are on disk. (A
// crash in between leaves trigram entries newer than the covered number:
// only of files the log's tail names, which grep reads anyway, and which
// the catch-up redone writes again.)
func (bt *batcher) commit(b *bleve.Batch, tb *triseg.Builder, added int) error {
	if err := bt.tri.Add(tb); err != nil {
		return fmt.Errorf("trigram segment: %w", err)
	}
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
