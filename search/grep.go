package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/padfs/padfs/mvcc"
)

// OutputMode is what grep prints per file.
type OutputMode int

const (
	OutLines        OutputMode = iota // matching lines (default)
	OutCount                          // -c
	OutFilesWith                      // -l
	OutFilesWithout                   // -L
	OutQuiet                          // -q
)

// Operand is a PATH argument: Display is how GNU grep would print it (the
// argument as typed), Path the session-relative path it names ("" for
// the session root).
type Operand struct {
	Display string
	Path    string
}

// GrepRequest is one `padfs grep` run.
type GrepRequest struct {
	Session     mvcc.SessionID
	Patterns    []string // one pattern per element (GNU's newline-separated list, split)
	Match       MatchOptions
	Mode        OutputMode
	LineNumbers bool // -n
	// Filename: 1 always print file names (-H), -1 never (-h), 0 as GNU
	// grep decides (several operands, or a directory).
	Filename int
	// Operands are the PATHs; none searches the whole session and prints
	// paths relative to its root without "./", as `grep -r PAT` run at the
	// root does.
	Operands    []Operand
	Include     []string // --include GLOB (file base names)
	Exclude     []string // --exclude GLOB (file base names)
	ExcludeDir  []string // --exclude-dir GLOB (directory base names)
	AsOf        mvcc.HLC // search the state as of this HLC (0: latest)
	Dereference bool     // -R: follow symbolic links met while recursing
	Out, Err    io.Writer
	Silent      bool // -s: no messages about missing or unreadable files
	// ErrPrefix starts diagnostics ("padfs grep").
	ErrPrefix string

	// Output options, as GNU grep's.
	OnlyMatching  bool // -o: print each match, not its line
	MaxCount      int  // -m: stop after this many selected lines per file (with MaxSet)
	MaxSet        bool // -m given (-m 0 reads nothing)
	Before, After int  // -B, -A (and -C, -NUM): context lines
	Context       bool // a context option was given (even 0): groups are separated
	// GroupSep replaces "--" between context groups (--group-separator);
	// NoGroupSep leaves it out (--no-group-separator).
	GroupSep     *string
	NoGroupSep   bool
	Text         bool // -a: binary files are text
	SkipBinary   bool // -I: a binary file has no match (from where its NUL is read)
	ByteOffset   bool // -b: print byte offsets
	InitialTab   bool // -T: a tab before the line's content
	Color        bool // --color=always: GNU's SGR sequences (default GREP_COLORS)
	Null         bool // -Z: a NUL byte after file names
	NullData     bool // -z: lines end in NUL bytes, not newlines
	LineBuffered bool // --line-buffered: write out every line at once
}

// GrepStats summarizes a run; the exit code follows from it.
type GrepStats struct {
	Matched    bool // some line was selected
	Errors     int  // operands or files that could not be searched
	Degraded   bool // the index lagged (or was missing): the log's tail was searched directly
	Scanned    bool // every file was read (no usable trigram query, --asof, -v)
	Candidates int  // files read
	Files      int  // files considered
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
	req.Match.NullData = req.NullData
	m, err := Compile(req.Patterns, req.Match, warn)
	if err != nil {
		return stats, err
	}
	if req.MaxSet && req.MaxCount == 0 {
		return stats, nil // GNU grep -m 0 reads nothing and exits 1
	}
	// The state searched: as of req.AsOf, or the session's last commit.
	var lastSeq uint64
	at := req.AsOf
	err = ix.st.View(func(t *mvcc.ReadTx) error {
		if _, err := t.Header(req.Session); err != nil {
			return err
		}
		seq, h, err := t.LastEvent(req.Session)
		lastSeq = seq
		if at == 0 {
			at = h
		}
		return err
	})
	if err != nil {
		return stats, err
	}
	// Candidates from the index, plus what the log's tail touched.
	var cand map[string]bool
	if req.AsOf == 0 && m.IndexQuery.Op != QAll && !req.Dereference {
		cand, stats.Degraded, err = ix.candidates(req.Session, m, lastSeq, at)
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
	needAll := req.Mode == OutCount || req.Mode == OutFilesWithout || cand == nil
	if !needAll && req.Mode == OutLines && !req.Text && !req.NullData && len(ix.growth(req.Session)) > 0 {
		// A file with a long line grows GNU grep's buffer, and a later
		// file's late NUL may then be read at once (binary from its first
		// line): files that are no candidates must pass by too (not
		// read) so that run sees their growth.
		needAll = true
	}
	feed := func(emit func(target) bool) { ix.targets(req, at, cand, needAll, emit) }
	withName := req.Filename > 0
	if req.Filename == 0 {
		withName = len(req.Operands) != 1
		if len(req.Operands) == 1 {
			// A link to a directory is a directory here, as for GNU grep.
			_, n, err := ix.resolve(req.Session, req.Operands[0].Path, at)
			withName = err == nil && n.IsDir()
		}
	}
	mode := ModeLines
	switch req.Mode {
	case OutCount:
		mode = ModeCount
	case OutFilesWith, OutFilesWithout, OutQuiet:
		mode = ModeFiles
	}
	return stats, ix.run(ctx, req, m, mode, withName, feed, &stats)
}

// candidates returns the paths that may match (nil: search everything)
// and whether the index lagged behind the log.
func (ix *Index) candidates(sid mvcc.SessionID, m *Matcher, lastSeq uint64, at mvcc.HLC) (map[string]bool, bool, error) {
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
	for ino, p := range ch.inos {
		if p != "" {
			cand[p] = true
		}
		ids, err := ix.be.ids(sid, idQuery{Field: "ino", Term: strconv.FormatUint(uint64(ino), 10), Gen: pos.Gen})
		if err != nil {
			return nil, true, err
		}
		for _, id := range ids {
			cand[id] = true
		}
	}
	for p := range ch.subtrees {
		err := ix.walk(sid, p, at, func(f fileRef) { cand[f.path] = true })
		if err != nil && !errors.Is(err, mvcc.ErrNotFound) && !errors.Is(err, mvcc.ErrNotDir) {
			return nil, true, err
		}
	}
	return cand, n > 0, nil
}

func termQ(field, term string) query.Query {
	q := query.NewTermQuery(term)
	q.SetField(field)
	return q
}

// bleveQuery turns a (folded) trigram query into a bleve query.
func bleveQuery(q *Query) query.Query {
	switch q.Op {
	case QAll:
		return query.NewMatchAllQuery()
	case QNone:
		return query.NewMatchNoneQuery()
	}
	var subs []query.Query
	for _, t := range q.Trigram {
		subs = append(subs, termQ("tri", t))
	}
	for _, s := range q.Sub {
		subs = append(subs, bleveQuery(s))
	}
	if q.Op == QAnd {
		return query.NewConjunctionQuery(subs)
	}
	return query.NewDisjunctionQuery(subs)
}

// targets emits the files to report on, in GNU grep's order: operands as
// given, each walked in readdir (name) order, until emit returns false.
func (ix *Index) targets(req GrepRequest, at mvcc.HLC, cand map[string]bool, all bool, emit func(target) bool) {
	ops := req.Operands
	if len(ops) == 0 {
		ops = []Operand{{Display: "", Path: ""}}
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
	case errors.Is(err, syscall.ELOOP):
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
		return &UnsupportedError{"symbolic link", fmt.Sprintf("%s points outside the session (%s)", c.link, c.target)}
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
				return fmt.Errorf("%s: %w", p, syscall.ELOOP)
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

// run reads and matches the targets feed emits, in parallel, and prints
// in order. The feed (the tree walk) runs alongside: files are matched
// while later directories are still being listed.
func (ix *Index) run(ctx context.Context, req GrepRequest, m *Matcher, mode Mode, withName bool, feed func(emit func(target) bool), stats *GrepStats) error {
	type result struct {
		res  FileResult
		err  error
		data *[]byte // the content read, back to readBufs once printed
	}
	type job struct {
		t   target
		res chan result
	}
	opts := scanOpts{max: req.MaxCount, keepBad: true, text: req.Text || req.NullData, skipBinary: req.SkipBinary}
	if !req.MaxSet || req.Mode == OutQuiet || req.Mode == OutFilesWith || req.Mode == OutFilesWithout {
		opts.max = -1 // one line decides
	}
	scan := func(data []byte, bufSize int) (FileResult, error) {
		return m.grepFile(data, mode, bufSize, opts)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel() // runs first: ends the feed and the workers
	// jobs is the output order and bounds the files read ahead of it.
	jobs := make(chan *job, 256)
	work := make(chan *job, 256)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(work)
		defer close(jobs)
		feed(func(t target) bool {
			j := &job{t: t, res: make(chan result, 1)}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return false
			}
			if t.failed || !t.read {
				j.res <- result{}
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
				if ctx.Err() != nil {
					j.res <- result{err: ctx.Err()}
					continue
				}
				bp, err := ix.readFile(j.t.n)
				if err != nil {
					j.res <- result{err: err}
					continue
				}
				data := *bp
				if req.NullData {
					swapNul(data) // NUL-terminated records become lines
				}
				// A file the line prefilter scans (lineNeedle) skips the
				// whole-file one.
				if m.lineNeedle == "" && !m.MayMatch(data) {
					// No match possible: GNU grep would read it and print
					// nothing; only its long lines still matter (see below).
					_, grown := readModel(data, grepBufSize)
					j.res <- result{res: FileResult{Grown: grown}, data: bp}
					continue
				}
				r, err := scan(data, grepBufSize)
				j.res <- result{r, err, bp}
			}
		}()
	}
	bufSize := grepBufSize
	var growth map[string]int // loaded at the first file not read
	growthLoaded := false
	var buf bytes.Buffer
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		_, err := req.Out.Write(buf.Bytes())
		buf.Reset()
		return err
	}
	pr := newPrinter(&req, m, withName, &buf, flush)
	for j := range jobs {
		t := j.t
		var r result
		select {
		case r = <-j.res:
		case <-ctx.Done():
			return ctx.Err()
		}
		if t.failed {
			if !t.warn {
				stats.Errors++
			}
			if t.diag != "" {
				if err := flush(); err != nil {
					return err
				}
				fmt.Fprintln(req.Err, t.diag)
			}
			continue
		}
		stats.Files++
		if t.read {
			stats.Candidates++
		}
		if r.err != nil {
			var ue *UnsupportedError
			if errors.As(r.err, &ue) {
				return r.err
			}
			stats.Errors++
			flush()
			fmt.Fprintf(req.Err, "%s: %s: %v\n", req.ErrPrefix, t.display, r.err)
			continue
		}
		fr := r.res
		// GNU grep's read buffer persists across files: a late NUL's
		// verdict depends on the long lines of the files before it.
		if t.read && fr.LateNul && bufSize != grepBufSize {
			data, err := ix.st.ReadAll(t.n)
			if err == nil {
				fr, err = scan(data, bufSize)
				if r.data != nil {
					*r.data = data // the printer reads the lines from it
				}
			}
			if err != nil {
				return err
			}
		}
		if t.read {
			bufSize = max(bufSize, fr.Grown)
		} else {
			if !growthLoaded {
				growth, growthLoaded = ix.growth(req.Session), true
			}
			if g := growth[t.path]; g > 0 {
				bufSize = max(bufSize, g)
			}
		}
		if fr.Count > 0 {
			stats.Matched = true
		}
		switch req.Mode {
		case OutQuiet:
			if stats.Matched {
				return flush()
			}
		case OutFilesWith:
			if fr.Count > 0 {
				pr.nameLine(t.display)
			}
		case OutFilesWithout:
			if fr.Count == 0 {
				pr.nameLine(t.display)
			}
		case OutCount:
			pr.count(t.display, fr.Count)
		default:
			var data []byte
			if r.data != nil {
				data = *r.data
			}
			binary := len(fr.Lines) > 0 && pr.file(t.display, data, fr) || fr.Binary
			if pr.err != nil {
				return pr.err
			}
			if binary {
				if err := flush(); err != nil {
					return err
				}
				fmt.Fprintf(req.Err, "grep: %s: binary file matches\n", t.display)
			}
		}
		if buf.Len() > 64<<10 {
			if err := flush(); err != nil {
				return err
			}
		}
		putReadBuf(r.data) // its lines are copied to buf by now
	}
	return flush()
}

// swapNul swaps NUL and newline bytes in place: grep -z's records are
// then lines, and the printer swaps them back.
func swapNul(data []byte) {
	for i, c := range data {
		switch c {
		case 0:
			data[i] = '\n'
		case '\n':
			data[i] = 0
		}
	}
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

// growth returns, for files not read, the GNU grep buffer size their long
// lines grow to (recorded in the index): it matters when a later file read
// has a NUL past the first buffer.
func (ix *Index) growth(sid mvcc.SessionID) map[string]int {
	out, err := ix.be.grow(sid)
	if err != nil {
		return nil
	}
	return out
}

// GrepOutput returns what reading the mount's .grep/NAME file gives:
// what `padfs grep -rn ...` run at the root of session sid prints for the
// command line NAME stands for (see ParseGrepFileName), standard output
// then any diagnostics. A bad name or pattern is an mvcc.ErrInvalid error
// (EINVAL to the reader).
func (ix *Index) GrepOutput(sid mvcc.SessionID, name string) ([]byte, error) {
	req, err := ParseGrepFileName(name)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", mvcc.ErrInvalid, err)
	}
	var out, errb bytes.Buffer
	req.Session, req.Out, req.Err = sid, &out, &errb
	if _, err := ix.Grep(context.Background(), req); err != nil {
		return nil, fmt.Errorf("%w: %v", mvcc.ErrInvalid, err)
	}
	out.Write(errb.Bytes())
	return out.Bytes(), nil
}

// GNU grep's default GREP_COLORS and SGR sequences.
const (
	colorMatch    = "01;31" // ms, mc
	colorFile     = "35"    // fn
	colorLineNum  = "32"    // ln
	colorByteOff  = "32"    // bn
	colorSep      = "36"    // se
	sgrEnd        = "\x1b[m\x1b[K"
	defaultSepStr = "--"
)

// printer writes the lines of files as GNU grep 3.8 does (grep.c's
// prtext, prpending, prline): context before and after selected lines,
// group separators between groups that are not adjacent, -o's matches,
// the line head (-H -n -b -T -Z) and --color's marks. It keeps, from file
// to file, whether anything was printed (no separator before the first
// group).
type printer struct {
	req      *GrepRequest
	m        *Matcher
	withName bool
	ctx      bool // -A, -B or -C given (even 0): groups are separated
	sep      string
	noSep    bool
	used     bool
	eol      byte
	buf      *bytes.Buffer
	flush    func() error
	err      error // Spans' error (an unsupported combination), or a write error

	// per file
	display       string
	data          []byte
	fr            FileResult
	invalid       bool
	lastout       int // offset past the last line printed; -1: none in this file
	pending       int // trailing context lines still to print
	numOff, num   int // line num starts at offset numOff
	width         int // -T: the width of numbers
	bad           bool
	before, after int
}

func newPrinter(req *GrepRequest, m *Matcher, withName bool, buf *bytes.Buffer, flush func() error) *printer {
	p := &printer{req: req, m: m, withName: withName, buf: buf, flush: flush, eol: '\n',
		ctx: req.Context, sep: defaultSepStr, noSep: req.NoGroupSep,
		before: max(req.Before, 0), after: max(req.After, 0)}
	if req.GroupSep != nil {
		p.sep = *req.GroupSep
	}
	if req.NullData {
		p.eol = 0
	}
	return p
}

// sgr writes text in color (with --color), as file content (-z swaps
// its newlines back) or not.
func (p *printer) sgr(color string, text []byte, content bool) {
	if p.req.Color {
		p.buf.WriteString("\x1b[" + color + "m\x1b[K")
	}
	if content {
		p.write(text)
	} else {
		p.buf.Write(text)
	}
	if p.req.Color {
		p.buf.WriteString(sgrEnd)
	}
}

// write copies content bytes (with -z, the newlines swapped back).
func (p *printer) write(text []byte) {
	if !p.req.NullData {
		p.buf.Write(text)
		return
	}
	for _, c := range text {
		switch c {
		case '\n':
			c = 0
		case 0:
			c = '\n'
		}
		p.buf.WriteByte(c)
	}
}

func (p *printer) sepChar(c byte) {
	if p.req.Color {
		p.buf.WriteString("\x1b[" + colorSep + "m\x1b[K")
		p.buf.WriteByte(c)
		p.buf.WriteString(sgrEnd)
		return
	}
	p.buf.WriteByte(c)
}

// name writes a file name and what follows it: sep, or a NUL with -Z.
func (p *printer) name(display string, sep byte) {
	p.sgr(colorFile, []byte(display), false)
	if p.req.Null {
		p.buf.WriteByte(0)
	} else {
		p.sepChar(sep)
	}
}

// nameLine writes a file name alone on its line (-l, -L).
func (p *printer) nameLine(display string) {
	p.sgr(colorFile, []byte(display), false)
	if p.req.Null {
		p.buf.WriteByte(0)
	} else {
		p.buf.WriteByte('\n')
	}
	p.lineDone()
}

// count writes -c's line.
func (p *printer) count(display string, n int) {
	if p.withName {
		p.name(display, ':')
	}
	p.buf.WriteString(strconv.Itoa(n))
	p.buf.WriteByte('\n')
	p.lineDone()
}

func (p *printer) lineDone() {
	if p.req.LineBuffered && p.err == nil {
		p.err = p.flush()
	}
}

// lineEnd returns the end of the line at s (its terminator's offset, or
// the end of the data). Past the text part NUL bytes end lines too.
func (p *printer) lineEnd(s int) int {
	d := p.data[s:]
	e := bytes.IndexByte(d, '\n')
	if s >= p.fr.TextEnd {
		if z := bytes.IndexByte(d, 0); z >= 0 && (e < 0 || z < e) {
			e = z
		}
	}
	if e < 0 {
		return len(p.data)
	}
	return s + e
}

// lineNum returns the number of the line starting at s (s at or after
// the last one asked for).
func (p *printer) lineNum(s int) int {
	if s > p.numOff {
		t := min(s, p.fr.TextEnd)
		if t > p.numOff {
			p.num += bytes.Count(p.data[p.numOff:t], []byte{'\n'})
		}
		for _, c := range p.data[max(p.numOff, t):s] {
			if c == '\n' || c == 0 {
				p.num++
			}
		}
		p.numOff = s
	}
	return p.num
}

// head writes the line head: file name, line number, byte offset, tab.
func (p *printer) head(lineStart, off, n int, sep byte) {
	if p.withName {
		p.name(p.display, sep)
	}
	num := func(v int, color string) {
		s := strconv.Itoa(v)
		if len(s) < p.width {
			s = strings.Repeat(" ", p.width-len(s)) + s
		}
		p.sgr(color, []byte(s), false)
		p.sepChar(sep)
	}
	if p.req.LineNumbers {
		num(p.lineNum(lineStart), colorLineNum)
	}
	if p.req.ByteOffset {
		num(off, colorByteOff)
	}
	if p.req.InitialTab && (p.withName || p.req.LineNumbers || p.req.ByteOffset) && n != 0 {
		p.buf.WriteByte('\t')
	}
}

// prline prints the line [s, e) (e its terminator) as a selected (':')
// or context ('-') line. A line (or with -o a match) with an encoding
// error is not printed, and the file then reports "binary file matches";
// as in GNU grep, lastout then stays where it was.
func (p *printer) prline(s, e int, sep byte) {
	line := p.data[s:e]
	matching := (sep == ':') != p.m.opts.Invert
	var spans [][2]int
	if matching && (p.req.OnlyMatching || p.req.Color) {
		var err error
		if spans, err = p.m.Spans(line, p.invalid); err != nil && p.err == nil {
			p.err = err
		}
	}
	if p.req.OnlyMatching {
		osep := byte(':')
		if p.m.opts.Invert {
			osep = '-'
		}
		for _, sp := range spans {
			mt := line[sp[0]:sp[1]]
			if !p.req.Text && !utf8.Valid(mt) {
				p.bad = true
				return
			}
			p.head(s, s+sp[0], len(mt), osep)
			p.sgr(colorMatch, mt, true)
			p.buf.WriteByte(p.eol)
			p.lineDone()
		}
		p.lastout = e + 1
		return
	}
	if !p.req.Text && !utf8.Valid(line) {
		p.bad = true
		return
	}
	p.head(s, s, len(line), sep)
	cur := 0
	for _, sp := range spans {
		p.write(line[cur:sp[0]])
		p.sgr(colorMatch, line[sp[0]:sp[1]], true)
		cur = sp[1]
	}
	p.write(line[cur:])
	p.buf.WriteByte(p.eol)
	p.lastout = e + 1
	p.lineDone()
}

// prpending prints pending trailing context up to lim.
func (p *printer) prpending(lim int) {
	if p.lastout < 0 {
		p.lastout = 0
	}
	for ; p.pending > 0 && p.lastout < lim; p.pending-- {
		p.prline(p.lastout, p.lineEnd(p.lastout), '-')
	}
}

// file prints one file's selected lines and their context; it reports
// whether the file says "binary file matches".
func (p *printer) file(display string, data []byte, fr FileResult) bool {
	p.display, p.data, p.fr = display, data, fr
	p.invalid = !utf8.Valid(data)
	p.lastout, p.pending, p.numOff, p.num, p.bad = -1, 0, 0, 1, false
	p.width = 0
	if p.req.InitialTab {
		// GNU sizes numbers by the file's size (plus one with -n).
		n := len(data)
		if p.req.LineNumbers {
			n++
		}
		p.width = len(strconv.Itoa(n))
	}
	prevEnd := -2
	for _, l := range fr.Lines {
		s, e := l.Start, l.Start+len(l.Text)
		if p.m.opts.Invert && s == prevEnd+1 {
			// GNU prints a run of non-matching lines in one go.
			p.prline(s, e, ':')
			prevEnd = e
			continue
		}
		prevEnd = e
		if p.pending > 0 {
			p.prpending(s)
		}
		b, bp := s, max(p.lastout, 0)
		for i := 0; i < p.before && b > bp; i++ {
			b = bytes.LastIndexByte(data[:b-1], '\n') + 1
		}
		if p.ctx && p.used && b != p.lastout && !p.noSep {
			p.sgr(colorSep, []byte(p.sep), false)
			p.buf.WriteByte('\n')
			p.lineDone()
		}
		for b < s {
			be := p.lineEnd(b)
			p.prline(b, be, '-')
			b = be + 1
		}
		p.prline(s, e, ':')
		p.pending = p.after
		p.used = true
	}
	if p.pending > 0 {
		lim := len(data)
		if fr.BinMatch || fr.BinSkipped {
			lim = fr.TextEnd // GNU stops at the binary part's match, quiet
		}
		p.prpending(lim)
	}
	p.data = nil
	return p.bad || fr.Binary
}
