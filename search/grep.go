package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/padfs/padfs/grep"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/trigram"
	"golang.org/x/sys/unix"
)

// GrepRequest is one `padfs grep` run: GNU grep's options over the
// session's tree as of AsOf.
type GrepRequest struct {
	grep.Options
	Session mvcc.SessionID
	// Operands are the PATHs; none searches the whole session and prints
	// paths relative to its root without "./", as `grep -r PAT` run at the
	// root does.
	Operands []grep.Operand
	AsOf     mvcc.HLC // search the state as of this HLC (0: latest)
	Out, Err io.Writer
}

// GrepStats summarizes a run; the exit code follows from it.
type GrepStats struct {
	Matched    bool // some line was selected
	Errors     int  // operands or files that could not be searched
	Degraded   bool // the index lagged (or was missing): the log's tail was searched directly
	Scanned    bool // every file was read (no usable trigram query, --asof, -v)
	Candidates int  // files read
	Files      int  // files considered
	// IndexQueries counts the queries asked of the index (of its worker
	// process, when it runs in one) to narrow the candidates.
	IndexQueries int
}

// ExitCode returns GNU grep's exit status for a run.
func (s GrepStats) ExitCode(quiet bool) int {
	switch {
	case s.Errors > 0 && !(quiet && s.Matched):
		return 2
	case s.Matched:
		return 0
	}
	return 1
}

// target is one file to report on, in output order, or an operand that
// could not be searched (failed: its message, if any, goes to req.Err in
// its place in the output).
type target struct {
	display string
	path    string
	n       *mvcc.Inode
	read    bool // a candidate: read and match it; else it has no match
	failed  bool
	warn    bool // failed with a warning only: the exit status stays
	diag    string
}

// Grep runs req against session req.Session. A returned error is fatal
// (bad pattern, unknown session); per-file problems are printed to
// req.Err and counted in the stats.
func (ix *Index) Grep(ctx context.Context, req GrepRequest) (GrepStats, error) {
	var stats GrepStats
	if req.ErrPrefix == "" {
		req.ErrPrefix = "padfs grep"
	}
	warn := func(msg string) { fmt.Fprintf(req.Err, "%s: warning: %s\n", req.ErrPrefix, msg) }
	run, err := grep.NewRun(&req.Options, warn)
	if err != nil || run.ReadsNothing() {
		return stats, err
	}
	lastSeq, at, err := ix.state(req.Session, req.AsOf)
	if err != nil {
		return stats, err
	}
	cand := ix.narrow(ctx, &req, run.Matcher(), lastSeq, at, &stats)
	// -c and -L report on every file; without candidates every file is read.
	needAll := req.Mode == grep.OutCount || req.Mode == grep.OutFilesWithout || cand == nil
	feed := func(emit func(target) bool) { ix.targets(req, at, cand, needAll, emit) }
	pb := &passedBy{ix: ix}
	if !needAll {
		pb.all = func(emit func(target) bool) { ix.targets(req, at, cand, true, emit) }
	}
	defer pb.close()
	out := run.NewOutput(ix.withName(&req, at), req.Out, req.Err)
	err = ix.run(ctx, run, out, feed, pb, &stats)
	stats.Matched, stats.Errors = out.Matched, out.Errors
	return stats, err
}

// state returns the state a grep searches: the session's last event, and
// the HLC asOf (0: that event's).
func (ix *Index) state(sid mvcc.SessionID, asOf mvcc.HLC) (lastSeq uint64, at mvcc.HLC, err error) {
	at = asOf
	err = ix.st.View(func(t *mvcc.ReadTx) error {
		if _, err := t.Header(sid); err != nil {
			return err
		}
		seq, h, err := t.LastEvent(sid)
		lastSeq = seq
		if at == 0 {
			at = h
		}
		return err
	})
	return lastSeq, at, err
}

// narrow returns the files that may match, from the index plus what the
// log's tail touched, or nil: read every file (no usable trigram query,
// --asof, -R, or no usable index). It sets stats.Scanned and Degraded.
func (ix *Index) narrow(ctx context.Context, req *GrepRequest, m *grep.Matcher, lastSeq uint64, at mvcc.HLC, stats *GrepStats) map[string]bool {
	var cand map[string]bool
	if req.AsOf == 0 && m.IndexQuery.Op != trigram.All && !req.Dereference {
		var err error
		cand, stats.Degraded, err = ix.candidates(req.Session, m, lastSeq, at, &stats.IndexQueries)
		if err != nil {
			// The index is derived data (and may be mid-rebuild: closed
			// under this reader; its worker may be restarting, which was
			// logged once): read everything instead, which is exact.
			level := slog.LevelWarn
			if errors.Is(err, bleve.ErrorIndexClosed) || errors.Is(err, errWorkerDown) || errors.Is(err, errIndexChanged) {
				level = slog.LevelDebug
			}
			ix.log.Log(ctx, level, "search: index unusable; scanning", "session", req.Session.String(), "err", err)
			cand = nil
		}
	}
	stats.Scanned = cand == nil
	if cand == nil {
		stats.Degraded = false // reading everything is exact and not a lag
	}
	return cand
}

// withName says whether file names head lines and counts: -H, -h, else
// as GNU grep decides (several operands, or a directory).
func (ix *Index) withName(req *GrepRequest, at mvcc.HLC) bool {
	switch {
	case req.Filename != 0:
		return req.Filename > 0
	case len(req.Operands) != 1:
		return true
	}
	// A link to a directory is a directory here, as for GNU grep.
	_, n, err := ix.resolve(req.Session, req.Operands[0].Path, at)
	return err == nil && n.IsDir()
}

// candidates returns the paths that may match (nil: search everything)
// and whether the index lagged behind the log; it counts the index
// queries it asks in *queries.
func (ix *Index) candidates(sid mvcc.SessionID, m *grep.Matcher, lastSeq uint64, at mvcc.HLC, queries *int) (map[string]bool, bool, error) {
	pos, err := ix.be.position(sid)
	seq := pos.Seq
	if err != nil || seq == 0 || seq > lastSeq {
		return nil, true, err
	}
	ch := newChanges()
	n := 0
	err = ix.st.View(func(t *mvcc.ReadTx) error {
		return t.Events(sid, seq, func(ev mvcc.Event) bool {
			if ev.Seq > lastSeq {
				return false
			}
			ch.add(ev)
			n++
			return n <= maxTailEvents && !ch.full
		})
	})
	if err != nil {
		return nil, true, err
	}
	if ch.full || n > maxTailEvents {
		return nil, true, nil // too far behind: read everything
	}
	ids, err := ix.be.ids(sid, idQuery{Tri: m.IndexQuery, Gen: pos.Gen})
	*queries++
	if err != nil {
		return nil, true, err
	}
	cand := make(map[string]bool, len(ids))
	for _, id := range ids {
		cand[id] = true
	}
	// The tail: everything it touched is read from the store.
	for p := range ch.paths {
		cand[p] = true
	}
	// The paths the index holds for the inodes the tail touched (a file
	// renamed or written through another link), in queries of up to
	// inoBatch inodes: one query per inode cost a round trip to the
	// worker each, 11 s for an untar's 17,000 events.
	var inos []string
	for ino, p := range ch.inos {
		if p != "" {
			cand[p] = true
		}
		inos = append(inos, strconv.FormatUint(uint64(ino), 10))
	}
	for len(inos) > 0 {
		n := min(len(inos), inoBatch)
		ids, err := ix.be.ids(sid, idQuery{Field: "ino", Term: inos[0], Terms: inos[1:n], Gen: pos.Gen})
		*queries++
		if err != nil {
			return nil, true, err
		}
		for _, id := range ids {
			cand[id] = true
		}
		inos = inos[n:]
	}
	for p := range ch.subtrees {
		err := ix.walk(sid, p, at, func(f fileRef) { cand[f.path] = true })
		if err != nil && !errors.Is(err, mvcc.ErrNotFound) && !errors.Is(err, mvcc.ErrNotDir) {
			return nil, true, err
		}
	}
	return cand, n > 0, nil
}

// inoBatch is the most inodes candidates asks the index for at once.
const inoBatch = 1024

func termQ(field, term string) query.Query {
	q := query.NewTermQuery(term)
	q.SetField(field)
	return q
}

// targets emits the files to report on, in GNU grep's order: operands as
// given, each walked in readdir (name) order, until emit returns false.
func (ix *Index) targets(req GrepRequest, at mvcc.HLC, cand map[string]bool, all bool, emit func(target) bool) {
	ops := req.Operands
	if len(ops) == 0 {
		ops = []grep.Operand{{Display: "", Path: ""}}
	}
	fail := func(display string, err error) bool {
		t := target{failed: true}
		if !req.Silent {
			t.diag = fmt.Sprintf("%s: %s: %s", req.ErrPrefix, display, errText(err))
		}
		return emit(t)
	}
	for _, op := range ops {
		// An empty Display is the working directory searched with no PATH:
		// GNU grep prints its files without a "./" prefix.
		root := op.Display == ""
		// Command-line symbolic links are followed, in any component
		// (and ".." after one is its target's parent, as in the kernel).
		p, n, err := ix.resolve(req.Session, op.Path, at)
		if err != nil {
			if !fail(op.Display, err) {
				return
			}
			continue
		}
		switch {
		case n.IsRegular():
			if !emit(target{display: op.Display, path: p, n: n, read: cand == nil || cand[p]}) {
				return
			}
			continue
		case !n.IsDir():
			continue // devices, fifos: skipped
		}
		// A directory: display paths are op.Display + "/" + rel.
		prefix := strings.TrimRight(op.Display, "/")
		if op.Display != "" && prefix == "" {
			prefix = "/"
		}
		join := func(rel string) string {
			switch {
			case root:
				return rel
			case prefix == "/":
				return "/" + rel
			}
			return prefix + "/" + rel
		}
		base := dirPrefix(p)
		keepDir := func(fp string) bool { // fp and the directories above it
			for _, d := range strings.Split(fp[len(base):], "/") {
				if matchAny(req.ExcludeDir, d) {
					return false
				}
			}
			return true
		}
		keep := func(fp string) bool {
			dir, name := path.Split(fp)
			if len(dir) > len(base) && !keepDir(dir[:len(dir)-1]) {
				return false
			}
			if len(req.Include) > 0 && !matchAny(req.Include, name) {
				return false
			}
			return !matchAny(req.Exclude, name)
		}
		if all {
			more := true
			err := ix.walkFiles(req.Session, p, at, req.Dereference, func(fp string, n *mvcc.Inode, ferr error) bool {
				loop := errors.Is(ferr, errDirLoop)
				switch {
				case ferr != nil && (loop && keepDir(fp) || !loop && keep(fp)):
					// A link met by -R that cannot be followed: its message
					// in its place, as GNU grep prints it.
					t := target{failed: true, warn: loop}
					if !req.Silent {
						t.diag = fmt.Sprintf("%s: %s: %s", req.ErrPrefix, join(fp[len(base):]), errText(ferr))
					}
					more = emit(t)
				case ferr == nil && keep(fp):
					more = emit(target{display: join(fp[len(base):]), path: fp, n: n, read: cand == nil || cand[fp]})
				}
				return more
			})
			if err != nil {
				more = fail(op.Display, err)
			}
			if !more {
				return
			}
			continue
		}
		var paths []string
		for c := range cand {
			if strings.HasPrefix(c, base) && c != p && keep(c) {
				paths = append(paths, c)
			}
		}
		sort.Slice(paths, func(i, j int) bool { return walkLess(paths[i], paths[j]) })
		for _, fp := range paths {
			n, err := ix.st.Walk(req.Session, fp, at)
			if err != nil || !n.IsRegular() {
				continue // gone, or no longer a file, since the index saw it
			}
			if !emit(target{display: join(fp[len(base):]), path: fp, n: n, read: true}) {
				return
			}
		}
	}
}

// walkLess orders paths as a depth-first walk in name order visits them:
// component by component ("a/x" before "a-b", since the walk finishes
// directory "a" first).
func walkLess(a, b string) bool {
	for {
		i, j := strings.IndexByte(a, '/'), strings.IndexByte(b, '/')
		ca, cb := a, b
		if i >= 0 {
			ca = a[:i]
		}
		if j >= 0 {
			cb = b[:j]
		}
		if ca != cb {
			return ca < cb
		}
		if i < 0 || j < 0 {
			return i < 0 && j >= 0
		}
		a, b = a[i+1:], b[j+1:]
	}
}

func matchAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// errText renders a store error as GNU grep words it.
func errText(err error) string {
	switch {
	case errors.Is(err, mvcc.ErrNotFound):
		return "No such file or directory"
	case errors.Is(err, mvcc.ErrNotDir):
		return "Not a directory"
	case errors.Is(err, unix.ELOOP):
		return "Too many levels of symbolic links"
	case errors.Is(err, errDirLoop):
		return "warning: recursive directory loop"
	}
	return err.Error()
}

// errDirLoop is a directory met again inside itself by grep -R (through a
// symbolic link): GNU grep warns and goes on, and the exit status stays.
var errDirLoop = errors.New("recursive directory loop")

// resolve looks p (session-relative) up as the kernel looks a path up in
// the mount: symbolic links are followed in every component, the last one
// too (up to 40), and ".." is the physical parent. A link whose target
// leaves the session is an UnsupportedError naming the link. It returns
// the path without links and its inode.
func (ix *Index) resolve(sid mvcc.SessionID, p string, at mvcc.HLC) (string, *mvcc.Inode, error) {
	type comp struct {
		name         string
		link, target string // the link whose target this came from
	}
	type level struct {
		name string
		n    *mvcc.Inode
	}
	split := func(p, link, target string) []comp {
		var cs []comp
		for _, c := range strings.Split(p, "/") {
			if c != "" && c != "." {
				cs = append(cs, comp{c, link, target})
			}
		}
		return cs
	}
	outside := func(c comp) error {
		if c.link == "" {
			return fmt.Errorf("%w: %s is outside the session", mvcc.ErrNotFound, p)
		}
		return &grep.UnsupportedError{Construct: "symbolic link", Why: fmt.Sprintf("%s points outside the session (%s)", c.link, c.target)}
	}
	var stack []level
	pathOf := func(extra string) string {
		parts := make([]string, 0, len(stack))
		for _, l := range stack[1:] {
			parts = append(parts, l.name)
		}
		if extra != "" {
			parts = append(parts, extra)
		}
		return strings.Join(parts, "/")
	}
	err := ix.st.View(func(t *mvcc.ReadTx) error {
		h, err := t.Header(sid)
		if err != nil {
			return err
		}
		root, err := t.Inode(sid, h.Root, at)
		if err != nil {
			return err
		}
		stack = []level{{"", root}}
		todo := split(p, "", "")
		for hops := 0; len(todo) > 0; {
			c := todo[0]
			todo = todo[1:]
			if c.name == ".." {
				if len(stack) == 1 {
					return outside(c)
				}
				stack = stack[:len(stack)-1]
				continue
			}
			cur := stack[len(stack)-1].n
			if !cur.IsDir() {
				return fmt.Errorf("%w: %s", mvcc.ErrNotDir, p)
			}
			d, err := t.Lookup(sid, cur.Ino, c.name, at)
			if err != nil {
				return err
			}
			n, err := t.Inode(sid, d.Ino, at)
			if err != nil {
				return err
			}
			if !n.IsSymlink() {
				stack = append(stack, level{c.name, n})
				continue
			}
			if hops++; hops > 40 {
				return fmt.Errorf("%s: %w", p, unix.ELOOP)
			}
			link := pathOf(c.name)
			if strings.HasPrefix(n.Target, "/") {
				return outside(comp{link: link, target: n.Target})
			}
			todo = append(split(n.Target, link, n.Target), todo...)
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	return pathOf(""), stack[len(stack)-1].n, nil
}

// walkFiles calls fn for every regular file at or below dir in walk order,
// until fn returns false. Without deref it is walkStream (symbolic links
// are skipped, as by grep -r). With deref (grep -R) links are followed: a
// link to a file is that file under the link's name, a link to a directory
// is walked under the link's name; a link that cannot be followed
// (dangling, a cycle, out of the session) and a directory met again inside
// itself are passed to fn as an error in their place.
func (ix *Index) walkFiles(sid mvcc.SessionID, dir string, at mvcc.HLC, deref bool, fn func(string, *mvcc.Inode, error) bool) error {
	if !deref {
		return ix.walkStream(sid, dir, at, func(p string, n *mvcc.Inode) bool { return fn(p, n, nil) })
	}
	root, err := ix.st.Walk(sid, dir, at)
	switch {
	case err != nil:
		return err
	case root.IsRegular():
		fn(cleanPath(dir), root, nil)
		return nil
	case !root.IsDir():
		return nil
	}
	// prefix is the walk's path (through links), real the directory's own
	// path (where its links' relative targets start); above holds the
	// directories of the path walked, for the loop check.
	var rec func(ino mvcc.Ino, prefix, real string, above []mvcc.Ino) (bool, error)
	rec = func(ino mvcc.Ino, prefix, real string, above []mvcc.Ino) (bool, error) {
		var ents []dirEntry
		if err := ix.st.View(func(t *mvcc.ReadTx) error {
			var err error
			ents, err = readDir(t, sid, ino, prefix, at, len(above))
			return err
		}); err != nil {
			return false, err
		}
		for _, e := range ents {
			p, n, rp := prefix+e.name, e.n, real+e.name
			if n.IsSymlink() {
				var err error
				if rp, n, err = ix.resolve(sid, rp, at); err != nil {
					if !fn(p, nil, err) {
						return false, nil
					}
					continue
				}
			}
			switch {
			case n.IsRegular():
				if !fn(p, n, nil) {
					return false, nil
				}
			case n.IsDir() && slices.Contains(above, n.Ino):
				if !fn(p, nil, errDirLoop) {
					return false, nil
				}
			case n.IsDir():
				if more, err := rec(n.Ino, p+"/", dirPrefix(rp), append(above[:len(above):len(above)], n.Ino)); !more || err != nil {
					return false, err
				}
			}
		}
		return true, nil
	}
	_, err = rec(root.Ino, dirPrefix(dir), dirPrefix(dir), []mvcc.Ino{root.Ino})
	return err
}

// job is one target of a run and, once read and scanned, its result.
type job struct {
	t   target
	res chan scanResult
}

type scanResult struct {
	res  grep.FileResult
	err  error
	data *[]byte // the content read, back to readBufs once printed
}

// run reads and scans the targets feed emits, in parallel, and prints
// them in order to out. The feed (the tree walk) runs alongside: files
// are scanned while later directories are still being listed. It
// returns when every goroutine it started has ended.
func (ix *Index) run(ctx context.Context, run *grep.Run, out *grep.Output, feed func(emit func(target) bool), pb *passedBy, stats *GrepStats) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs first: ends the feed and the readers
	jobs := ix.startReaders(ctx, &wg, run, feed)
	for j := range jobs {
		var r scanResult
		select {
		case r = <-j.res:
		case <-ctx.Done():
		}
		if err := ctx.Err(); err != nil {
			return err // the caller's: nothing more is printed
		}
		t := j.t
		if t.failed {
			if err := out.Failed(t.diag, t.warn); err != nil {
				return err
			}
			continue
		}
		stats.Files++
		if t.read {
			stats.Candidates++
		}
		if r.err != nil {
			if err := out.FileError(t.display, r.err); err != nil {
				return err
			}
			continue
		}
		switch {
		case !t.read:
			pb.add(t)
		case r.res.LateNul:
			// Where its NUL is seen depends on the buffer the files
			// before it grew.
			if err := pb.grow(ctx, t, out); err != nil {
				return err
			}
		}
		var data []byte
		if r.data != nil {
			data = *r.data
		}
		done, err := out.File(ctx, t.display, data, r.res)
		putReadBuf(r.data) // its lines are copied out by now
		if done || err != nil {
			return err
		}
	}
	return out.Flush()
}

// startReaders starts the feed and GOMAXPROCS readers: it returns the
// jobs in output order, each answered once its file is read and
// scanned (at once for a target not read). The channel bounds how far
// reading runs ahead of printing.
func (ix *Index) startReaders(ctx context.Context, wg *sync.WaitGroup, run *grep.Run, feed func(emit func(target) bool)) <-chan *job {
	jobs := make(chan *job, 256)
	work := make(chan *job, 256)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(work)
		defer close(jobs)
		feed(func(t target) bool {
			j := &job{t: t, res: make(chan scanResult, 1)}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return false
			}
			if t.failed || !t.read {
				j.res <- scanResult{}
				return true
			}
			select {
			case work <- j:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	for w := 0; w < runtime.GOMAXPROCS(0); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				j.res <- ix.scan(ctx, run, j.t.n)
			}
		}()
	}
	return jobs
}

// scan reads one file and scans it.
func (ix *Index) scan(ctx context.Context, run *grep.Run, n *mvcc.Inode) scanResult {
	if err := ctx.Err(); err != nil {
		return scanResult{err: err}
	}
	bp, err := ix.readFile(n)
	if err != nil {
		return scanResult{err: err}
	}
	res, err := run.Scan(ctx, *bp)
	return scanResult{res, err, bp}
}

// readBufs recycles the buffers files are read into: a scan reads every
// file of the tree, and fresh buffers made garbage collection a tenth of
// its time.
var readBufs sync.Pool

// readFile reads n's content into a buffer from readBufs.
func (ix *Index) readFile(n *mvcc.Inode) (*[]byte, error) {
	bp, _ := readBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	data, err := ix.st.ReadAllInto(n, *bp)
	if err != nil {
		putReadBuf(bp)
		return nil, err
	}
	*bp = data
	return bp, nil
}

// putReadBuf returns a buffer to readBufs (not the very large ones).
func putReadBuf(bp *[]byte) {
	if bp != nil && cap(*bp) <= 4<<20 {
		readBufs.Put(bp)
	}
}

// passedBy derives, when it matters, how far the files a run passed by
// without reading them (they cannot match) grew GNU grep's read buffer
// (see grep.Output.Grow). Only a file read with a late NUL byte needs
// it, so they are read then, and only those large enough to grow it.
type passedBy struct {
	ix    *Index
	large []*mvcc.Inode // passed by, large enough, not read yet
	// all lists every file in output order when the run's feed emits
	// only the candidates; next pulls from it up to the file that needs
	// the growth.
	all  func(emit func(target) bool)
	next func() (target, bool)
	stop func()
}

// add records a file passed by.
func (pb *passedBy) add(t target) {
	if grep.MayGrow(t.n.Size) {
		pb.large = append(pb.large, t.n)
	}
}

// grow tells out how far the files before t grew the buffer.
func (pb *passedBy) grow(ctx context.Context, t target, out *grep.Output) error {
	if pb.all != nil && pb.next == nil {
		pb.next, pb.stop = iter.Pull(pb.all)
	}
	for pb.next != nil {
		w, ok := pb.next()
		if !ok || w.path == t.path && w.display == t.display {
			if !ok {
				pb.close()
			}
			break
		}
		if !w.failed && !w.read {
			pb.add(w)
		}
	}
	for len(pb.large) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := pb.large[0]
		pb.large = pb.large[1:]
		bp, err := pb.ix.readFile(n)
		if err != nil {
			continue // unreadable: no growth known (grep reports no error for a file it need not read)
		}
		out.Grow(grep.BufferGrowth(*bp))
		putReadBuf(bp)
	}
	return nil
}

// close ends the walk of every file, if one was started.
func (pb *passedBy) close() {
	if pb.stop != nil {
		pb.stop()
	}
	pb.next, pb.stop, pb.all = nil, nil, nil
}

// GrepOutput returns what reading the mount's .grep/NAME file gives:
// what `padfs grep -rn ...` run at the root of session sid prints for the
// command line NAME stands for (see grep.ParseFileName), standard output
// then any diagnostics. A bad name or pattern is an mvcc.ErrInvalid error
// (EINVAL to the reader). Once ctx is done (the reader's request was
// interrupted) it stops and returns ctx's error.
func (ix *Index) GrepOutput(ctx context.Context, sid mvcc.SessionID, name string) ([]byte, error) {
	o, err := grep.ParseFileName(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", mvcc.ErrInvalid, err)
	}
	var out, errb bytes.Buffer
	req := GrepRequest{Options: o, Session: sid, Out: &out, Err: &errb}
	if _, err := ix.Grep(ctx, req); err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("grep stopped: %w", ctx.Err())
		}
		return nil, fmt.Errorf("%w: %v", mvcc.ErrInvalid, err)
	}
	out.Write(errb.Bytes())
	return out.Bytes(), nil
}
