// Package search is padfs's index: exact grep and ranked search over the
// sessions of a store, kept beside it in the data directory.
//
// Layout: DATA/index/<session id>/ is one bleve (scorch) index per
// session, one document per regular file of the session's LATEST tree,
// keyed by its path. A per-session index makes a hard forget or a
// redaction of one session a matter of deleting (and rebuilding) one
// directory, so no byte of it survives in another session's segments.
//
//	field      content                                   used by
//	text       code analyzer: identifiers split, stemmed padfs search (BM25 body ranker)
//	decl       declared names (codetok.Decls), whole     padfs search (declaration ranker)
//	           and split
//	pathw      the path's words, whole and split         padfs search (candidates by name)
//	pathg      trigrams of the path's words              padfs search (candidates by part of a name)
//	kind       the file's extension, lowercased (".s"),  padfs search (the kind ranker's filter)
//	           and "readme" for a prose name (fileKinds)
//	path, ino  the document's path and inode (keyword)   catch-up (renames, hard links)
//
// Grep's trigrams are not in bleve but in DATA/index/<session id>/triseg/
// (package triseg): per file the distinct trigrams of its folded content,
// or for a binary file their 16-bit buckets, or nothing for an
// "unindexed" file (over 16 MiB, with more than maxDocTrigrams distinct
// trigrams, or a git loose object: grep always reads it). Each bleve
// batch's files go to a trigram segment written and synced before bleve
// applies the batch, so the covered sequence number bleve records holds
// for both. (The trigrams in bleve were 71% of its postings and most of
// the worker's CPU: scorch builds and merges a dictionary and postings
// per term with frequencies and norms grep never reads.)
//
// Binary files (a NUL in the first 8 KiB) get trigram buckets and no
// text; files over 1 MiB get trigrams but no text.
//
// The index records in its internal storage the event sequence number
// (and HLC) of the session's commit log it reflects. A background
// goroutine, woken by Store.Watch, catches up from the log in batches; at
// Open (after a crash too) it resumes from the recorded sequence, never
// rebuilding. Readers never wait for it: grep treats files named by the
// log's tail as candidates, so answers are exact while the index lags.
package search

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/triseg"
)

const (
	// MaxIndexedSize is the largest file whose trigrams are indexed;
	// larger files are always read by grep (after a substring prefilter).
	MaxIndexedSize = 16 << 20
	// MaxTextSize is the largest file whose words are indexed for ranked
	// search.
	MaxTextSize = 1 << 20
	// binarySniff is how much of a file is checked for NUL bytes: a file
	// with one there is binary and not indexed (it is still searched).
	binarySniff = 8 << 10
	// formatVersion changes when the document layout changes; an index of
	// another version is rebuilt.
	formatVersion = "padfs-search-14"
	// batchBytes and batchDocs bound one bleve batch of a full build
	// (large batches, fewer segments to merge); catch-up batches are
	// smaller so that closing never waits long for the one in flight.
	batchBytes   = 32 << 20
	batchDocs    = 2000
	catchUpBytes = 4 << 20
	catchUpDocs  = 500
)

var (
	keySeq     = []byte("padfs.seq")
	keyHLC     = []byte("padfs.hlc")
	keyVersion = []byte("padfs.version")
)

// Options tune Open.
type Options struct {
	// Background runs the catch-up goroutine (a mount's process does; a
	// one-shot CLI command need not). The bleve indexes then live in an
	// index worker process (worker.go) at the lowest CPU priority, so that
	// neither their CPU nor their failures reach the caller's process.
	Background bool
	// InProcess keeps the bleve indexes in this process even with
	// Background.
	InProcess bool
	Logger    *slog.Logger

	// settleQuiet and settleMax override the defaults (tests).
	settleQuiet, settleMax time.Duration
}

// Index is the search index of one store. It is safe for concurrent use.
type Index struct {
	dir string // DATA/index
	st  *mvcc.Store
	log *slog.Logger
	be  backend

	mu    sync.Mutex
	dirty map[mvcc.SessionID]bool
	// dirtySince is when the first commit not yet taken by a catch-up
	// pass came (zero: none since the last pass began).
	dirtySince time.Time
	closed     bool
	// writers serialize, per session, everything that writes, drops or
	// replaces its index: catch-up, rebuild, drop, close. Readers never
	// take them.
	writers map[mvcc.SessionID]*sync.Mutex
	// failed are sessions whose catch-up failed (worker down, disk full,
	// damaged index): retried after retryDelay.
	failed     map[mvcc.SessionID]string
	retryDelay time.Duration
	retrying   bool
	// settleQuiet and settleMax: see settle.
	settleQuiet, settleMax time.Duration

	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	unwatch func() // ends the store's Watch (Close); nil without Background
}

// writer returns the lock that serializes the writers of sid's index.
func (ix *Index) writer(sid mvcc.SessionID) *sync.Mutex {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	w := ix.writers[sid]
	if w == nil {
		w = new(sync.Mutex)
		ix.writers[sid] = w
	}
	return w
}

// Open opens (creating if needed) the index of data directory dataDir for
// store st and starts catching up in the background.
func Open(dataDir string, st *mvcc.Store) (*Index, error) {
	return OpenWith(dataDir, st, Options{Background: true})
}

// OpenWith is Open with options.
func OpenWith(dataDir string, st *mvcc.Store, o Options) (*Index, error) {
	dir := filepath.Join(dataDir, "index")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("search index %s: %w", dir, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	ix := &Index{dir: dir, st: st, log: log.With("component", "search"),
		dirty: map[mvcc.SessionID]bool{}, writers: map[mvcc.SessionID]*sync.Mutex{},
		failed: map[mvcc.SessionID]string{}, retryDelay: minRetry,
		settleQuiet: cmp.Or(o.settleQuiet, settleQuiet), settleMax: cmp.Or(o.settleMax, settleMax),
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if !o.Background {
		ix.be = newLocalBackend(dir, ix.log)
		close(ix.done) // no goroutine; stop still ends a Rebuild early
		return ix, nil
	}
	if o.InProcess {
		ix.be = newLocalBackend(dir, ix.log)
	} else {
		ix.be = newRemoteBackend(dir, ix.log, ix.workerDown)
	}
	ix.unwatch = st.Watch(func(sid mvcc.SessionID, _ mvcc.Event) { ix.markDirty(sid) })
	// Catch up every session at start: after a crash the recorded
	// sequence numbers say where to resume.
	infos, err := st.Sessions()
	if err != nil {
		ix.unwatch()
		ix.be.close()
		return nil, fmt.Errorf("search: list sessions: %w", err)
	}
	for _, si := range infos {
		if !si.Forgotten {
			ix.dirty[si.ID] = true
		}
	}
	go ix.background()
	ix.kick()
	return ix, nil
}

const (
	// settleQuiet is how long the log must stay quiet before the
	// background indexer catches up, so that a file saved many times in a
	// burst (sed -i in a loop, an editor's autosave) is indexed once;
	// settleMax bounds the wait while commits keep coming (tar -x). An
	// index pass during a burst costs the foreground although the worker
	// is at SCHED_IDLE: with 5 s, untar of Go's src (8 s) took about a
	// second longer and 3 CPU s more than with 30 s, whose index lag
	// after it stayed 5.8 s (target 15); grep is exact either way.
	settleQuiet = 500 * time.Millisecond
	settleMax   = 30 * time.Second
	// minRetry and maxRetry bound the wait before a failed catch-up is
	// tried again.
	minRetry = 500 * time.Millisecond
	maxRetry = 30 * time.Second
)

func (ix *Index) markDirty(sid mvcc.SessionID) {
	ix.mu.Lock()
	ix.dirty[sid] = true
	if ix.dirtySince.IsZero() {
		ix.dirtySince = time.Now()
	}
	ix.mu.Unlock()
	ix.kick()
}

// kick wakes the background indexer without blocking (the writer's path
// must never wait for the index).
func (ix *Index) kick() {
	select {
	case ix.wake <- struct{}{}:
	default:
	}
}

// workerDown is called when the index worker died: every session is
// caught up again once a new one runs.
func (ix *Index) workerDown() {
	infos, err := ix.st.Sessions()
	if err != nil {
		return
	}
	ix.mu.Lock()
	for _, si := range infos {
		if !si.Forgotten {
			ix.failed[si.ID] = "index worker died"
		}
	}
	ix.mu.Unlock()
	ix.scheduleRetry()
}

// catchUpFailed logs err once per new cause and retries sid later.
func (ix *Index) catchUpFailed(sid mvcc.SessionID, err error) {
	ix.mu.Lock()
	prev, had := ix.failed[sid]
	ix.failed[sid] = err.Error()
	ix.mu.Unlock()
	if !had || prev != err.Error() {
		ix.log.Warn("search: catching up failed; retrying later", "session", sid.String(), "err", err)
	}
	ix.scheduleRetry()
}

// scheduleRetry marks the failed sessions dirty after a delay that grows
// while they keep failing.
func (ix *Index) scheduleRetry() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.retrying || ix.closed {
		return
	}
	ix.retrying = true
	d := ix.retryDelay
	ix.retryDelay = min(2*ix.retryDelay, maxRetry)
	time.AfterFunc(d, func() {
		ix.mu.Lock()
		ix.retrying = false
		for sid := range ix.failed {
			ix.dirty[sid] = true
		}
		ix.mu.Unlock()
		ix.kick()
	})
}

// caughtUp clears sid's failure.
func (ix *Index) caughtUp(sid mvcc.SessionID) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if _, ok := ix.failed[sid]; ok {
		delete(ix.failed, sid)
		ix.log.Info("search: catching up again", "session", sid.String())
	}
	if len(ix.failed) == 0 {
		ix.retryDelay = minRetry
	}
}

func (ix *Index) background() {
	defer close(ix.done)
	for {
		select {
		case <-ix.stop:
			return
		case <-ix.wake:
		}
		if !ix.settle() {
			return
		}
		// The sessions dirty now; those dirtied during this pass wait for
		// the next settle (a save during a catch-up must not start another
		// one at once).
		ix.mu.Lock()
		pass := ix.dirty
		ix.dirty = map[mvcc.SessionID]bool{}
		ix.dirtySince = time.Time{}
		ix.mu.Unlock()
		for len(pass) > 0 {
			more := map[mvcc.SessionID]bool{}
			for sid := range pass {
				again, err := ix.catchUp(sid, ix.stop)
				switch {
				case errors.Is(err, errStopped):
				case err != nil:
					ix.catchUpFailed(sid, err)
				default:
					ix.caughtUp(sid)
				}
				if again && err == nil {
					more[sid] = true // a long log: go on without settling
				}
				if stopped(ix.stop) {
					return
				}
			}
			pass = more
		}
	}
}

// settle waits until no commit came for settleQuiet, or settleMax after
// the first one no pass has taken (or after it began); false when the
// index is closing. So the commits of a long burst (tar -x) that came
// during a catch-up pass, having waited already, start the next pass at
// once, not settleMax later with the worker idle meanwhile.
func (ix *Index) settle() bool {
	start := time.Now()
	quiet := time.NewTimer(ix.settleQuiet)
	defer quiet.Stop()
	limit := time.NewTimer(ix.settleLeft(start))
	defer limit.Stop()
	for {
		select {
		case <-ix.stop:
			return false
		case <-quiet.C:
			return true
		case <-limit.C:
			return true
		case <-ix.wake:
			quiet.Reset(ix.settleQuiet)
			limit.Reset(ix.settleLeft(start))
		}
	}
}

// settleLeft is how much longer a settle begun at start may wait.
func (ix *Index) settleLeft(start time.Time) time.Duration {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	from := start
	if !ix.dirtySince.IsZero() && ix.dirtySince.Before(start) {
		from = ix.dirtySince
	}
	return max(ix.settleMax-time.Since(from), 0)
}

// Close stops the background indexer and closes every session index. A
// catch-up or rebuild in progress stops at its next document without
// recording its progress: the next Open resumes from the last batch that
// did.
func (ix *Index) Close() error {
	ix.mu.Lock()
	if ix.closed {
		ix.mu.Unlock()
		return nil
	}
	ix.closed = true
	ix.mu.Unlock()
	if ix.unwatch != nil {
		ix.unwatch()
	}
	close(ix.stop)
	<-ix.done
	// Wait for the writers in flight (Rebuild, CatchUp from commands).
	ix.mu.Lock()
	ws := make([]*sync.Mutex, 0, len(ix.writers))
	for _, w := range ix.writers {
		ws = append(ws, w)
	}
	ix.mu.Unlock()
	for _, w := range ws {
		w.Lock()
		defer w.Unlock()
	}
	return ix.be.close()
}

// indexMapping is the bleve mapping: documents are built by hand
// (IndexAdvanced), so it only sets BM25, the default analyzer and the
// code analyzers ranked queries name.
func indexMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
	addCodeAnalyzers(im)
	im.ScoringModel = index.BM25Scoring
	im.DefaultAnalyzer = standard.Name
	im.StoreDynamic = false
	im.IndexDynamic = false
	im.DocValuesDynamic = false
	return im
}

// scorchConfig is the scorch configuration of every session index. (Not
// unsafe_batch: scorch then loses the last snapshot, and with it the
// covered sequence number, at Close.)
func scorchConfig() map[string]interface{} {
	return map[string]interface{}{}
}

// Covered returns the event sequence number (and its HLC) up to which the
// index of session sid reflects the store; 0 if it has no index yet, or
// while its worker is not running (or not answering).
func (ix *Index) Covered(sid mvcc.SessionID) (uint64, mvcc.HLC, error) {
	pos, err := ix.be.position(sid)
	if errors.Is(err, errWorkerDown) {
		return 0, 0, nil
	}
	return pos.Seq, pos.HLC, err
}

// DropSession deletes the index of session sid (hard forget, redaction):
// its directory is removed, so none of its bytes remain. The next catch-up
// rebuilds it if the session still exists.
func (ix *Index) DropSession(sid mvcc.SessionID) error {
	w := ix.writer(sid)
	w.Lock()
	defer w.Unlock()
	return ix.dropLocked(sid)
}

// dropLocked is DropSession with sid's writer lock held.
func (ix *Index) dropLocked(sid mvcc.SessionID) error {
	if err := ix.be.drop(sid); err != nil {
		return err
	}
	// Whatever happened to the worker, the directory goes.
	dir := filepath.Join(ix.dir, sid.String())
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove index of session %s: %w", sid, err)
	}
	return nil
}

// Size returns the bytes the index of sid takes on disk.
func (ix *Index) Size(sid mvcc.SessionID) (int64, error) {
	var n int64
	err := filepath.WalkDir(filepath.Join(ix.dir, sid.String()), func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}

// isBinary reports whether data looks binary to the index (a NUL byte in
// its first 8 KiB).
func isBinary(data []byte) bool {
	n := min(len(data), binarySniff)
	for _, b := range data[:n] {
		if b == 0 {
			return true
		}
	}
	return false
}

const (
	keywordOpts = index.IndexField | index.SkipFreqNorm
	textOpts    = index.IndexField
)

// triDoc is a file's entry in the trigram segments: its kind and keys.
type triDoc struct {
	kind byte
	keys []uint32
}

// fileDoc builds the bleve document of one file and its trigram entry.
func fileDoc(path string, ino mvcc.Ino, data []byte) (*document.Document, triDoc) {
	doc := document.NewDocument(path)
	doc.AddField(document.NewTextFieldCustom("path", nil, []byte(path), keywordOpts, nil))
	doc.AddField(document.NewTextFieldCustom("ino", nil, []byte(strconv.FormatUint(uint64(ino), 10)), keywordOpts, nil))
	doc.AddField(&analyzedField{name: "pathw", data: []byte(path), an: wholeAn})
	doc.AddField(&analyzedField{name: "pathg", data: []byte(path), an: pathGramAn})
	for _, k := range fileKinds(path) {
		doc.AddField(document.NewTextFieldCustom("kind", nil, []byte(k), keywordOpts, nil))
	}
	td := triDoc{kind: triseg.KindUnindexed}
	if data == nil {
		return doc, td
	}
	binary := isBinary(data)
	if keys, ok := contentTrigrams(data, binary); ok {
		td = triDoc{kind: triseg.KindText, keys: keys}
		if binary {
			td.kind = triseg.KindBinary
		}
	}
	// Binary files get trigrams (grep must still find their matches, and
	// the trigram argument holds for any bytes) but no words to rank.
	if !binary && len(data) <= MaxTextSize {
		for _, f := range rankFields(path, data) {
			doc.AddField(f)
		}
	}
	return doc, td
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
