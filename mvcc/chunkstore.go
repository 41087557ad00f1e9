package mvcc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"

	"github.com/padfs/padfs/mvcc/kv"
)

// Storing the chunks of a file above InlineMax. The work is split in two
// stages so that a large commit keeps two cores busy (chunking on one,
// hashing and storing on the other):
//
//	caller: read r -> chunker -> chunk bytes cut straight into their frame in a batch
//	storer: SHA-256 of each chunk, CRC-32C of each frame,
//	        then (in a goroutine of its own, while the next batch is
//	        hashed) one kv Update that puts the batch's chunks not yet stored
//
// Each byte is hashed once, for its chunk's key. A content of one chunk
// and no hole has that chunk's hash as its whole-file SHA-256 (the same
// bytes); a longer one has none, as a sparse file has none (ContentHash
// nil: its events show no sha256, diff compares its extents): a second
// SHA-256 pass over the whole file cost as much CPU as the chunk keys.
//
// Each chunk's bytes are written once by the chunker, into their place in
// the batch buffer behind a 4-byte header that the storer fills in, so the
// framed value handed to Put is never copied in mvcc. Batch buffers are
// recycled (between the stages and, through a sync.Pool, across commits),
// so a large file does not allocate its size over again, and a file that
// fits one batch is stored by the caller alone, without a goroutine.
//
// A content written for a commit of its own (WriteSparseAttr, WriteContent)
// that fits one batch is not stored here at all: its hashed batch rides
// in the Content (pending) and the commit's transaction puts it, so a
// small file's close is one kv Update (one log record), not two, and no
// sweep can take its chunks before the commit does.
const (
	chunkBatchBytes = 4 << 20 // chunk bytes per batch, i.e. per kv Update
	batchesInFlight = 3       // filling, queued, being stored
)

// chunkBatch is a run of consecutive chunks of one file.
type chunkBatch struct {
	buf   []byte // frames back to back: crc32c(data) u32be | data
	items []batchItem
}

type batchItem struct {
	off int    // of the frame in buf; -1 for a hole (no bytes kept)
	n   uint64 // chunk length (a hole's may be long)
	h   Hash   // set by the storer
}

// anyChunk reports whether b holds a chunk (not only holes).
func (b *chunkBatch) anyChunk() bool {
	for _, it := range b.items {
		if it.off >= 0 {
			return true
		}
	}
	return false
}

// hashes lists the keys of b's chunks (set by the storer).
func (b *chunkBatch) hashes() []Hash {
	hs := make([]Hash, 0, len(b.items))
	for _, it := range b.items {
		if it.off >= 0 {
			hs = append(hs, it.h)
		}
	}
	return hs
}

var chunkBatches = sync.Pool{New: func() any { return new(chunkBatch) }}

func getBatch() *chunkBatch { return chunkBatches.Get().(*chunkBatch) }

func putBatch(b *chunkBatch) {
	b.buf, b.items = b.buf[:0], b.items[:0]
	if cap(b.buf) <= streamBatch+2*chunkMax { // a stream's (stream.go) at most
		chunkBatches.Put(b)
	}
}

// chunkStorer is the second stage: it runs in the caller's goroutine
// until a second batch is needed, then in its own.
type chunkStorer struct {
	s *Store
	c Content

	started bool
	todo    chan *chunkBatch // to the storer, in file order
	free    chan *chunkBatch // back to the caller
	failed  chan struct{}    // closed when err is set
	exited  chan struct{}    // closed when the storer goroutine returns
	err     error            // the storer's first error
	made    int              // batches allocated (caller only)
	// pin, when set (stream.go), is told each batch's chunks before
	// they are looked up and stored.
	pin func([]Hash)
	// stored, when set (stream.go), is told each batch once its chunks
	// are stored (or it holds only holes), in file order.
	stored func(*chunkBatch)
	// inCommit: a content of one batch is left to its commit (pending).
	inCommit bool
}

// putChunks stores the chunks of the file whose bytes are head followed by
// the rest of r.
func (s *Store) putChunks(ctx context.Context, head []byte, r io.Reader, inCommit bool) (*Content, error) {
	cs := s.newChunkStorer()
	cs.inCommit = inCommit
	b, err := cs.cut(ctx, getBatch(), io.MultiReader(bytes.NewReader(head), r))
	if err != nil {
		return nil, cs.abort(b, err)
	}
	return cs.close(b)
}

// putSparse stores the chunks of sp's data ranges; the rest become holes
// without being read.
func (s *Store) putSparse(ctx context.Context, sp Sparse, inCommit bool) (*Content, error) {
	cs := s.newChunkStorer()
	cs.inCommit = inCommit
	b := getBatch()
	var pos int64
	for _, d := range sp.Data {
		if d.Off < pos || d.Off+d.Len > sp.Size {
			return nil, cs.abort(b, fmt.Errorf("%w: data range [%d, %d) of a %d-byte file out of order", ErrInvalid, d.Off, d.Off+d.Len, sp.Size))
		}
		if d.Off > pos {
			b.items = append(b.items, batchItem{off: -1, n: uint64(d.Off - pos)})
		}
		var err error
		if b, err = cs.cut(ctx, b, io.NewSectionReader(sp.R, d.Off, d.Len)); err != nil {
			return nil, cs.abort(b, err)
		}
		pos = d.Off + d.Len
	}
	if pos < sp.Size {
		b.items = append(b.items, batchItem{off: -1, n: uint64(sp.Size - pos)})
	}
	return cs.close(b)
}

func (s *Store) newChunkStorer() *chunkStorer {
	return &chunkStorer{s: s, made: 1}
}

// cut chunks r into b (and the batches after it, handed to the storer as
// they fill) and returns the batch being filled; ctx ends it early.
func (cs *chunkStorer) cut(ctx context.Context, b *chunkBatch, r io.Reader) (*chunkBatch, error) {
	cc := newChunkCutter(r)
	defer cc.release()
	for {
		if err := ctx.Err(); err != nil {
			return b, err
		}
		// Leave room for a header and a whole chunk, so that the chunker
		// writes in place.
		off := len(b.buf)
		b.buf = slices.Grow(b.buf, 4+chunkMax)
		dst := b.buf[off+4 : off+4 : off+4+chunkMax]
		data, hole, err := cc.next(dst)
		if errors.Is(err, io.EOF) {
			return b, nil
		} else if err != nil {
			return b, err
		}
		if hole {
			b.items = append(b.items, batchItem{off: -1, n: uint64(len(data))})
			continue
		}
		if len(data) > 0 && &data[0] == &dst[:1][0] {
			b.buf = b.buf[:off+4+len(data)]
		} else { // not cut in place (cannot happen: chunks never exceed chunkMax)
			b.buf = append(b.buf[:off+4], data...)
		}
		b.items = append(b.items, batchItem{off: off, n: uint64(len(data))})
		if len(b.buf) >= chunkBatchBytes {
			if b, err = cs.hand(b); err != nil {
				return nil, err
			}
		}
	}
}

// close stores the last batch b, waits for the storer and returns the
// content.
func (cs *chunkStorer) close(b *chunkBatch) (*Content, error) {
	if !cs.started && cs.inCommit {
		if cs.hash(b) {
			cs.c.pending = b // the commit puts it (applyContent), release recycles it
		} else {
			putBatch(b)
		}
	} else if !cs.started {
		err := cs.store(b)
		if err == nil && cs.stored != nil {
			cs.stored(b)
		}
		putBatch(b)
		if err != nil {
			return nil, err
		}
	} else {
		if len(b.items) > 0 {
			cs.todo <- b
		} else {
			putBatch(b)
		}
		if err := cs.finish(); err != nil {
			return nil, err
		}
	}
	if e := cs.c.Extents; len(e) == 1 && e[0].Chunk != nil {
		cs.c.Hash = bytes.Clone(e[0].Chunk) // one chunk: its key is the file's SHA-256
	}
	return &cs.c, nil
}

// hand passes a full batch to the storer and returns an empty one.
func (cs *chunkStorer) hand(b *chunkBatch) (*chunkBatch, error) {
	if !cs.started {
		cs.started = true
		cs.todo = make(chan *chunkBatch, batchesInFlight)
		cs.free = make(chan *chunkBatch, batchesInFlight)
		cs.failed = make(chan struct{})
		cs.exited = make(chan struct{})
		go cs.run()
	}
	select {
	case <-cs.failed:
		putBatch(b)
		return nil, cs.err
	default:
	}
	cs.todo <- b // never blocks for long: the storer drains todo until it is closed
	if cs.made < batchesInFlight {
		cs.made++
		return getBatch(), nil
	}
	select {
	case b = <-cs.free:
		return b, nil
	case <-cs.failed:
		return nil, cs.err
	}
}

// run stores the batches in todo until it is closed; after an error it
// only recycles them. It hashes each batch and hands it to a committer
// goroutine, so that the next batch's SHA-256 overlaps this one's kv
// Update (a large batch's base commit and fsyncs): for a 512 MiB stream
// the two were one serial chain of about 0.8 CPU s and 0.3 s of fsyncs.
func (cs *chunkStorer) run() {
	defer close(cs.exited)
	hashed := make(chan *chunkBatch, 1)
	committed := make(chan struct{})
	go func() {
		defer close(committed)
		// Only this goroutine sets cs.err (the caller reads it once
		// failed or exited is closed).
		for b := range hashed {
			if cs.err == nil && b.anyChunk() {
				if err := cs.put(b); err != nil {
					cs.err = err
					close(cs.failed)
				}
			}
			if cs.err == nil && cs.stored != nil {
				cs.stored(b)
			}
			b.buf, b.items = b.buf[:0], b.items[:0]
			cs.free <- b // cap batchesInFlight: never blocks
		}
	}()
	for b := range cs.todo {
		// A batch of holes only goes the same way (nothing to put), so
		// that stored sees the batches in order.
		cs.hash(b)
		hashed <- b
	}
	close(hashed)
	<-committed
}

// finish waits for the storer and returns its error.
func (cs *chunkStorer) finish() error {
	close(cs.todo)
	<-cs.exited
	for {
		select {
		case b := <-cs.free:
			putBatch(b)
		default:
			return cs.err
		}
	}
}

// abort stops the storer after a failure of the caller's side and returns
// err; b (if not nil) is the caller's batch.
func (cs *chunkStorer) abort(b *chunkBatch, err error) error {
	if b != nil {
		putBatch(b)
	}
	if cs.started {
		cs.finish()
	}
	return err
}

// store hashes and frames the chunks of b, adds them to the content, and
// puts those not stored yet in one kv Update.
func (cs *chunkStorer) store(b *chunkBatch) error {
	if !cs.hash(b) {
		return nil // only holes
	}
	return cs.put(b)
}

// hash hashes and frames the chunks of b, adds them to the content and
// pins them; it reports whether b holds any chunk.
func (cs *chunkStorer) hash(b *chunkBatch) bool {
	var hashes []byte // one allocation for the batch's extent hashes
	for i := range b.items {
		it := &b.items[i]
		cs.c.Size += uint64(it.n)
		if it.off < 0 {
			cs.c.Extents = appendHole(cs.c.Extents, it.n)
			continue
		}
		frame := b.buf[it.off : it.off+4+int(it.n)]
		data := frame[4:]
		it.h = sha256.Sum256(data)
		binary.BigEndian.PutUint32(frame, crc32.Checksum(data, castagnoli))
		if hashes == nil {
			hashes = make([]byte, 0, len(Hash{})*(len(b.items)-i))
		}
		hashes = append(hashes, it.h[:]...)
		l := len(hashes)
		cs.c.Extents = append(cs.c.Extents, Extent{Chunk: hashes[l-len(Hash{}) : l : l], Len: it.n})
	}
	if hashes == nil {
		return false
	}
	if cs.pin != nil {
		cs.pin(b.hashes())
	}
	return true
}

// put stores b's hashed chunks that are not stored yet in one kv Update.
func (cs *chunkStorer) put(b *chunkBatch) error {
	// Bulk: a full batch's chunks need not go through the WAL's log
	// (kv.BulkUpdater); b's frames stay unchanged until it returns.
	return kv.UpdateBulk(cs.s.kv, func(tx kv.Txn) error { return putFrames(tx, b) })
}

// putFrames puts b's hashed chunks that tx does not hold yet.
func putFrames(tx kv.Txn, b *chunkBatch) error {
	for _, it := range b.items {
		if it.off < 0 {
			continue
		}
		k := chunkKey(it.h)
		if v, err := tx.Get(k); err != nil {
			return err
		} else if v != nil {
			continue // already stored
		}
		if err := tx.Put(k, b.buf[it.off:it.off+4+int(it.n)]); err != nil {
			return err
		}
	}
	return nil
}

// applyContent puts the chunks c left to this commit (Content.pending)
// and applies c to n. The kv Puts copy the chunks, so c.release may
// recycle their batch once the commit has ended.
func (t *WriteTx) applyContent(c *Content, n *Inode) error {
	if c.pending != nil {
		if err := putFrames(t.w, c.pending); err != nil {
			return err
		}
	}
	c.Apply(n)
	return nil
}

// release recycles the batch of chunks c left to its commit, once that
// commit has ended (committed or not).
func (c *Content) release() {
	if c != nil && c.pending != nil {
		putBatch(c.pending)
		c.pending = nil
	}
}
