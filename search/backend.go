package search

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/trigram"
	"github.com/padfs/padfs/search/triseg"
	"golang.org/x/sys/unix"
)

// backend is where the bleve indexes live: in this process (localBackend,
// for one-shot commands and inside the worker) or in an index worker
// process (remoteBackend, for a mount). Index does everything else:
// reading the log and the files, deciding what to index.
//
// Writes to one session's index (begin ... finish, abort, drop) come from
// one goroutine at a time (Index.writer); reads come from anywhere.
type backend interface {
	// position is what sid's index covers (zero: no index).
	position(sid mvcc.SessionID) (position, error)
	// ids lists the documents matching q (none without an index); with
	// q.Gen set, only from that generation of the index.
	ids(sid mvcc.SessionID, q idQuery) ([]string, error)
	// search runs the index's rankers for q: up to q.Size documents of
	// each, with every ranker's score of each document listed. It stops
	// with ctx's error when ctx is done.
	search(ctx context.Context, sid mvcc.SessionID, q rankQuery) ([]scored, error)

	// begin starts a run of writes to sid's index (creating it),
	// discarding what an earlier run left unfinished, and returns the
	// generation of the index written.
	begin(sid mvcc.SessionID, parallel int, maxBytes int64, maxDocs int) (uint64, error)
	del(sid mvcc.SessionID, id string) error
	// doc indexes a file's content (data nil: too large, unindexed).
	doc(sid mvcc.SessionID, path string, ino mvcc.Ino, data []byte) error
	// flush commits what is pending and waits for it.
	flush(sid mvcc.SessionID) error
	// finish commits the rest with (seq, at) recorded as covered.
	finish(sid mvcc.SessionID, seq uint64, at mvcc.HLC) error
	// abort forgets the pending documents of a run cut short.
	abort(sid mvcc.SessionID)
	// drop deletes sid's index directory.
	drop(sid mvcc.SessionID) error

	stats() BackendStats
	close() error
}

// BackendStats counts the work of the index's bleve side.
type BackendStats struct {
	// Indexed is the number of documents indexed (committed to bleve)
	// since the worker started.
	Indexed uint64 `json:"indexed"`
	// Pid is the index worker's process id (0: in-process).
	Pid int `json:"pid"`
	// Restarts counts index workers restarted after they died.
	Restarts int `json:"restarts"`
	// QueryPolicy is the scheduling policy the worker answers queries at
	// (0: SCHED_OTHER; 5: SCHED_IDLE, when it may not leave it).
	QueryPolicy int `json:"query_policy"`
	// IdleRankers counts the ranked-search rankers the worker ran at
	// SCHED_IDLE (on a thread other than the query's, not raised): 0
	// unless the worker may not leave SCHED_IDLE.
	IdleRankers uint64 `json:"idle_rankers"`
	// MemLimit is the worker's soft memory limit in bytes (0:
	// in-process; math.MaxInt64: none), from $PADFS_INDEX_MEMLIMIT.
	MemLimit int64 `json:"mem_limit"`
}

// idQuery selects documents: every document (zero value), the term Term
// of Field (or its prefix), or (Tri non-nil) grep's candidates for a
// trigram query: its matches and every unindexed document.
type idQuery struct {
	Field, Term string
	// Terms are more terms of Field, ORed with Term (one query for many
	// inodes: a tail of thousands of events).
	Terms  []string
	Prefix bool
	Tri    *trigram.Query
	// Gen, if not 0, is the index generation (position.Gen) the caller
	// read the covered sequence number from: a query must not mix one
	// index's position with another's documents (a rebuild in between).
	Gen uint64
}

// position is the event sequence and HLC an index reflects, and which
// index that is: Gen changes whenever the session's index is replaced
// (dropped, rebuilt, reopened).
type position struct {
	Seq uint64
	HLC mvcc.HLC
	Gen uint64
}

// errIndexChanged is a query for a generation of an index that was
// replaced since.
var errIndexChanged = errors.New("search index replaced during the query")

func (q idQuery) bleve() query.Query {
	switch {
	case q.Field == "":
		return query.NewMatchAllQuery()
	case q.Prefix:
		p := query.NewPrefixQuery(q.Term)
		p.SetField(q.Field)
		return p
	}
	if len(q.Terms) > 0 {
		qs := make([]query.Query, 0, len(q.Terms)+1)
		for _, t := range append([]string{q.Term}, q.Terms...) {
			qs = append(qs, termQ(q.Field, t))
		}
		return query.NewDisjunctionQuery(qs)
	}
	return termQ(q.Field, q.Term)
}

// The index's rankers, in the order of scored.scores: BM25 of the text
// field, of the declared names, of the path's words and of their
// trigrams.
const (
	rankText = iota
	rankDecl
	rankPathw
	rankPathg
	// rankDeclExact: the query's identifiers, as typed, among the declared
	// names (no parts): the files that declare what the query names.
	rankDeclExact
	// rankKind: the text ranker's query within files of the kinds the
	// query names, or of prose and scripts (rankkind.go).
	rankKind
	numIndexRankers
)

var indexRankerFields = [numIndexRankers]string{"text", "decl", "pathw", "pathg", "decl", "text"}
var indexRankerAnalyzers = [numIndexRankers]string{codeAnalyzer, wholeAnalyzer, wholeAnalyzer, pathGramQueryAnalyzer, "", codeAnalyzer}

// rankQuery is a ranked search the index answers: the query's words, an
// optional path (file or directory) to stay within, and how many
// documents each ranker returns.
type rankQuery struct {
	Text   string
	Prefix string
	Size   int
}

// scored is a ranked-search candidate with the score of each index
// ranker (0: not among that ranker's results).
type scored struct {
	id     string
	scores [numIndexRankers]float64
}

// bleveQueries are the rankers' queries for q.
func (q rankQuery) bleveQueries() []query.Query {
	var filter query.Query
	if q.Prefix != "" {
		dir := query.NewPrefixQuery(q.Prefix + "/")
		dir.SetField("path")
		file := query.NewTermQuery(q.Prefix)
		file.SetField("path")
		filter = query.NewDisjunctionQuery([]query.Query{file, dir})
	}
	qs := make([]query.Query, numIndexRankers)
	for i, f := range indexRankerFields {
		var mq query.Query
		if i == rankDeclExact {
			var terms []query.Query
			for _, t := range identTerms(q.Text) {
				tq := query.NewTermQuery(t)
				tq.SetField(f)
				terms = append(terms, tq)
			}
			mq = query.NewDisjunctionQuery(terms)
			if len(terms) == 0 {
				mq = query.NewMatchNoneQuery()
			}
		} else {
			m := query.NewMatchQuery(q.Text)
			m.SetField(f)
			m.Analyzer = indexRankerAnalyzers[i]
			mq = m
			if i == rankKind {
				mq = kindQuery(q.Text, m)
			}
		}
		qs[i] = mq
		if filter != nil {
			b := query.NewBooleanQuery([]query.Query{mq}, nil, nil)
			b.AddFilter(filter)
			qs[i] = b
		}
	}
	return qs
}

// panicError is a panic of bleve (or bbolt below it) caught where padfs
// called it: the session's index is treated as damaged.
type panicError struct {
	what string
	v    any
}

func (e *panicError) Error() string { return fmt.Sprintf("%s panicked: %v", e.what, e.v) }

// errDiskFull pauses indexing until space returns.
var errDiskFull = errors.New("search index: disk almost full; indexing paused")

// localBackend keeps the indexes in this process. Every call into bleve
// is guarded: a panic costs the session's index (dropped, rebuilt from
// the store), not the process.
type localBackend struct {
	dir string // DATA/index
	log *slog.Logger
	// reserve is the free space writes leave on the index's file system.
	reserve int64

	mu       sync.Mutex
	sessions map[mvcc.SessionID]*sessionIndex
	runs     map[mvcc.SessionID]*batcher
	// dropping marks sessions whose index directory is being closed and
	// removed: readers must not reopen it meanwhile.
	dropping map[mvcc.SessionID]bool
	closed   bool
	indexed  atomic.Uint64
	gens     atomic.Uint64
	// rankThread, if set (in the index worker), runs on each ranker's
	// goroutine before its bleve search and returns what to run after.
	rankThread  func() func()
	idleRankers atomic.Uint64
}

// sessionIndex is the bleve index of one session.
type sessionIndex struct {
	sid mvcc.SessionID
	dir string
	bl  bleve.Index
	tri *triseg.Set // dir/triseg: grep's trigrams
	gen uint64
}

// close closes si's trigram segments, then its bleve index.
func (si *sessionIndex) close() error {
	si.tri.Close()
	return si.bl.Close()
}

// openTri opens the trigram segments of the bleve index in dir; a
// failed background merge is logged (a damaged input is found again, and
// the index dropped, by the next query).
func (lb *localBackend) openTri(sid mvcc.SessionID, dir string, create bool) (*triseg.Set, error) {
	return triseg.Open(filepath.Join(dir, "triseg"), create, func(err error) {
		lb.log.Warn("search: merging trigram segments failed", "session", sid.String(), "err", err)
	})
}

func newLocalBackend(dir string, log *slog.Logger) *localBackend {
	lb := &localBackend{dir: dir, log: log, reserve: diskReserve(),
		sessions: map[mvcc.SessionID]*sessionIndex{}, runs: map[mvcc.SessionID]*batcher{},
		dropping: map[mvcc.SessionID]bool{}}
	// Generations stay unique across workers (a restart between a
	// position and a query).
	lb.gens.Store(uint64(time.Now().UnixNano()))
	return lb
}

// diskReserve is the free space the index leaves ($PADFS_INDEX_RESERVE
// bytes, default 64 MiB).
func diskReserve() int64 {
	if v, err := strconv.ParseInt(os.Getenv("PADFS_INDEX_RESERVE"), 10, 64); err == nil && v >= 0 {
		return v
	}
	return 64 << 20
}

// guard runs f, turning a panic into a panicError and dropping the
// session's index (it is derived data: the next catch-up rebuilds it).
func (lb *localBackend) guard(sid mvcc.SessionID, what string, f func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{what: what, v: v}
			lb.log.Error("search: index damaged; dropping it for a rebuild", "session", sid.String(), "err", err, "stack", string(debug.Stack()))
			lb.discard(sid)
		}
	}()
	return f()
}

// discard closes (guarded) and removes sid's index after a panic.
func (lb *localBackend) discard(sid mvcc.SessionID) {
	lb.mu.Lock()
	si := lb.sessions[sid]
	delete(lb.sessions, sid)
	delete(lb.runs, sid)
	lb.mu.Unlock()
	if si != nil {
		func() {
			defer func() { _ = recover() }()
			si.close()
		}()
	}
	if err := os.RemoveAll(filepath.Join(lb.dir, sid.String())); err != nil {
		lb.log.Warn("search: remove damaged index", "session", sid.String(), "err", err)
	}
}

// session returns the open index of sid, opening or creating it; nil
// without create when there is none.
func (lb *localBackend) session(sid mvcc.SessionID, create bool) (si *sessionIndex, err error) {
	err = lb.guard(sid, "open index", func() error {
		si, err = lb.sessionLocked(sid, create)
		return err
	})
	return si, err
}

func (lb *localBackend) sessionLocked(sid mvcc.SessionID, create bool) (*sessionIndex, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if lb.closed {
		return nil, errors.New("search index is closed")
	}
	if si, ok := lb.sessions[sid]; ok {
		return si, nil
	}
	if lb.dropping[sid] {
		if create {
			return nil, fmt.Errorf("search index of session %s is being removed", sid)
		}
		return nil, nil
	}
	dir := filepath.Join(lb.dir, sid.String())
	if err := verifyIndex(dir); err != nil {
		lb.log.Warn("search: index damaged; rebuilding it", "session", sid.String(), "err", err)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	bl, err := bleve.OpenUsing(dir, scorchConfig())
	if err != nil {
		bl = nil // bleve returns a typed nil
	}
	var tri *triseg.Set
	switch {
	case err == nil:
		if v, _ := bl.GetInternal(keyVersion); string(v) != formatVersion {
			lb.log.Info("search: index format changed; rebuilding", "session", sid.String())
			bl.Close()
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
			bl = nil
		} else if tri, err = lb.openTri(sid, dir, false); err != nil {
			lb.log.Warn("search: trigram segments damaged; rebuilding the index", "session", sid.String(), "err", err)
			bl.Close()
			if err := os.RemoveAll(dir); err != nil {
				return nil, err
			}
			bl = nil
		}
	case errors.Is(err, bleve.ErrorIndexPathDoesNotExist):
	default:
		// A damaged index is rebuilt: it is derived data.
		lb.log.Warn("search: cannot open index; rebuilding", "session", sid.String(), "err", err)
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
	}
	if bl == nil {
		if !create {
			return nil, nil
		}
		// A new index writes files at once: on a nearly full disk that
		// would take the space left for commits that free some.
		if err := lb.room(); err != nil {
			return nil, fmt.Errorf("create index %s: %w", dir, err)
		}
		if bl, err = bleve.NewUsing(dir, indexMapping(), scorch.Name, scorch.Name, scorchConfig()); err != nil {
			_ = os.RemoveAll(dir) // a half-made index only holds space
			return nil, fmt.Errorf("create index %s: %w", dir, err)
		}
		// The trigram directory before the version: an index with the
		// version and without it is damaged, not empty.
		if tri, err = lb.openTri(sid, dir, true); err != nil {
			bl.Close()
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("create index %s: %w", dir, err)
		}
		if err := bl.SetInternal(keyVersion, []byte(formatVersion)); err != nil {
			tri.Close()
			bl.Close()
			return nil, err
		}
	}
	si := &sessionIndex{sid: sid, dir: dir, bl: bl, tri: tri, gen: lb.gens.Add(1)}
	lb.sessions[sid] = si
	return si, nil
}

func (lb *localBackend) position(sid mvcc.SessionID) (position, error) {
	si, err := lb.session(sid, false)
	if err != nil || si == nil {
		return position{}, err
	}
	var seq uint64
	var at mvcc.HLC
	err = lb.guard(sid, "read covered seq", func() error {
		s, err := si.bl.GetInternal(keySeq)
		if err != nil {
			return err
		}
		h, err := si.bl.GetInternal(keyHLC)
		if err != nil {
			return err
		}
		if len(s) == 8 {
			seq = binary.BigEndian.Uint64(s)
		}
		if len(h) == 8 {
			at = mvcc.HLC(binary.BigEndian.Uint64(h))
		}
		return nil
	})
	return position{seq, at, si.gen}, err
}

func (lb *localBackend) ids(sid mvcc.SessionID, q idQuery) (ids []string, err error) {
	si, err := lb.session(sid, false)
	if err != nil || si == nil {
		if err == nil && q.Gen != 0 {
			err = errIndexChanged
		}
		return nil, err
	}
	if q.Gen != 0 && q.Gen != si.gen {
		return nil, errIndexChanged
	}
	err = lb.guard(sid, "query", func() error {
		switch {
		case q.Tri != nil:
			ids, err = si.tri.Candidates(q.Tri)
		case q.Field == "unindexed":
			ids, err = si.tri.Unindexed()
		case q.Field == "tri" && len(q.Term) == 3:
			ids, err = si.tri.WithKey(triseg.TriKey(q.Term))
		case q.Field == "btri" && len(q.Term) == 2:
			ids, err = si.tri.WithKey(triseg.BucketKey(uint32(q.Term[0])<<8 | uint32(q.Term[1])))
		default:
			ids, err = searchIDs(si.bl, q.bleve())
		}
		return err
	})
	if errors.Is(err, triseg.ErrCorrupt) {
		lb.log.Error("search: index damaged; dropping it for a rebuild", "session", sid.String(), "err", err)
		lb.discardGen(sid, si.gen)
	}
	return ids, err
}

// discardGen discards sid's index if it is still generation gen.
func (lb *localBackend) discardGen(sid mvcc.SessionID, gen uint64) {
	lb.mu.Lock()
	cur := lb.sessions[sid]
	lb.mu.Unlock()
	if cur != nil && cur.gen == gen {
		lb.discard(sid)
	}
}

func (lb *localBackend) search(ctx context.Context, sid mvcc.SessionID, q rankQuery) (hits []scored, err error) {
	si, err := lb.session(sid, false)
	if err != nil || si == nil {
		return nil, err
	}
	err = lb.guard(sid, "search", func() error {
		qs := q.bleveQueries()
		res, err := searchAll(ctx, si.bl, qs, func(r int) int {
			if r == rankKind {
				return min(q.Size, kindCandidates)
			}
			return q.Size
		}, lb.rankThread)
		if ctx.Err() != nil {
			return ctx.Err() // cancelled, not damaged
		}
		if err != nil {
			return lb.damaged(sid, err)
		}
		at := map[string]int{}
		for r := range res {
			for _, h := range res[r].Hits {
				i, ok := at[h.ID]
				if !ok {
					i = len(hits)
					at[h.ID] = i
					hits = append(hits, scored{id: h.ID})
				}
				hits[i].scores[r] = h.Score
			}
		}
		// Second round: every candidate's score by every fused ranker (the
		// others pick candidates), not only by those that listed it (a
		// file found by what it declares has a text score too): the
		// candidates the first round did not score, unless it had all of
		// the ranker's matches. (Rescoring the others too was a third of
		// this round: its cost is mostly finding the ids in each segment.)
		var need [numIndexRankers][]string
		for _, r := range []int{rankText, rankDecl} {
			if res[r].Total <= uint64(q.Size) {
				continue
			}
			for _, h := range hits {
				if h.scores[r] == 0 {
					need[r] = append(need[r], h.id)
				}
			}
		}
		second := make([]query.Query, len(qs))
		for r := range qs {
			if len(need[r]) > 0 {
				second[r] = onlyDocs(qs[r:r+1], need[r])[0]
			}
		}
		res, err = searchAll(ctx, si.bl, second, func(r int) int { return len(need[r]) }, lb.rankThread)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return lb.damaged(sid, err)
		}
		for r := range res {
			if res[r] == nil {
				continue
			}
			for _, h := range res[r].Hits {
				if i, ok := at[h.ID]; ok {
					hits[i].scores[r] = h.Score
				}
			}
		}
		return nil
	})
	return hits, err
}

// onlyDocs are the queries qs restricted to the documents ids, scored as
// qs score them: a conjunction with the ids at boost 0, which adds 0 to
// the score and leaves the query norm as it is. Unlike a filter (which
// bleve applies to every document the query matches), the conjunction
// advances the query's postings to the ids, so that scoring 100-200
// candidates does not walk the thousands of files a common word is in.
// TestOnlyDocsScoresAsFilter checks the scores are the filter's, bit for
// bit.
func onlyDocs(qs []query.Query, ids []string) []query.Query {
	out := make([]query.Query, len(qs))
	for r, q := range qs {
		only := query.NewDocIDQuery(ids)
		only.SetBoost(0)
		out[r] = query.NewConjunctionQuery([]query.Query{only, q})
	}
	return out
}

// searchAll runs the queries at once (a query's latency is the slowest
// ranker's, not their sum), size(r) hits of query r (0: not run); each
// goroutine calls thread (if not nil) first and what it returns last.
func searchAll(ctx context.Context, bl bleve.Index, qs []query.Query, size func(int) int, thread func() func()) ([]*bleve.SearchResult, error) {
	res := make([]*bleve.SearchResult, len(qs))
	errs := make([]error, len(qs))
	var wg sync.WaitGroup
	for r, bq := range qs {
		n := size(r)
		if n == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if thread != nil {
				defer thread()()
			}
			defer func() {
				if v := recover(); v != nil {
					errs[r] = &panicError{what: "search", v: v}
				}
			}()
			res[r], errs[r] = bl.SearchInContext(ctx, bleve.NewSearchRequestOptions(bq, n, 0, false))
		}()
	}
	wg.Wait()
	return res, errors.Join(errs...)
}

// run returns sid's batcher of the current run.
func (lb *localBackend) run(sid mvcc.SessionID) (*batcher, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	bt := lb.runs[sid]
	if bt == nil {
		return nil, fmt.Errorf("search index of session %s: write outside a run", sid)
	}
	return bt, nil
}

func (lb *localBackend) begin(sid mvcc.SessionID, parallel int, maxBytes int64, maxDocs int) (uint64, error) {
	lb.abort(sid)
	si, err := lb.session(sid, true)
	if err != nil {
		return 0, err
	}
	return si.gen, lb.guard(sid, "new batch", func() error {
		bt := newBatcher(si.bl, si.tri, parallel, maxBytes, maxDocs)
		bt.room = lb.room
		bt.committed = func(n int) { lb.indexed.Add(uint64(n)) }
		lb.mu.Lock()
		lb.runs[sid] = bt
		lb.mu.Unlock()
		return nil
	})
}

// room fails with errDiskFull when the index's file system has less than
// the reserve free: a persist that fails half-way is what damages an
// index, so writes pause before it could happen.
func (lb *localBackend) room() error {
	var s unix.Statfs_t
	if err := unix.Statfs(lb.dir, &s); err != nil {
		return nil // cannot tell: let the write try
	}
	if free := int64(s.Bavail) * int64(s.Bsize); free < lb.reserve {
		return fmt.Errorf("%w (%d MiB free on %s, keeping %d MiB)", errDiskFull, free>>20, lb.dir, lb.reserve>>20)
	}
	return nil
}

func (lb *localBackend) del(sid mvcc.SessionID, id string) error {
	bt, err := lb.run(sid)
	if err != nil {
		return err
	}
	return lb.guard(sid, "delete", func() error { return bt.delete(id) })
}

func (lb *localBackend) doc(sid mvcc.SessionID, path string, ino mvcc.Ino, data []byte) error {
	bt, err := lb.run(sid)
	if err != nil {
		return err
	}
	size := int64(len(data))
	return lb.guard(sid, "index "+path, func() error {
		doc, td := fileDoc(path, ino, data)
		return bt.index(doc, td, size)
	})
}

func (lb *localBackend) flush(sid mvcc.SessionID) error {
	bt, err := lb.run(sid)
	if err != nil {
		return err
	}
	return lb.guard(sid, "batch", func() error {
		if err := bt.flush(); err != nil {
			return err
		}
		return bt.wait()
	})
}

func (lb *localBackend) finish(sid mvcc.SessionID, seq uint64, at mvcc.HLC) error {
	bt, err := lb.run(sid)
	if err != nil {
		return err
	}
	err = lb.guard(sid, "batch", func() error { return bt.finish(seq, at) })
	lb.mu.Lock()
	if lb.runs[sid] == bt {
		delete(lb.runs, sid)
	}
	lb.mu.Unlock()
	return lb.damaged(sid, err)
}

// damaged drops sid's index when err is a panic caught in a batch
// goroutine (guard only sees the caller's own panics).
func (lb *localBackend) damaged(sid mvcc.SessionID, err error) error {
	var pe *panicError
	if errors.As(err, &pe) {
		lb.log.Error("search: index damaged; dropping it for a rebuild", "session", sid.String(), "err", err)
		lb.discard(sid)
	}
	return err
}

func (lb *localBackend) abort(sid mvcc.SessionID) {
	lb.mu.Lock()
	bt := lb.runs[sid]
	delete(lb.runs, sid)
	lb.mu.Unlock()
	if bt != nil {
		_ = lb.damaged(sid, lb.guard(sid, "batch", bt.wait))
	}
}

func (lb *localBackend) drop(sid mvcc.SessionID) error {
	lb.mu.Lock()
	si := lb.sessions[sid]
	bt := lb.runs[sid]
	delete(lb.sessions, sid)
	delete(lb.runs, sid)
	lb.dropping[sid] = true
	lb.mu.Unlock()
	defer func() {
		lb.mu.Lock()
		delete(lb.dropping, sid)
		lb.mu.Unlock()
	}()
	if bt != nil {
		_ = lb.guard(sid, "batch", bt.wait)
	}
	if si != nil {
		if err := lb.guard(sid, "close", si.close); err != nil {
			lb.log.Warn("search: close dropped index", "session", sid.String(), "err", err)
		}
	}
	dir := filepath.Join(lb.dir, sid.String())
	if err := os.RemoveAll(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove index of session %s: %w", sid, err)
	}
	return nil
}

func (lb *localBackend) stats() BackendStats {
	return BackendStats{Indexed: lb.indexed.Load(), IdleRankers: lb.idleRankers.Load()}
}

func (lb *localBackend) close() error {
	lb.mu.Lock()
	if lb.closed {
		lb.mu.Unlock()
		return nil
	}
	lb.closed = true
	sessions := lb.sessions
	runs := lb.runs
	lb.sessions, lb.runs = map[mvcc.SessionID]*sessionIndex{}, map[mvcc.SessionID]*batcher{}
	lb.mu.Unlock()
	for sid, bt := range runs {
		_ = lb.guard(sid, "batch", bt.wait)
	}
	var errs []error
	for sid, si := range sessions {
		if err := lb.guard(sid, "close", si.close); err != nil {
			errs = append(errs, fmt.Errorf("close index of session %s: %w", sid, err))
		}
	}
	return errors.Join(errs...)
}
