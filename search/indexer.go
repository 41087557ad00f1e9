package search

import (
	"context"
	"errors"
	"fmt"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/padfs/padfs/mvcc"
)

// maxTailEvents bounds the events one catch-up step applies.
const maxTailEvents = 20000

// changes is what a stretch of the commit log did to a session's tree.
type changes struct {
	paths    map[string]bool     // re-read these paths
	subtrees map[string]bool     // re-walk these (renamed, exchanged, removed)
	inos     map[mvcc.Ino]string // content changed: every name of these inodes
	// created are the inodes made in this stretch: all their names are
	// in it (inode numbers are never reused), so the index need not be
	// asked for others.
	created map[mvcc.Ino]bool
	full    bool // re-walk everything (fork, redaction, unknown op)
}

func newChanges() *changes {
	return &changes{paths: map[string]bool{}, subtrees: map[string]bool{}, inos: map[mvcc.Ino]string{},
		created: map[mvcc.Ino]bool{}}
}

// add records one event.
func (c *changes) add(ev mvcc.Event) {
	switch ev.Op {
	case mvcc.OpWrite, mvcc.OpTruncate, mvcc.OpCreate:
		if ev.Path != "" {
			c.paths[ev.Path] = true
		}
		if ev.Ino != 0 {
			c.inos[ev.Ino] = ev.Path
			if ev.Op == mvcc.OpCreate {
				c.created[ev.Ino] = true
			}
		}
	case mvcc.OpUnlink, mvcc.OpSymlink, mvcc.OpMkdir:
		if ev.Path != "" {
			c.paths[ev.Path] = true
		}
	case mvcc.OpRmdir, mvcc.OpRename, mvcc.OpExchange:
		c.subtrees[ev.Path] = true
		if ev.Path2 != "" {
			c.subtrees[ev.Path2] = true
		}
	case mvcc.OpLink:
		c.paths[ev.Path2] = true
	case mvcc.OpRestore:
		// Each restored root is its subtree; an old multi-root event names
		// its roots only in Detail, ambiguously: re-walk everything.
		roots, ok := ev.RestoredRoots()
		if !ok {
			c.full = true
		}
		for _, r := range roots {
			c.subtrees[r] = true
		}
	case mvcc.OpChmod, mvcc.OpChown, mvcc.OpUtimens, mvcc.OpSetattr, mvcc.OpSetxattr, mvcc.OpRemovexattr,
		mvcc.OpCheckpoint, mvcc.OpSessionCreate, mvcc.OpForget, mvcc.OpSessionRename:
		// No content or name changed.
	case mvcc.OpFork, mvcc.OpRedact, mvcc.OpImport:
		c.full = true
	default:
		// Unknown (a newer padfs wrote it): assume it changed anything.
		c.full = true
	}
}

// affects reports whether path may have changed (it, or a directory
// above it, was touched), for grep's view of the log's tail.
func (c *changes) affects(path string) bool {
	if c.full || c.paths[path] {
		return true
	}
	for p := path; ; {
		if c.subtrees[p] {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			return c.subtrees["."] || c.subtrees[""]
		}
		p = p[:i]
	}
}

// catchUp applies the next stretch of sid's commit log to its index. more
// is true when log entries remain.
func (ix *Index) catchUp(sid mvcc.SessionID, stop <-chan struct{}) (more bool, err error) {
	w := ix.writer(sid)
	w.Lock()
	defer w.Unlock()
	var lastSeq uint64
	var lastHLC mvcc.HLC
	var forgotten bool
	err = ix.st.View(func(t *mvcc.ReadTx) error {
		var err error
		if lastSeq, lastHLC, err = t.LastEvent(sid); err != nil {
			return err
		}
		if _, err = t.Header(sid); err != nil {
			return err
		}
		forgotten, _, err = t.Forgotten(sid, mvcc.Latest)
		return err
	})
	if errors.Is(err, mvcc.ErrNoSession) {
		// Purged: nothing of it may stay in the index.
		return false, ix.dropLocked(sid)
	}
	if err != nil || forgotten {
		return false, err
	}
	pos, err := ix.be.position(sid)
	seq := pos.Seq
	if err != nil {
		return false, err
	}
	if seq >= lastSeq {
		return false, nil
	}
	if seq == 0 {
		// Never built, or a build was cut short (Close): start from an
		// empty index, so that no document of a file deleted since stays.
		if err := ix.dropLocked(sid); err != nil {
			return false, err
		}
		return false, ix.buildLocked(sid, lastSeq, lastHLC, stop, nil)
	}
	ch := newChanges()
	var endSeq uint64
	var endHLC mvcc.HLC
	err = ix.st.View(func(t *mvcc.ReadTx) error {
		n := 0
		return t.Events(sid, seq, func(ev mvcc.Event) bool {
			ch.add(ev)
			endSeq, endHLC = ev.Seq, ev.HLC
			n++
			return n < maxTailEvents
		})
	})
	if err != nil {
		return false, err
	}
	if endSeq == 0 {
		return false, nil
	}
	if ch.full {
		// Rebuild from scratch: a redaction must leave none of the old
		// bytes in the index's segments.
		if err := ix.dropLocked(sid); err != nil {
			return false, err
		}
		return false, ix.buildLocked(sid, lastSeq, lastHLC, stop, nil)
	}
	return endSeq < lastSeq, ix.applyLocked(sid, pos, ch, endSeq, endHLC, stop)
}

// applyLocked brings the documents that ch touches to their state as of
// at and records (seq, at) as covered. Finding what changed (walks,
// lookups), reading the files and sending them overlap (see readAhead):
// the worker gets its first documents at once, not after every path was
// looked up and every file read one by one. A deletion and the document
// again land in that order (one id, one stream: see batcher); documents
// of different ids land in any order, each the file's state as of at.
func (ix *Index) applyLocked(sid mvcc.SessionID, pos position, ch *changes, seq uint64, at mvcc.HLC, stop <-chan struct{}) (err error) {
	paths, err := ix.changedPaths(sid, ch)
	if err != nil {
		return err
	}
	ra := ix.readAhead(func(emit func(*readItem) bool) error {
		return ix.findChanged(sid, ch, paths, at, emit)
	})
	defer ra.stop()
	head, maxBytes, maxDocs := runSize(ra)
	gen, err := ix.be.begin(sid, 2, maxBytes, maxDocs)
	if err != nil {
		return err
	}
	if gen != pos.Gen {
		// The index read at the start is gone (dropped after a panic):
		// the tail alone would leave the new one incomplete.
		ix.be.abort(sid)
		return errIndexChanged
	}
	defer ix.endRun(sid, &err)
	for _, it := range head {
		if stopped(stop) {
			return errStopped
		}
		if err := ix.send(sid, it); err != nil {
			return err
		}
	}
	for it := range ra.items {
		if stopped(stop) {
			return errStopped
		}
		if err := ix.send(sid, it); err != nil {
			return err
		}
	}
	if err := ra.wait(); err != nil {
		return err
	}
	return ix.be.finish(sid, seq, at)
}

// changedPaths are the paths ch names, and the other names of files whose
// content changed (hard links). (A tar -x creates thousands of files: one
// query each was most of a catch-up's time in the worker.)
func (ix *Index) changedPaths(sid mvcc.SessionID, ch *changes) (map[string]bool, error) {
	paths := map[string]bool{}
	for p := range ch.paths {
		paths[p] = true
	}
	for ino := range ch.inos {
		if ch.created[ino] {
			continue
		}
		ids, err := ix.be.ids(sid, idQuery{Field: "ino", Term: strconv.FormatUint(uint64(ino), 10)})
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			paths[id] = true
		}
	}
	return paths, nil
}

// findChanged emits what a catch-up must delete and (re)index: every
// document below a changed subtree, then what is there now, then each
// changed path as it is at at. It stops when emit returns false.
func (ix *Index) findChanged(sid mvcc.SessionID, ch *changes, paths map[string]bool, at mvcc.HLC, emit func(*readItem) bool) error {
	for p := range ch.subtrees {
		// Every document below p goes; what is there now comes back.
		q := idQuery{Field: "path", Term: p + "/", Prefix: true}
		if p == "." || p == "" {
			q = idQuery{}
		}
		ids, err := ix.be.ids(sid, q)
		if err != nil {
			return err
		}
		if q.Field != "" {
			ids = append(ids, p)
		}
		for _, id := range ids {
			if !emit(&readItem{del: id}) {
				return nil
			}
		}
		err = ix.walkStream(sid, p, at, func(p string, n *mvcc.Inode) bool {
			return emit(&readItem{f: fileRef{p, n}})
		})
		if err != nil && !errors.Is(err, mvcc.ErrNotFound) {
			return err
		}
	}
	for p := range paths {
		n, err := ix.st.Walk(sid, p, at)
		it := &readItem{del: p}
		switch {
		case errors.Is(err, mvcc.ErrNotFound) || errors.Is(err, mvcc.ErrNotDir):
		case err != nil:
			return err
		case n.IsRegular():
			it = &readItem{f: fileRef{p, n}}
		}
		if !emit(it) {
			return nil
		}
	}
	return nil
}

// runSize reads the head of a catch-up's items to choose its batches: a
// large stretch (tar -x, a checkout) is indexed in a build's large
// batches, fewer segments to build and to merge. Which it is is known once
// half a large batch is found, or everything. The head is returned to be
// sent first.
func runSize(ra *reader) (head []*readItem, maxBytes int64, maxDocs int) {
	var total int64
	files := 0
	for total < batchBytes/2 && files < batchDocs/2 {
		it, ok := <-ra.items
		if !ok {
			break
		}
		head = append(head, it)
		if it.del == "" {
			files++
			total += int64(min(it.f.n.Size, MaxIndexedSize))
		}
	}
	if total >= batchBytes/2 || files >= batchDocs/2 {
		return head, batchBytes, batchDocs
	}
	return head, catchUpBytes, catchUpDocs
}

// send hands one item to the worker: a deletion, or a file once read.
func (ix *Index) send(sid mvcc.SessionID, it *readItem) error {
	if it.del != "" {
		return ix.be.del(sid, it.del)
	}
	r := <-it.res
	if r.err != nil {
		return r.err
	}
	if err := ix.be.doc(sid, it.f.path, it.f.n.Ino, r.data); err != nil {
		return fmt.Errorf("index %s: %w", it.f.path, err)
	}
	return nil
}

// readItem is a document to delete (del) or a file to index (f) and,
// once read, its content (res).
type readItem struct {
	del string
	f   fileRef
	res chan readResult
}

type readResult struct {
	data []byte
	err  error
}

// readAheadWorkers read file contents at once: a few cores' worth, no
// more (reading is this process's part; building documents the worker's).
const readAheadWorkers = 4

// reader is a readAhead under way: items are the items produce emitted,
// in its order, each file's content read (or being read) by then.
type reader struct {
	items chan *readItem
	quit  chan struct{}
	wg    sync.WaitGroup
	err   error // produce's, once items is closed
}

// readAhead runs produce on a goroutine of its own and reads the files
// it emits on readAheadWorkers more, at most a window of items ahead of
// the consumer of items. Call stop on every path out.
func (ix *Index) readAhead(produce func(emit func(*readItem) bool) error) *reader {
	ra := &reader{items: make(chan *readItem, 16), quit: make(chan struct{})}
	jobs := make(chan *readItem)
	for range readAheadWorkers {
		ra.wg.Add(1)
		go func() {
			defer ra.wg.Done()
			for it := range jobs {
				d, err := ix.content(it.f)
				it.res <- readResult{d, err}
			}
		}()
	}
	emit := func(it *readItem) bool {
		if it.del == "" {
			it.res = make(chan readResult, 1)
			select {
			case jobs <- it: // a reader has it before the consumer can wait for it
			case <-ra.quit:
				return false
			}
		}
		select {
		case ra.items <- it:
			return true
		case <-ra.quit:
			return false
		}
	}
	ra.wg.Add(1)
	go func() {
		defer ra.wg.Done()
		defer close(ra.items)
		defer close(jobs)
		ra.err = produce(emit)
	}()
	return ra
}

// wait returns produce's error once items is drained.
func (ra *reader) wait() error {
	ra.stop()
	return ra.err
}

// stop ends the producer and the readers and waits for them.
func (ra *reader) stop() {
	select {
	case <-ra.quit:
	default:
		close(ra.quit)
	}
	ra.wg.Wait()
}

// endRun aborts a run of writes that ended in an error.
func (ix *Index) endRun(sid mvcc.SessionID, err *error) {
	if *err != nil {
		ix.be.abort(sid)
	}
}

// searchIDs runs q unscored and returns every matching document id.
func searchIDs(bl bleve.Index, q query.Query) ([]string, error) {
	const page = 1 << 16
	var out []string
	for from := 0; ; from += page {
		req := bleve.NewSearchRequestOptions(q, page, from, false)
		req.Score = "none"
		req.SortBy([]string{"_id"})
		res, err := bl.Search(req)
		if err != nil {
			return nil, err
		}
		for _, h := range res.Hits {
			out = append(out, h.ID)
		}
		if len(res.Hits) < page {
			return out, nil
		}
	}
}

// fileRef is a regular file of a tree.
type fileRef struct {
	path string
	n    *mvcc.Inode
}

// walk calls fn for every regular file at or below path as of at, in walk
// order (see walkStream).
func (ix *Index) walk(sid mvcc.SessionID, path string, at mvcc.HLC, fn func(fileRef)) error {
	return ix.walkStream(sid, path, at, func(p string, n *mvcc.Inode) bool {
		fn(fileRef{p, n})
		return true
	})
}

// walkStream calls fn for every regular file at or below dir as of at, in
// walk order (directories before their contents, names in byte order),
// until fn returns false. It reads one directory per transaction, so fn
// may block (grep's pipeline waits for its output) without holding a read
// transaction open; reads as of one HLC see one state whatever the
// transaction.
func (ix *Index) walkStream(sid mvcc.SessionID, dir string, at mvcc.HLC, fn func(string, *mvcc.Inode) bool) error {
	root, err := ix.st.Walk(sid, dir, at)
	switch {
	case err != nil:
		return err
	case root.IsRegular():
		fn(cleanPath(dir), root)
		return nil
	case !root.IsDir():
		return nil
	}
	var rec func(ino mvcc.Ino, prefix string, depth int) (bool, error)
	rec = func(ino mvcc.Ino, prefix string, depth int) (bool, error) {
		var ents []dirEntry
		err := ix.st.View(func(t *mvcc.ReadTx) error {
			var err error
			ents, err = readDir(t, sid, ino, prefix, at, depth)
			return err
		})
		if err != nil {
			return false, err
		}
		for _, e := range ents {
			switch {
			case e.n.IsRegular():
				if !fn(prefix+e.name, e.n) {
					return false, nil
				}
			case e.n.IsDir():
				if more, err := rec(e.n.Ino, prefix+e.name+"/", depth+1); !more || err != nil {
					return false, err
				}
			}
		}
		return true, nil
	}
	_, err = rec(root.Ino, dirPrefix(dir), 0)
	return err
}

func cleanPath(p string) string {
	p = path.Clean("/" + p)[1:]
	if p == "." {
		return ""
	}
	return p
}

func dirPrefix(p string) string {
	if p = cleanPath(p); p == "" {
		return ""
	}
	return p + "/"
}

// dirEntry is a name in a directory and its inode.
type dirEntry struct {
	name string
	n    *mvcc.Inode
}

// readDir returns the entries of directory dir (at path prefix, depth
// levels below the walk's root) in name order, with their inodes.
func readDir(t *mvcc.ReadTx, sid mvcc.SessionID, dir mvcc.Ino, prefix string, at mvcc.HLC, depth int) ([]dirEntry, error) {
	if depth > 4096 {
		return nil, fmt.Errorf("%w: tree deeper than 4096 at %q", mvcc.ErrCorrupt, prefix)
	}
	var ds []mvcc.Dentry
	if err := t.ReadDir(sid, dir, at, func(d mvcc.Dentry) bool { ds = append(ds, d); return true }); err != nil {
		return nil, err
	}
	ents := make([]dirEntry, 0, len(ds))
	for _, d := range ds {
		n, err := t.Inode(sid, d.Ino, at)
		if err != nil {
			return nil, fmt.Errorf("%s%s: %w", prefix, d.Name, err)
		}
		ents = append(ents, dirEntry{d.Name, n})
	}
	return ents, nil
}

// content reads a file for its document (nil: too large to index, or a
// git loose object).
func (ix *Index) content(f fileRef) ([]byte, error) {
	if f.n.Size > MaxIndexedSize || isGitLooseObject(f.path) {
		return nil, nil
	}
	data, err := ix.st.ReadAll(f.n)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", f.path, err)
	}
	if data == nil {
		data = []byte{}
	}
	return data, nil
}

// Progress reports documents indexed out of total.
type Progress func(done, total int64)

// buildLocked indexes the whole tree of si's session as of at into an
// index assumed empty, and records seq as covered.
func (ix *Index) buildLocked(sid mvcc.SessionID, seq uint64, at mvcc.HLC, stop <-chan struct{}, progress Progress) (err error) {
	var files []fileRef
	if err := ix.walk(sid, "", at, func(f fileRef) { files = append(files, f) }); err != nil {
		return err
	}
	var total int64
	for _, f := range files {
		total += int64(f.n.Size)
	}
	// Read ahead in parallel; send in order. Reading is all this process
	// does: building documents is the backend's (the worker's) work.
	type result struct {
		data []byte
		err  error
	}
	workers := min(runtime.GOMAXPROCS(0), 4)
	results := make([]chan result, len(files))
	for i := range results {
		results[i] = make(chan result, 1)
	}
	var wg sync.WaitGroup
	next := make(chan int)
	quit := make(chan struct{})
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d, err := ix.content(files[i])
				results[i] <- result{d, err}
			}
		}()
	}
	// Bounded read-ahead: content is read only as fast as the backend
	// takes it.
	window := make(chan struct{}, 16)
	go func() {
		defer close(next)
		for i := range files {
			select {
			case window <- struct{}{}:
			case <-quit:
				return
			}
			select {
			case next <- i:
			case <-quit:
				return
			}
		}
	}()
	defer wg.Wait()
	defer close(quit) // runs first: releases the feeder, then workers finish
	// Two segments built at once use both cores of a small machine; more
	// would only compete with the readers and analysis. Progress counts
	// committed batches, so a build that reports it has at least about 16
	// of them; one that does not (the background's, after a format change
	// or a damaged index) takes full batches: each segment more is one
	// more dictionary to build and to merge (Go's src: 6 segments instead
	// of 16, 20% less of the worker's CPU).
	maxBytes, maxDocs := int64(batchBytes), batchDocs
	if progress != nil {
		maxBytes, maxDocs = min(batchBytes, max(total/16, 1<<20)), min(batchDocs, max(len(files)/16, 16))
	}
	if _, err := ix.be.begin(sid, 2, maxBytes, maxDocs); err != nil {
		return err
	}
	defer ix.endRun(sid, &err)
	prog := startProgress(ix.be, progress, len(files))
	defer func() { prog.end(err) }()
	for i := range files {
		if stopped(stop) {
			return errStopped
		}
		r := <-results[i]
		<-window
		if r.err != nil {
			return r.err
		}
		if err := ix.be.doc(sid, files[i].path, files[i].n.Ino, r.data); err != nil {
			return fmt.Errorf("index %s: %w", files[i].path, err)
		}
		prog.sentOne()
	}
	return ix.be.finish(sid, seq, at)
}

// Rebuild deletes the index of session sid and builds it again from the
// store's current tree, reporting progress in documents indexed. ctx (or
// Close) ends it early, with ctx.Err(): the index is then empty and the
// background catch-up builds it again.
func (ix *Index) Rebuild(ctx context.Context, sid mvcc.SessionID, progress Progress) error {
	var seq uint64
	var at mvcc.HLC
	if err := ix.st.View(func(t *mvcc.ReadTx) error {
		var err error
		seq, at, err = t.LastEvent(sid)
		return err
	}); err != nil {
		return err
	}
	w := ix.writer(sid)
	w.Lock()
	defer w.Unlock()
	if err := ix.dropLocked(sid); err != nil {
		return err
	}
	// Cancelling ctx closes bctx.Done() at once; Close does, shortly.
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-ix.stop:
			cancel()
		case <-bctx.Done():
		}
	}()
	err := ix.buildLocked(sid, seq, at, bctx.Done(), progress)
	if errors.Is(err, errStopped) && ctx.Err() != nil {
		return fmt.Errorf("rebuild index of %s: %w", sid, ctx.Err())
	}
	return err
}

// CatchUp brings the index of sid up to the store's latest commit (what
// the background goroutine does), synchronously.
func (ix *Index) CatchUp(sid mvcc.SessionID) error {
	for {
		more, err := ix.catchUp(sid, nil)
		if err != nil || !more {
			return err
		}
	}
}
