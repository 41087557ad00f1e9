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
//	tri        distinct trigrams of the folded content   grep (and grep -i)
//	text       standard analyzer (BM25)                  padfs search
//	path, ino  the document's path and inode (keyword)   catch-up (renames, hard links)
//	unindexed  "y" for files over 16 MiB or with more     grep (always a candidate)
//	           than maxDocTrigrams distinct trigrams
//	grow       GNU grep's read buffer after a long line  grep (buffer carry-over)
//
// Binary files (a NUL in the first 8 KiB) and files over 1 MiB get
// trigrams but no text.
//
// The index records in its internal storage the event sequence number
// (and HLC) of the session's commit log it reflects. A background
// goroutine, woken by Store.Watch, catches up from the log in batches; at
// Open (after a crash too) it resumes from the recorded sequence, never
// rebuilding. Readers never wait for it: grep treats files named by the
// log's tail as candidates, so answers are exact while the index lags.
package search

import (
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
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/standard"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/mapping"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/padfs/padfs/mvcc"
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
	formatVersion = "padfs-search-6"
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
	// one-shot CLI command need not).
	Background bool
	Logger     *slog.Logger
}

// Index is the search index of one store. It is safe for concurrent use.
type Index struct {
	dir string // DATA/index
	st  *mvcc.Store
	log *slog.Logger

	mu       sync.Mutex
	sessions map[mvcc.SessionID]*sessionIndex
	dirty    map[mvcc.SessionID]bool
	closed   bool
	// writers serialize, per session, everything that writes, drops or
	// replaces its index: catch-up, rebuild, drop, close. Readers never
	// take them.
	writers map[mvcc.SessionID]*sync.Mutex
	// dropping marks sessions whose index directory is being closed and
	// removed: readers must not reopen it meanwhile (they scan instead).
	dropping map[mvcc.SessionID]bool

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

// sessionIndex is the bleve index of one session. Writers hold the
// session's writer lock (Index.writer); readers use bl freely.
type sessionIndex struct {
	sid mvcc.SessionID
	dir string
	bl  bleve.Index
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
		sessions: map[mvcc.SessionID]*sessionIndex{}, dirty: map[mvcc.SessionID]bool{},
		writers: map[mvcc.SessionID]*sync.Mutex{}, dropping: map[mvcc.SessionID]bool{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	if !o.Background {
		close(ix.done) // no goroutine; stop still ends a Rebuild early
		return ix, nil
	}
	st.Watch(func(sid mvcc.SessionID, _ mvcc.Event) { ix.markDirty(sid) })
	// Catch up every session at start: after a crash the recorded
	// sequence numbers say where to resume.
	infos, err := st.Sessions()
	if err != nil {
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

func (ix *Index) markDirty(sid mvcc.SessionID) {
	ix.mu.Lock()
	ix.dirty[sid] = true
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

func (ix *Index) background() {
	defer close(ix.done)
	for {
		select {
		case <-ix.stop:
			return
		case <-ix.wake:
		}
		// Let a burst of commits (tar -x) settle into one batch.
		select {
		case <-ix.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
		for {
			ix.mu.Lock()
			var sid mvcc.SessionID
			found := false
			for s := range ix.dirty {
				sid, found = s, true
				delete(ix.dirty, s)
				break
			}
			ix.mu.Unlock()
			if !found {
				break
			}
			more, err := ix.catchUp(sid, ix.stop)
			if err != nil && !errors.Is(err, errStopped) {
				ix.log.Warn("search: catching up failed", "session", sid.String(), "err", err)
			}
			if more {
				ix.markDirty(sid)
			}
			select {
			case <-ix.stop:
				return
			default:
			}
		}
	}
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
	close(ix.stop)
	<-ix.done
	// Every open index (readers open them too, without a writer lock).
	ix.mu.Lock()
	sids := make([]mvcc.SessionID, 0, len(ix.sessions))
	for sid := range ix.sessions {
		sids = append(sids, sid)
	}
	ix.mu.Unlock()
	var errs []error
	for _, sid := range sids {
		w := ix.writer(sid)
		w.Lock()
		ix.mu.Lock()
		si := ix.sessions[sid]
		delete(ix.sessions, sid)
		ix.mu.Unlock()
		if si != nil {
			if err := si.bl.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close index of session %s: %w", sid, err))
			}
		}
		w.Unlock()
	}
	return errors.Join(errs...)
}

// indexMapping is the bleve mapping: documents are built by hand
// (IndexAdvanced), so it only sets BM25 and the default analyzer.
func indexMapping() mapping.IndexMapping {
	im := bleve.NewIndexMapping()
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

// session returns the open index of sid, opening or creating it.
func (ix *Index) session(sid mvcc.SessionID, create bool) (*sessionIndex, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.closed {
		return nil, errors.New("search index is closed")
	}
	if si, ok := ix.sessions[sid]; ok {
		return si, nil
	}
	if ix.dropping[sid] {
		if create {
			return nil, fmt.Errorf("search index of session %s is being removed", sid)
		}
		return nil, nil
	}
	dir := filepath.Join(ix.dir, sid.String())
	bl, err := bleve.OpenUsing(dir, scorchConfig())
	if err != nil {
		bl = nil // bleve returns a typed nil
	}
	switch {
	case err == nil:
		if v, _ := bl.GetInternal(keyVersion); string(v) != formatVersion {
			ix.log.Info("search: index format changed; rebuilding", "session", sid.String())
			bl.Close()
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
			bl, err = nil, bleve.ErrorIndexPathDoesNotExist
		}
	case errors.Is(err, bleve.ErrorIndexPathDoesNotExist):
	default:
		// A damaged index is rebuilt: it is derived data.
		ix.log.Warn("search: cannot open index; rebuilding", "session", sid.String(), "err", err)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		err = bleve.ErrorIndexPathDoesNotExist
	}
	if bl == nil {
		if !create {
			return nil, nil
		}
		if bl, err = bleve.NewUsing(dir, indexMapping(), scorch.Name, scorch.Name, scorchConfig()); err != nil {
			return nil, fmt.Errorf("create index %s: %w", dir, err)
		}
		if err := bl.SetInternal(keyVersion, []byte(formatVersion)); err != nil {
			bl.Close()
			return nil, err
		}
	}
	si := &sessionIndex{sid: sid, dir: dir, bl: bl}
	ix.sessions[sid] = si
	return si, nil
}

// covered returns the event sequence and HLC the index of sid reflects.
func (si *sessionIndex) covered() (uint64, mvcc.HLC, error) {
	seq, err := si.bl.GetInternal(keySeq)
	if err != nil {
		return 0, 0, err
	}
	hlc, err := si.bl.GetInternal(keyHLC)
	if err != nil {
		return 0, 0, err
	}
	var s uint64
	var h mvcc.HLC
	if len(seq) == 8 {
		s = binary.BigEndian.Uint64(seq)
	}
	if len(hlc) == 8 {
		h = mvcc.HLC(binary.BigEndian.Uint64(hlc))
	}
	return s, h, nil
}

// Covered returns the event sequence number (and its HLC) up to which the
// index of session sid reflects the store; 0 if it has no index yet.
func (ix *Index) Covered(sid mvcc.SessionID) (uint64, mvcc.HLC, error) {
	si, err := ix.session(sid, false)
	if err != nil || si == nil {
		return 0, 0, err
	}
	return si.covered()
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
	ix.mu.Lock()
	si := ix.sessions[sid]
	delete(ix.sessions, sid)
	ix.dropping[sid] = true
	ix.mu.Unlock()
	defer func() {
		ix.mu.Lock()
		delete(ix.dropping, sid)
		ix.mu.Unlock()
	}()
	if si != nil {
		if err := si.bl.Close(); err != nil {
			ix.log.Warn("search: close dropped index", "session", sid.String(), "err", err)
		}
	}
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

var standardAnalyzer analysis.Analyzer

func init() {
	// The standard analyzer, built once from bleve's registry through a
	// throwaway mapping (the registry's cache is what the index uses too).
	im := bleve.NewIndexMapping()
	standardAnalyzer = im.AnalyzerNamed(standard.Name)
}

const (
	keywordOpts = index.IndexField | index.SkipFreqNorm
	trigramOpts = index.IndexField | index.SkipFreqNorm
	textOpts    = index.IndexField
)

// fileDoc builds the document of one file.
func fileDoc(path string, n *mvcc.Inode, data []byte) *document.Document {
	doc := document.NewDocument(path)
	doc.AddField(document.NewTextFieldCustom("path", nil, []byte(path), keywordOpts, nil))
	doc.AddField(document.NewTextFieldCustom("ino", nil, []byte(strconv.FormatUint(uint64(n.Ino), 10)), keywordOpts, nil))
	if data == nil {
		doc.AddField(document.NewTextFieldCustom("unindexed", nil, []byte("y"), keywordOpts, nil))
		return doc
	}
	if tri, ok := contentTrigrams(data); ok {
		doc.AddField(document.NewTextFieldCustom("tri", nil, nil, trigramOpts, preAnalyzed(tri)))
		if _, grown := readModel(data, grepBufSize); grown > grepBufSize {
			// A line long enough to grow GNU grep's buffer (see run).
			doc.AddField(document.NewTextFieldCustom("grow", nil, []byte(strconv.Itoa(grown)), keywordOpts|index.StoreField, nil))
		}
	} else {
		doc.AddField(document.NewTextFieldCustom("unindexed", nil, []byte("y"), keywordOpts, nil))
	}
	// Binary files get trigrams (grep must still find their matches, and
	// the trigram argument holds for any bytes) but no words to rank.
	if !isBinary(data) && len(data) <= MaxTextSize {
		doc.AddField(document.NewTextFieldCustom("text", nil, data, textOpts, standardAnalyzer))
	}
	return doc
}

func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
