package mvcc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/rawscan"
	"github.com/padfs/padfs/mvcc/kv"
)

// Tests of the hard forget in bounded batches (issue 10.7) on a real store
// (bolt behind the WAL, in a t.TempDir()).

const purgeMarker = "PURGE-MARK-3c9e1f"

// fillSession gives sid n small files (names and inline content carry the
// marker, each written twice) and two chunked files with the marker in
// their chunks: enough keys for many batches. plainNames leaves the marker
// out of the names (a redaction refuses names).
func fillSession(e *lcEnv, sid SessionID, n int, plainNames ...bool) {
	e.t.Helper()
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("d%02d/f-%s-%d", i%16, purgeMarker, i)
		if len(plainNames) > 0 && plainNames[0] {
			p = fmt.Sprintf("d%02d/f-%d", i%16, i)
		}
		e.write(sid, p, []byte(fmt.Sprintf("v1 %d %s\n", i, purgeMarker)))
		e.write(sid, p, []byte(fmt.Sprintf("v2 %d %s\n", i, purgeMarker)))
	}
	e.write(sid, "big/a.txt", bigText(11, 600<<10, purgeMarker, 5, 300<<10, 590<<10))
	e.write(sid, "big/b.txt", bigText(12, 400<<10, purgeMarker, 100<<10))
	e.settle()
	if len(rawscan.Hits(e.t, e.dir, purgeMarker)) == 0 {
		e.t.Fatal("marker not on disk before the purge: the test proves nothing")
	}
}

// settle moves what the WAL buffers into padfs.db, so that a scan of the
// files for a marker does not race with a fold moving it from a log
// segment (read first, then deleted) into padfs.db (read before the fold).
func (e *lcEnv) settle() {
	e.t.Helper()
	if f, ok := e.st.kv.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			e.t.Fatal(err)
		}
	}
}

// checkPurged asserts that nothing of sid is left: no key under its
// prefixes, no job record, no byte of its content in any file of the data
// directory; and that keep still reads keepPath as keepData.
func checkPurged(e *lcEnv, sid, keep SessionID, keepPath, keepData string) {
	e.t.Helper()
	err := e.st.kv.View(func(r kv.Reader) error {
		for _, p := range append(purgePrefixes(sid), jobKey(sid)) {
			if err := r.Scan(p, kv.PrefixEnd(p), func(k, _ []byte) (bool, error) {
				return false, fmt.Errorf("key %q left", k)
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		e.t.Fatalf("after the purge: %v", err)
	}
	if jobs, err := e.st.Jobs(); err != nil || len(jobs) != 0 {
		e.t.Fatalf("jobs after the purge: %v %v", jobs, err)
	}
	if hits := rawscan.Hits(e.t, e.dir, purgeMarker); len(hits) > 0 {
		e.t.Fatalf("purged content still on disk in %v", hits)
	}
	if got := e.mustRead(keep, keepPath, Latest); got != keepData {
		e.t.Fatalf("other session: %s reads %q, want %q", keepPath, got, keepData)
	}
}

// commitsDuring commits to session other until run returns, and returns
// how many batches the job had done (batchHook) after each commit, and
// the batches in all.
func commitsDuring(e *lcEnv, other SessionID, run func() error) (seen []int64, total int64) {
	e.t.Helper()
	var batches atomic.Int64
	e.st.batchHook = func(_ string, n int64, _ time.Duration) { batches.Store(n) }
	defer func() { e.st.batchHook = nil }()
	done := make(chan error, 1)
	go func() { done <- run() }()
	for finished := false; !finished; {
		select {
		case err := <-done:
			if err != nil {
				e.t.Fatal(err)
			}
			finished = true
		default:
		}
		i := len(seen)
		e.write(other, fmt.Sprintf("w/%d", i%50), []byte(fmt.Sprintf("commit %d\n", i)))
		seen = append(seen, batches.Load())
	}
	total = batches.Load()
	between := map[int64]bool{}
	for _, b := range seen {
		if b > 0 && b < total {
			between[b] = true
		}
	}
	e.t.Logf("%d batches; %d commits of the other session, landing between %d different pairs of batches", total, len(seen), len(between))
	if total < 10 {
		e.t.Fatalf("the job ran in %d batches: the session is too small to show batching", total)
	}
	if len(between) < 3 {
		e.t.Fatalf("commits of the other session landed between only %d of the job's %d batches (seen %v): they waited for it",
			len(between), total, seen)
	}
	for i := max(0, len(seen)-50); i < len(seen); i++ {
		if got := e.mustRead(other, fmt.Sprintf("w/%d", i%50), Latest); got != fmt.Sprintf("commit %d\n", i) {
			e.t.Fatalf("w/%d reads %q after the job", i%50, got)
		}
	}
	return seen, total
}

func TestPurgeBatchesLetOtherWritersIn(t *testing.T) {
	e := lcOpen(t)
	other := e.session("other")
	e.write(other, "keep.txt", []byte("kept\n"))
	sid := e.session("big")
	fillSession(e, sid, 1500)
	r, err := e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	commitsDuring(e, other, func() error {
		_, err := e.st.Purge(t.Context(), sid, r.Token, nil)
		return err
	})
	checkPurged(e, sid, other, "keep.txt", "kept\n")
}

func TestPurgeCancelledResumes(t *testing.T) {
	e := lcOpen(t)
	other := e.session("other")
	e.write(other, "keep.txt", []byte("kept\n"))
	sid := e.session("big")
	fillSession(e, sid, 600)
	r, err := e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	e.st.batchHook = func(_ string, n int64, _ time.Duration) {
		if n == 3 {
			cancel()
		}
	}
	if _, err := e.st.Purge(ctx, sid, r.Token, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("purge with a context cancelled after 3 batches: %v", err)
	}
	jobs, err := e.st.Jobs()
	if err != nil || len(jobs) != 1 || jobs[0].Session != sid || jobs[0].Kind != JobPurge || jobs[0].Batches != 3 {
		t.Fatalf("jobs after the cancel: %+v %v", jobs, err)
	}
	// Marked: invisible and untouchable, with an error that says why.
	if _, err := e.st.Header(sid); !errors.Is(err, ErrBusy) || !errors.Is(err, ErrNoSession) || !strings.Contains(err.Error(), "purged") {
		t.Fatalf("header of a session being purged: %v", err)
	}
	if _, err := e.st.LiveHeader(sid); !errors.Is(err, ErrBusy) {
		t.Fatalf("mount check of a session being purged: %v", err)
	}
	if _, err := e.st.ResolveSession("big"); !errors.Is(err, ErrNoSession) {
		t.Fatalf("name of a session being purged still resolves: %v", err)
	}
	if infos, err := e.st.Sessions(); err != nil || slices.ContainsFunc(infos, func(si SessionInfo) bool { return si.ID == sid }) {
		t.Fatalf("session being purged is listed (%v)", err)
	}
	h, _ := e.st.Header(other)
	if _, err := e.st.Update(sid, func(t *WriteTx) error { t.SetEvent(Event{Op: "write"}); return nil }); !errors.Is(err, ErrBusy) {
		t.Fatalf("commit to a session being purged: %v", err)
	}
	if _, err := e.st.Fork(context.Background(), sid, Latest, ForkOptions{}); !errors.Is(err, ErrBusy) {
		t.Fatalf("fork of a session being purged: %v", err)
	}
	if _, err := e.st.Prune(sid, PruneOptions{Before: e.now()}); !errors.Is(err, ErrBusy) {
		t.Fatalf("prune of a session being purged: %v", err)
	}
	if _, err := e.st.Purge(t.Context(), sid, "forget-other", nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("purge with another token: %v", err)
	}
	if _, err := e.st.Create(other, h.Root, "during", Attr{Mode: sIFREG | 0o644}, ""); err != nil {
		t.Fatalf("the other session while one is marked: %v", err)
	}

	// The same token goes on where it stopped (cancelled again), then
	// FinishJob finishes it.
	ctx, cancel = context.WithCancel(t.Context())
	e.st.batchHook = func(_ string, n int64, _ time.Duration) {
		if n == 6 {
			cancel()
		}
	}
	if _, err := e.st.Purge(ctx, sid, r.Token, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("purge resumed with its token, cancelled again: %v", err)
	}
	if jobs, _ := e.st.Jobs(); len(jobs) != 1 || jobs[0].Batches != 6 || jobs[0].Done <= 0 || jobs[0].Done >= jobs[0].Total {
		t.Fatalf("job after the second cancel: %+v", jobs)
	}
	e.st.batchHook = nil
	var last [2]int64
	got, err := e.st.FinishJob(t.Context(), sid, func(stage string, done, total int64) {
		if stage == "purge" {
			last = [2]int64{done, total}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if pr, ok := got.(*PurgeReceipt); !ok || pr.Token != r.Token {
		t.Fatalf("FinishJob returned %#v", got)
	}
	if last[0] == 0 || last[0] != last[1] {
		t.Fatalf("last progress %d of %d", last[0], last[1])
	}
	checkPurged(e, sid, other, "keep.txt", "kept\n")
}

const purgeKillEnv = "PADFS_PURGE_KILL_DIR"

// TestPurgeKillChild is the process TestPurgeKilledResumes kills: it
// purges the session named "big" and prints each batch it finished.
func TestPurgeKillChild(t *testing.T) {
	dir := os.Getenv(purgeKillEnv)
	if dir == "" {
		t.Skip("run by TestPurgeKilledResumes")
	}
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.ResolveSession("big")
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.PlanPurge(h.ID)
	if err != nil {
		t.Fatal(err)
	}
	st.batchHook = func(_ string, n int64, _ time.Duration) { fmt.Printf("batch %d\n", n) }
	if _, err := st.Purge(context.Background(), h.ID, r.Token, nil); err != nil {
		t.Fatal(err)
	}
	fmt.Println("finished")
}

func TestPurgeKilledResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	e := lcOpen(t)
	other := e.session("other")
	e.write(other, "keep.txt", []byte("kept\n"))
	sid := e.session("big")
	fillSession(e, sid, 1500)
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(os.Args[0], "-test.run=^TestPurgeKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), purgeKillEnv+"="+e.dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	batches := 0
	for sc.Scan() && batches < 5 {
		if _, err := fmt.Sscanf(sc.Text(), "batch %d", &batches); err != nil && sc.Text() != "" {
			continue // go test's own lines
		}
	}
	if batches < 5 {
		t.Fatalf("child ended after %d batches: %s", batches, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	st, err := OpenDir(e.dir)
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	e.st = st
	t.Cleanup(func() { st.Close() })
	jobs, err := st.Jobs()
	if err != nil || len(jobs) != 1 || jobs[0].Session != sid || jobs[0].Batches < 5 || jobs[0].Done >= jobs[0].Total {
		t.Fatalf("after kill -9 in batch %d: jobs %+v %v (the kill must land mid-purge)", batches, jobs, err)
	}
	t.Logf("killed after batch %d; the job record says %d batches, %d of %d keys", batches, jobs[0].Batches, jobs[0].Done, jobs[0].Total)
	if _, err := st.Header(sid); !errors.Is(err, ErrBusy) {
		t.Fatalf("header after the kill: %v", err)
	}
	if _, err := st.FinishJob(t.Context(), sid, nil); err != nil {
		t.Fatal(err)
	}
	checkPurged(e, sid, other, "keep.txt", "kept\n")
}

// TestJobBatchesBoundedByTime: a batch out of time stops after its first
// unit (a chunk, a version, a key), and the job still ends in the same
// state. With every batch late from the start, a purge takes a batch for
// every one to three keys and a redaction one for every version it
// rewrites (before, batches were bounded by keys only: 512 of them).
func TestJobBatchesBoundedByTime(t *testing.T) {
	defer func(d time.Duration) { jobBatchTime = d }(jobBatchTime)
	jobBatchTime = -time.Hour // every batch is late once it has done a unit
	e := lcOpen(t)
	other := e.session("other")
	e.write(other, "keep.txt", []byte("kept\n"))
	sid := e.session("big")
	fillSession(e, sid, 40)
	r, err := e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	var batches int64
	e.st.batchHook = func(_ string, n int64, _ time.Duration) { batches = n }
	if _, err := e.st.Purge(t.Context(), sid, r.Token, nil); err != nil {
		t.Fatal(err)
	}
	if batches < int64(r.Keys)/3 {
		t.Errorf("purge of %d keys in %d batches, want one per one to three keys", r.Keys, batches)
	}
	checkPurged(e, sid, other, "keep.txt", "kept\n")

	red := e.session("red")
	fillSession(e, red, 40, true)
	logBefore := e.events(red, LogFilter{})
	rr, err := e.st.PlanRedact(red, purgeMarker, DefaultRedaction)
	if err != nil {
		t.Fatal(err)
	}
	batches = 0
	if _, err := e.st.Redact(t.Context(), red, purgeMarker, nil, rr.Token, nil); err != nil {
		t.Fatal(err)
	}
	e.st.batchHook = nil
	if batches < int64(rr.Versions) {
		t.Errorf("redaction of %d versions in %d batches, want one per version at least", rr.Versions, batches)
	}
	checkRedacted(e, red, logBefore)
}

// TestPurgeManyVersionsOfALargeFile: a hard forget of a session that saved
// one large file many times is bounded by its distinct chunks, not by
// versions x chunks. Each version names nearly the same chunks; the purge
// walked every one of them again in every version (a Get and a Scan each,
// and no progress: the keys were gone), and read a batch's worth of
// versions ahead each batch: a session with 64 MiB files saved ~500 times
// crawled at 4 keys in 0.3 s with an ETA of hours.
func TestPurgeManyVersionsOfALargeFile(t *testing.T) {
	defer func(d time.Duration) { jobBatchTime = d }(jobBatchTime)
	jobBatchTime = time.Hour // batches bounded by their keys only, so that the count is the work
	e := lcOpen(t)
	other := e.session("other")
	e.write(other, "keep.txt", []byte("kept\n"))
	sid := e.session("big")
	data := bigText(21, 2<<20, purgeMarker, 1<<20)
	const versions = 120
	for i := 0; i < versions; i++ {
		data[(i*7919)%len(data)] ^= 0x5a // one chunk changes a version
		e.write(sid, "big.bin", data)
	}
	e.settle()
	chunks := countPrefix(t, e.st, pChunk)
	r, err := e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	var batches int64
	e.st.batchHook = func(_ string, n int64, _ time.Duration) { batches = n }
	defer func() { e.st.batchHook = nil }()
	if _, err := e.st.Purge(t.Context(), sid, r.Token, nil); err != nil {
		t.Fatal(err)
	}
	// Each version names ~25 chunks: walking them all again is 3,000
	// references, 12 batches or more of 256.
	if want := int64(r.Keys)/(jobBatch/2) + 3; batches > want {
		t.Errorf("purge of %d keys (%d versions, %d chunks) took %d batches, want at most %d", r.Keys, versions, chunks, batches, want)
	}
	checkPurged(e, sid, other, "keep.txt", "kept\n")
}
