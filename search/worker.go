package search

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// The index worker: a mount's bleve indexes live in a child process, the
// same executable started with $PADFS_INDEX_WORKER set (see init), at
// SCHED_IDLE. The mount reads the log and the files (cheap) and streams
// documents to it; the worker builds trigrams and text fields and writes
// bleve. So bleve's CPU (analysis, segment building, merges) only takes
// what the foreground leaves idle, and a panic or fault of bleve or bbolt
// (a damaged index, a persist that failed on a full disk), even on
// bleve's own goroutines, kills the worker, not the mount: the mount logs
// it, greps by reading files meanwhile (exact), and starts a new worker.
//
// Two socket pairs connect them (proto.go frames): the ingest connection
// carries the writes, handled in order (so the mount's reads block when
// the worker falls behind: back-pressure); the query connection carries
// reads, each served on its own goroutine.

// workerEnv names the index directory in a worker's environment;
// workerLevelEnv the level the mount logs at (slog.Level's text), which
// the worker's logger takes: its lines end in the mount's log.
const (
	workerEnv      = "PADFS_INDEX_WORKER"
	workerLevelEnv = "PADFS_INDEX_LOG_LEVEL"
)

// errWorkerDown is a request to a worker that is not running.
var errWorkerDown = errors.New("search index worker is not running")

func init() {
	if dir := os.Getenv(workerEnv); dir != "" {
		os.Exit(workerMain(dir))
	}
}

// workerMain serves the index directory dir over fds 3 (ingest) and 4
// (query) until the ingest connection closes.
func workerMain(dir string) int {
	var level slog.Level // Info unless the mount says otherwise
	levelErr := level.UnmarshalText([]byte(cmp.Or(os.Getenv(workerLevelEnv), "INFO")))
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})).With("component", "search-worker", "pid", os.Getpid())
	if levelErr != nil {
		log.Warn("search worker: "+workerLevelEnv+" ignored", "err", levelErr)
	}
	ingest, err1 := net.FileConn(os.NewFile(3, "ingest"))
	query, err2 := net.FileConn(os.NewFile(4, "query"))
	if err := errors.Join(err1, err2); err != nil {
		log.Error("search worker: no connection to the mount", "err", err)
		return 2
	}
	if p := os.Getenv("PADFS_INDEX_CPUPROFILE"); p != "" {
		// For measuring the worker: a CPU profile of its whole life.
		if f, err := os.Create(fmt.Sprintf("%s.%d", p, os.Getpid())); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}
	if p := os.Getenv("PADFS_INDEX_MEMPROFILE"); p != "" {
		// For measuring the worker: a heap profile at its peak live heap.
		stop := make(chan struct{})
		defer close(stop)
		go peakHeapProfile(fmt.Sprintf("%s.%d", p, os.Getpid()), stop)
	}
	limit, err := workerMemLimit(os.Getenv(memLimitEnv))
	if err != nil {
		log.Warn("search worker: "+memLimitEnv+" ignored", "err", err)
		limit, _ = workerMemLimit("")
	}
	if limit != defaultMemLimit {
		debug.SetMemoryLimit(limit)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(workerGCPercent)
		if limit == defaultMemLimit && os.Getenv("GOMEMLIMIT") == "" {
			debug.SetMemoryLimit(workerGCLimit)
		}
	}
	log.Debug("search worker: serving", "dir", dir, "memlimit", limit)
	lb := newLocalBackend(dir, log)
	// A ranked search's rankers run on goroutines of their own, on
	// threads at SCHED_IDLE: each leaves it as the query's thread does.
	lb.rankThread = func() func() {
		back := foreground()
		if schedPolicy() == unix.SCHED_IDLE {
			lb.idleRankers.Add(1)
		}
		return back
	}
	sv := &server{lb: lb, errs: map[mvcc.SessionID]error{}}
	go sv.serve(query, true)
	sv.serve(ingest, false)
	if err := lb.close(); err != nil {
		log.Warn("search worker: close", "err", err)
		return 1
	}
	return 0
}

// memLimitEnv sets the index worker's soft memory limit (Go's
// GOMEMLIMIT syntax: 512MiB, 1GiB, bytes; "off" for none).
const memLimitEnv = "PADFS_INDEX_MEMLIMIT"

// defaultMemLimit (-1) leaves the worker's soft memory limit to
// workerGCLimit, or to GOMEMLIMIT if the mount's environment sets it. A limit makes
// the collector run before the heap grows past it (without one the heap
// grows to twice its live size between collections: a tar -x of 128 MB
// peaked at 2.2 GB RSS for a 615 MB live heap), but bleve's batch analysis
// makes the live size large for a moment and a limit below it makes the
// collector run nearly all the time (384 MiB tripled the catch-up's CPU).
// Measured with 8 MB batches, 768 MiB cut the worker's peak to 658 MB but
// doubled the index lag after an untar, so the default (workerGCLimit)
// is far above the live peak.
const defaultMemLimit = -1

// workerGCPercent is the worker's GOGC unless the environment sets one.
// Its garbage is a batch's analysis and zap's interim segment (about
// 2 GB of it for Go's src) over a live heap that peaks at about 420 MB
// (two 32 MB batches building at once: zap's frequency/norm slices, its
// postings bitmaps and dictionaries, the documents' trigrams), so at
// GOGC=100 the collector (marking, sweeping, write barriers, assists)
// was about a tenth of the worker's CPU. 200 halves the collections
// for a peak RSS of 1.2-2.0 GB instead of 0.9-1.2 GB (measured, Go's
// src), so workerGCLimit, 3.5 times that live peak, bounds it (a soft
// limit: the collector runs more often near it); $PADFS_INDEX_MEMLIMIT
// or GOMEMLIMIT replace it, and GOGC in the environment drops both.
const (
	workerGCPercent = 200
	workerGCLimit   = 1536 << 20
)

// workerMemLimit parses v (memLimitEnv's value) into a limit in bytes.
func workerMemLimit(v string) (int64, error) {
	v = strings.TrimSpace(v)
	switch v {
	case "":
		return defaultMemLimit, nil
	case "off":
		return math.MaxInt64, nil
	}
	num, mult := v, int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, mult = n, u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%s=%q: want a size such as 512MiB, or off", memLimitEnv, v)
	}
	return n * mult, nil
}

// peakHeapProfile writes a heap profile to path each time the live heap
// (at the last GC) reaches a new high, until stop is closed.
func peakHeapProfile(path string, stop <-chan struct{}) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	var peak uint64
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return
		}
		if v := sample[0].Value.Uint64(); v > peak+peak/20 {
			peak = v
			if f, err := os.Create(path); err == nil {
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}
	}
}

// server answers one connection's requests from lb.
type server struct {
	lb   *localBackend
	mu   sync.Mutex
	errs map[mvcc.SessionID]error // first error of a run's unacknowledged writes
}

func (sv *server) serve(c net.Conn, concurrent bool) {
	r := bufio.NewReaderSize(c, 1<<20)
	w := bufio.NewWriter(c)
	var wmu sync.Mutex
	var buf []byte
	reply := func(m *msg) {
		wmu.Lock()
		defer wmu.Unlock()
		var err error
		if buf, err = writeFrame(w, m, buf); err == nil {
			err = w.Flush()
		}
		if err != nil {
			sv.lb.log.Debug("search worker: reply", "err", err)
		}
	}
	for {
		m, err := readFrame(r)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				sv.lb.log.Warn("search worker: read request", "err", err)
			}
			return
		}
		if concurrent {
			go func() {
				// A query is a few milliseconds of work that a grep waits
				// for: it runs at normal priority, not at the worker's
				// SCHED_IDLE, so a busy foreground cannot starve it. The
				// thread is idle again before the answer leaves.
				back := sync.OnceFunc(foreground())
				defer back()
				sv.handle(m, func(out *msg) { back(); reply(out) })
			}()
		} else {
			sv.handle(m, reply)
		}
	}
}

func (sv *server) handle(m *msg, reply func(*msg)) {
	lb := sv.lb
	out := &msg{Op: opReply, ID: m.ID}
	var err error
	switch m.Op {
	case opCovered:
		var pos position
		pos, err = lb.position(m.Sid)
		out.Seq, out.HLC, out.N = pos.Seq, uint64(pos.HLC), pos.Gen
	case opIDs:
		out.Strs, err = lb.ids(m.Sid, idQuery{Field: m.Field, Term: m.Path, Terms: m.Strs, Prefix: m.N != 0, Tri: m.Q, Gen: m.N2})
	case opSearch:
		var hits []scored
		hits, err = lb.search(context.Background(), m.Sid, rankQuery{Text: m.Text, Prefix: m.Path, Size: int(m.N)})
		for _, h := range hits {
			out.Strs = append(out.Strs, h.id)
			out.Floats = append(out.Floats, h.scores[:]...)
		}
	case opStats:
		ls := lb.stats()
		out.Stats = &workerStats{Indexed: ls.Indexed, QueryPolicy: uint64(schedPolicy()),
			IdleRankers: ls.IdleRankers, MemLimit: debug.SetMemoryLimit(-1)}
	case opBegin:
		sv.setErr(m.Sid, nil, true)
		out.N, err = lb.begin(m.Sid, int(m.N), int64(m.N2), int(m.N3))
	case opDel:
		sv.setErr(m.Sid, lb.del(m.Sid, m.Path), false)
	case opDoc:
		var data []byte
		if m.HasData {
			data = m.Data
		}
		sv.setErr(m.Sid, lb.doc(m.Sid, m.Path, mvcc.Ino(m.Ino), data), false)
	case opFlush:
		if err = sv.takeErr(m.Sid); err == nil {
			err = lb.flush(m.Sid)
		}
	case opFinish:
		if err = sv.takeErr(m.Sid); err == nil {
			err = lb.finish(m.Sid, m.Seq, mvcc.HLC(m.HLC))
		} else {
			lb.abort(m.Sid)
		}
	case opAbort:
		sv.setErr(m.Sid, nil, true)
		lb.abort(m.Sid)
	case opDrop:
		err = lb.drop(m.Sid)
	default:
		err = fmt.Errorf("search worker: unknown request %d", m.Op)
	}
	if err != nil {
		out.Err = err.Error()
		switch {
		case errors.Is(err, errDiskFull):
			out.N3 = 1
		case errors.Is(err, errIndexChanged):
			out.N3 = 2
		}
	}
	if m.ID != 0 {
		reply(out)
	}
}

// setErr records the first error of sid's run (reset clears it).
func (sv *server) setErr(sid mvcc.SessionID, err error, reset bool) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if reset {
		delete(sv.errs, sid)
	} else if err != nil && sv.errs[sid] == nil {
		sv.errs[sid] = err
	}
}

func (sv *server) takeErr(sid mvcc.SessionID) error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	err := sv.errs[sid]
	delete(sv.errs, sid)
	return err
}

// client is the mount's end of one connection.
type client struct {
	c net.Conn

	wmu sync.Mutex
	w   *bufio.Writer
	buf []byte

	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan *msg
	err     error // set once the connection failed
}

func newClient(c net.Conn) *client {
	cl := &client{c: c, w: bufio.NewWriterSize(c, 256<<10), pending: map[uint64]chan *msg{}}
	go cl.readLoop()
	return cl
}

func (cl *client) readLoop() {
	r := bufio.NewReaderSize(cl.c, 256<<10)
	for {
		m, err := readFrame(r)
		if err != nil {
			cl.fail(err)
			return
		}
		cl.mu.Lock()
		ch := cl.pending[m.ID]
		delete(cl.pending, m.ID)
		cl.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
}

// fail ends every call in flight with errWorkerDown.
func (cl *client) fail(err error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.err == nil {
		cl.err = fmt.Errorf("%w (%v)", errWorkerDown, err)
	}
	for id, ch := range cl.pending {
		close(ch)
		delete(cl.pending, id)
	}
	cl.c.Close()
}

func (cl *client) write(m *msg, flush bool) error {
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	var err error
	if cl.buf, err = writeFrame(cl.w, m, cl.buf); err == nil && flush {
		err = cl.w.Flush()
	}
	if cap(cl.buf) > 1<<20 {
		cl.buf = nil // do not keep a large document's buffer
	}
	if err != nil {
		cl.fail(err)
		cl.mu.Lock()
		err = cl.err
		cl.mu.Unlock()
	}
	return err
}

// send writes a request that gets no reply (buffered: the next call
// flushes it).
func (cl *client) send(m *msg) error {
	m.ID = 0
	return cl.write(m, false)
}

// queryTimeout bounds the wait for a query's answer: a worker that is
// stuck (or starved at SCHED_IDLE on a machine kept busy) must not hang
// grep, which then reads the files instead.
const queryTimeout = 20 * time.Second

// call sends a request and waits for its reply (at most timeout, if not
// zero).
func (cl *client) call(m *msg, timeout time.Duration) (*msg, error) {
	return cl.callCtx(context.Background(), m, timeout)
}

// callCtx is call, which also ends with ctx's error when ctx is done.
func (cl *client) callCtx(ctx context.Context, m *msg, timeout time.Duration) (*msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ch := make(chan *msg, 1)
	cl.mu.Lock()
	if cl.err != nil {
		err := cl.err
		cl.mu.Unlock()
		return nil, err
	}
	cl.next++
	m.ID = cl.next
	cl.pending[m.ID] = ch
	cl.mu.Unlock()
	if err := cl.write(m, true); err != nil {
		return nil, err
	}
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	var r *msg
	var ok bool
	select {
	case r, ok = <-ch:
	case <-expired:
		cl.mu.Lock()
		delete(cl.pending, m.ID)
		cl.mu.Unlock()
		return nil, fmt.Errorf("%w: no answer within %s", errWorkerDown, timeout)
	case <-ctx.Done():
		cl.mu.Lock()
		delete(cl.pending, m.ID)
		cl.mu.Unlock()
		return nil, ctx.Err()
	}
	if !ok {
		cl.mu.Lock()
		err := cl.err
		cl.mu.Unlock()
		return nil, err
	}
	if r.Err != "" {
		switch r.N3 {
		case 1:
			return r, fmt.Errorf("%w%s", errDiskFull, strings.TrimPrefix(r.Err, errDiskFull.Error()))
		case 2:
			return r, errIndexChanged
		}
		return r, errors.New(r.Err)
	}
	return r, nil
}

// worker is one index worker process.
type worker struct {
	cmd           *exec.Cmd
	ingest, query *client
	started       time.Time
	exited        chan struct{}
	closing       atomic.Bool

	mu      sync.Mutex
	touched map[mvcc.SessionID]bool
	// pos caches what this worker's indexes cover, kept from the replies
	// to the mount's own writes (it is the only writer), so that
	// positions need no round trip to a worker that may be starved.
	pos    map[mvcc.SessionID]position
	runGen map[mvcc.SessionID]uint64
}

func (w *worker) cached(sid mvcc.SessionID) (position, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	p, ok := w.pos[sid]
	return p, ok
}

func (w *worker) setPos(sid mvcc.SessionID, p *position) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if p == nil {
		delete(w.pos, sid)
	} else {
		w.pos[sid] = *p
	}
}

func (w *worker) touch(sid mvcc.SessionID) {
	w.mu.Lock()
	w.touched[sid] = true
	w.mu.Unlock()
}

// remoteBackend is the mount's side: it starts the worker, restarts it
// with backoff when it dies, and turns calls into requests.
type remoteBackend struct {
	dir    string
	log    *slog.Logger
	onDown func()

	mu        sync.Mutex
	w         *worker
	closed    bool
	nextStart time.Time
	backoff   time.Duration
	restarts  int
	// strikes counts, per session, the workers that died in a row while
	// using its index: two, and the index is taken for the cause (bleve
	// faults on some damage before any recover can act) and rebuilt.
	strikes map[mvcc.SessionID]int
}

const (
	minBackoff = 500 * time.Millisecond
	maxBackoff = 30 * time.Second
	// healthyAfter is how long a worker must live for its death not to
	// count against the sessions it used.
	healthyAfter = time.Minute
)

func newRemoteBackend(dir string, log *slog.Logger, onDown func()) *remoteBackend {
	return &remoteBackend{dir: dir, log: log, onDown: onDown, backoff: minBackoff, strikes: map[mvcc.SessionID]int{}}
}

// get returns the running worker, starting one if it is time.
func (rb *remoteBackend) get(sid mvcc.SessionID) (*worker, error) {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	if rb.closed {
		return nil, errors.New("search index is closed")
	}
	if rb.w == nil {
		if time.Now().Before(rb.nextStart) {
			return nil, errWorkerDown
		}
		w, err := rb.start()
		if err != nil {
			rb.nextStart = time.Now().Add(rb.backoff)
			rb.backoff = min(2*rb.backoff, maxBackoff)
			return nil, fmt.Errorf("%w: %v", errWorkerDown, err)
		}
		rb.w = w
	}
	rb.w.touch(sid)
	return rb.w, nil
}

// start starts a worker (rb.mu held).
func (rb *remoteBackend) start() (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var parent, child [2]*os.File
	for i := range parent {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("socketpair: %w", err)
		}
		parent[i], child[i] = os.NewFile(uintptr(fds[0]), "index-worker"), os.NewFile(uintptr(fds[1]), "index-worker")
	}
	defer func() {
		for _, f := range child {
			f.Close()
		}
	}()
	cmd := exec.Command(exe, "index-worker")
	cmd.Env = append(os.Environ(), workerEnv+"="+rb.dir, workerLevelEnv+"="+logLevel(rb.log).String())
	cmd.ExtraFiles = child[:]
	cmd.Stderr = &logWriter{log: rb.log}
	// The worker dies with the thread that started it, which lives as
	// long as the worker (startIdle).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	conns := make([]net.Conn, 2)
	for i, f := range parent {
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return nil, err
		}
		conns[i] = c
	}
	w := &worker{cmd: cmd, started: time.Now(), exited: make(chan struct{}), touched: map[mvcc.SessionID]bool{},
		pos: map[mvcc.SessionID]position{}, runGen: map[mvcc.SessionID]uint64{},
		ingest: newClient(conns[0]), query: newClient(conns[1])}
	if err := startIdle(cmd, func() { rb.exited(w) }); err != nil {
		w.ingest.fail(err)
		w.query.fail(err)
		return nil, err
	}
	rb.log.Debug("search: index worker started", "pid", cmd.Process.Pid)
	return w, nil
}

// startIdle starts cmd at SCHED_IDLE (and idle I/O priority): from a
// thread set to it for the purpose, which every thread of the child
// inherits. The thread is never handed back to the Go scheduler: it waits
// for the child and then exits with its goroutine. done runs after the
// child exited.
func startIdle(cmd *exec.Cmd, done func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
		if err := unix.SchedSetAttr(0, attr, 0); err != nil {
			errc <- fmt.Errorf("sched_setattr SCHED_IDLE: %w", err)
			return
		}
		// IOPRIO_WHO_PROCESS, this thread, IOPRIO_CLASS_IDLE; best effort.
		_, _, _ = unix.Syscall(unix.SYS_IOPRIO_SET, 1, 0, 3<<13)
		if err := cmd.Start(); err != nil {
			errc <- err
			return
		}
		errc <- nil
		_ = cmd.Wait()
		done()
	}()
	return <-errc
}

// foreground runs the calling goroutine, until the returned function is
// called, on a thread of normal priority (SCHED_OTHER). Without the
// privilege to leave SCHED_IDLE it stays there: queries then wait for idle
// CPU, bounded by queryTimeout.
func foreground() func() {
	runtime.LockOSThread()
	attr := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	if err := unix.SchedSetAttr(0, attr, 0); err != nil {
		runtime.UnlockOSThread()
		return func() {}
	}
	return func() {
		idle := &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}
		if unix.SchedSetAttr(0, idle, 0) == nil {
			runtime.UnlockOSThread()
		}
		// else: keep the thread locked; it exits with the goroutine
		// rather than run indexing at normal priority.
	}
}

// schedPolicy is the scheduling policy of the calling thread (-1 if
// unknown).
func schedPolicy() int {
	a, err := unix.SchedGetAttr(0, 0)
	if err != nil {
		return -1
	}
	return int(a.Policy)
}

// exited handles the end of worker w.
func (rb *remoteBackend) exited(w *worker) {
	close(w.exited)
	w.ingest.fail(io.EOF)
	w.query.fail(io.EOF)
	if w.closing.Load() {
		return
	}
	rb.mu.Lock()
	if rb.w == w {
		rb.w = nil
	}
	lived := time.Since(w.started)
	if lived > healthyAfter {
		rb.backoff = minBackoff
		clear(rb.strikes)
	}
	rb.nextStart = time.Now().Add(rb.backoff)
	wait := rb.backoff
	rb.backoff = min(2*rb.backoff, maxBackoff)
	rb.restarts++
	w.mu.Lock()
	var dropped []mvcc.SessionID
	for sid := range w.touched {
		if rb.strikes[sid]++; rb.strikes[sid] >= 2 {
			delete(rb.strikes, sid)
			dropped = append(dropped, sid)
		}
	}
	w.mu.Unlock()
	closed := rb.closed
	rb.mu.Unlock()
	if closed {
		return
	}
	rb.log.Warn("search: index worker died; grep reads files until a new one catches up",
		"pid", w.cmd.Process.Pid, "status", w.cmd.ProcessState.String(), "restart_in", wait.String())
	for _, sid := range dropped {
		// The worker keeps dying on this index: it is derived data.
		rb.log.Warn("search: index keeps killing its worker; rebuilding it", "session", sid.String())
		if err := os.RemoveAll(filepath.Join(rb.dir, sid.String())); err != nil {
			rb.log.Warn("search: remove index", "session", sid.String(), "err", err)
		}
	}
	if rb.onDown != nil {
		rb.onDown()
	}
}

func (rb *remoteBackend) query(m *msg) (*msg, error) {
	return rb.queryCtx(context.Background(), m)
}

// queryCtx is query, given up (the worker's answer dropped) when ctx is
// done.
func (rb *remoteBackend) queryCtx(ctx context.Context, m *msg) (*msg, error) {
	w, err := rb.get(m.Sid)
	if err != nil {
		return nil, err
	}
	r, err := w.query.callCtx(ctx, m, queryTimeout)
	if err != nil && ctx.Err() == nil {
		w.setPos(m.Sid, nil)
	}
	return r, err
}

func (rb *remoteBackend) ingestCall(m *msg) (*msg, error) {
	w, err := rb.get(m.Sid)
	if err != nil {
		return nil, err
	}
	r, err := w.ingest.call(m, 0)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil || m.Op == opAbort:
		delete(w.pos, m.Sid)
	case m.Op == opBegin:
		w.runGen[m.Sid] = r.N
		if p, ok := w.pos[m.Sid]; ok && p.Gen != r.N {
			delete(w.pos, m.Sid)
		}
	case m.Op == opFinish:
		w.pos[m.Sid] = position{m.Seq, mvcc.HLC(m.HLC), w.runGen[m.Sid]}
	case m.Op == opDrop:
		w.pos[m.Sid] = position{}
	}
	return r, err
}

func (rb *remoteBackend) ingestSend(m *msg) error {
	w, err := rb.get(m.Sid)
	if err != nil {
		return err
	}
	return w.ingest.send(m)
}

func (rb *remoteBackend) position(sid mvcc.SessionID) (position, error) {
	w, err := rb.get(sid)
	if err != nil {
		return position{}, err
	}
	if p, ok := w.cached(sid); ok {
		return p, nil
	}
	r, err := w.query.call(&msg{Op: opCovered, Sid: sid}, queryTimeout)
	if err != nil {
		return position{}, err
	}
	p := position{r.Seq, mvcc.HLC(r.HLC), r.N}
	w.setPos(sid, &p)
	return p, nil
}

func (rb *remoteBackend) ids(sid mvcc.SessionID, q idQuery) ([]string, error) {
	m := &msg{Op: opIDs, Sid: sid, Field: q.Field, Path: q.Term, Strs: q.Terms, Q: q.Tri, N2: q.Gen}
	if q.Prefix {
		m.N = 1
	}
	r, err := rb.query(m)
	if err != nil {
		return nil, err
	}
	return r.Strs, nil
}

func (rb *remoteBackend) search(ctx context.Context, sid mvcc.SessionID, q rankQuery) ([]scored, error) {
	r, err := rb.queryCtx(ctx, &msg{Op: opSearch, Sid: sid, Text: q.Text, Path: q.Prefix, N: uint64(q.Size)})
	if err != nil {
		return nil, err
	}
	// numIndexRankers scores per document.
	if len(r.Floats) != numIndexRankers*len(r.Strs) {
		return nil, errFrame
	}
	hits := make([]scored, len(r.Strs))
	for i := range hits {
		hits[i].id = r.Strs[i]
		copy(hits[i].scores[:], r.Floats[i*numIndexRankers:])
	}
	return hits, nil
}

func (rb *remoteBackend) begin(sid mvcc.SessionID, parallel int, maxBytes int64, maxDocs int) (uint64, error) {
	r, err := rb.ingestCall(&msg{Op: opBegin, Sid: sid, N: uint64(parallel), N2: uint64(maxBytes), N3: uint64(maxDocs)})
	if err != nil {
		return 0, err
	}
	return r.N, nil
}

func (rb *remoteBackend) del(sid mvcc.SessionID, id string) error {
	return rb.ingestSend(&msg{Op: opDel, Sid: sid, Path: id})
}

func (rb *remoteBackend) doc(sid mvcc.SessionID, path string, ino mvcc.Ino, data []byte) error {
	return rb.ingestSend(&msg{Op: opDoc, Sid: sid, Path: path, Ino: uint64(ino), HasData: data != nil, Data: data})
}

func (rb *remoteBackend) flush(sid mvcc.SessionID) error {
	_, err := rb.ingestCall(&msg{Op: opFlush, Sid: sid})
	return err
}

func (rb *remoteBackend) finish(sid mvcc.SessionID, seq uint64, at mvcc.HLC) error {
	_, err := rb.ingestCall(&msg{Op: opFinish, Sid: sid, Seq: seq, HLC: uint64(at)})
	return err
}

func (rb *remoteBackend) abort(sid mvcc.SessionID) {
	_, _ = rb.ingestCall(&msg{Op: opAbort, Sid: sid})
}

func (rb *remoteBackend) drop(sid mvcc.SessionID) error {
	_, err := rb.ingestCall(&msg{Op: opDrop, Sid: sid})
	if errors.Is(err, errWorkerDown) {
		return nil // the caller removes the directory itself
	}
	return err
}

func (rb *remoteBackend) stats() BackendStats {
	rb.mu.Lock()
	s := BackendStats{Restarts: rb.restarts}
	w := rb.w
	rb.mu.Unlock()
	if w == nil {
		return s
	}
	s.Pid = w.cmd.Process.Pid
	if r, err := w.query.call(&msg{Op: opStats}, queryTimeout); err == nil && r.Stats != nil {
		s.Indexed = r.Stats.Indexed
		s.QueryPolicy = int(r.Stats.QueryPolicy)
		s.IdleRankers = r.Stats.IdleRankers
		s.MemLimit = r.Stats.MemLimit
	}
	return s
}

// close ends the worker: closing the ingest connection makes it close
// its indexes (recording what they cover) and exit.
func (rb *remoteBackend) close() error {
	rb.mu.Lock()
	rb.closed = true
	w := rb.w
	rb.w = nil
	rb.mu.Unlock()
	if w == nil {
		return nil
	}
	w.closing.Store(true)
	w.ingest.wmu.Lock()
	_ = w.ingest.w.Flush()
	w.ingest.wmu.Unlock()
	if uc, ok := w.ingest.c.(*net.UnixConn); ok {
		_ = uc.CloseWrite()
	}
	select {
	case <-w.exited:
	case <-time.After(time.Minute):
		rb.log.Warn("search: index worker did not exit; killing it", "pid", w.cmd.Process.Pid)
		_ = w.cmd.Process.Kill()
		<-w.exited
	}
	if st := w.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("search index worker: %s", st)
	}
	return nil
}

// logLevel is the lowest level log records.
func logLevel(log *slog.Logger) slog.Level {
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if log.Enabled(context.Background(), l) {
			return l
		}
	}
	return slog.LevelError
}

// logWriter turns the worker's stderr lines into log records.
type logWriter struct {
	log  *slog.Logger
	mu   sync.Mutex
	line []byte
}

func (lw *logWriter) Write(p []byte) (int, error) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	lw.line = append(lw.line, p...)
	for {
		i := bytes.IndexByte(lw.line, '\n')
		if i < 0 {
			break
		}
		lw.log.Info("search worker: " + string(lw.line[:i]))
		lw.line = lw.line[i+1:]
	}
	if len(lw.line) > 64<<10 {
		lw.line = lw.line[:0]
	}
	return len(p), nil
}
