package search

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc"
)

// lastSeq is the session's last event.
func lastSeq(t testing.TB, st *mvcc.Store, sid mvcc.SessionID) uint64 {
	t.Helper()
	var last uint64
	if err := st.View(func(tx *mvcc.ReadTx) error {
		var err error
		last, _, err = tx.LastEvent(sid)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return last
}

// waitCovered waits until the background index covers the session's last
// commit (a guard against hanging, not a time limit on the index).
func waitCovered(t testing.TB, ix *Index, st *mvcc.Store, sid mvcc.SessionID) {
	t.Helper()
	last := lastSeq(t, st, sid)
	for i := 0; ; i++ {
		seq, _, err := ix.Covered(sid)
		if err == nil && seq == last {
			return
		}
		if i > 12000 {
			t.Fatalf("index stuck at seq %d of %d (%v)", seq, last, err)
		}
		waitABit()
	}
}

// workerPid waits for the index worker to run and returns its pid.
func workerPid(t testing.TB, ix *Index) int {
	t.Helper()
	for i := 0; ; i++ {
		if pid := ix.be.stats().Pid; pid != 0 {
			return pid
		}
		if i > 12000 {
			t.Fatal("no index worker")
		}
		waitABit()
	}
}

// TestWorkerRunsAtSchedIdle: every thread of the index worker has the
// SCHED_IDLE policy (5), so bleve only gets CPU the foreground leaves.
func TestWorkerRunsAtSchedIdle(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a": []byte("hello\n")})
	ix, err := Open(data, st)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	waitCovered(t, ix, st, sid)
	pid := workerPid(t, ix)
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/sched", pid))
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no threads of worker %d: %v", pid, err)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		policy := ""
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "policy" {
				policy = strings.TrimSpace(v)
			}
		}
		if policy != "5" {
			t.Errorf("%s: policy %q, want 5 (SCHED_IDLE)", f, policy)
		}
	}
	if os.Getpid() == pid {
		t.Fatal("the index runs in the test's own process")
	}
	// Queries leave SCHED_IDLE while they run (root may), so a grep never
	// waits behind a busy foreground for its candidate list.
	if os.Geteuid() == 0 {
		if p := ix.be.stats().QueryPolicy; p != 0 {
			t.Errorf("queries answered at policy %d, want 0 (SCHED_OTHER)", p)
		}
	}
}

// TestWorkerKilledGrepStaysExact: kill -9 of the index worker costs
// nothing but time: grep stays exact meanwhile (reading files), a new
// worker starts by itself, and the index catches up with what was
// committed while none ran.
func TestWorkerKilledGrepStaysExact(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"f000": []byte("needle 0\n")})
	ix, err := Open(data, st)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	waitCovered(t, ix, st, sid)
	pid := workerPid(t, ix)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Ranked search without its worker: degraded (files read), not failed.
	if hits, err := ix.Search(context.Background(), sid, "needle", 5); err != nil || len(hits) != 1 || hits[0].Path != "f000" {
		t.Errorf("search with the worker killed: %+v, %v", hits, err)
	}
	want := "f000:1:needle 0\n"
	for i := 1; i <= 20; i++ {
		name := fmt.Sprintf("f%03d", i)
		putFile(t, st, sid, name, []byte(fmt.Sprintf("hay\nneedle %d\n", i)))
		want += fmt.Sprintf("%s:2:needle %d\n", name, i)
		out, code, _ := padGrep(t, ix, sid, []string{"-rn", "needle"})
		if out != want || code != 0 {
			t.Fatalf("after %d writes: exit %d, output differs:\n%s", i, code, diffLines(out, want))
		}
	}
	waitCovered(t, ix, st, sid)
	if p := workerPid(t, ix); p == pid {
		t.Fatalf("worker %d still the one killed", p)
	}
	if n := ix.be.stats().Restarts; n != 1 {
		t.Errorf("%d restarts, want 1", n)
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-rn", "needle"})
	if out != want || code != 0 || stats.Scanned || stats.Degraded {
		t.Fatalf("after catching up: exit %d %+v, output differs:\n%s", code, stats, diffLines(out, want))
	}
}

// indexedAtLeast waits (bounded) for the worker's count of documents
// committed to reach n and returns it. The count lags the covered
// position a little: the worker adds a batch's documents to it after bleve
// returns, on an idle-priority thread, while queries (Covered) are answered
// at normal priority, so under load Covered can be seen first.
func indexedAtLeast(t *testing.T, ix *Index, n uint64) uint64 {
	t.Helper()
	var got uint64
	for i := 0; i < 12000; i++ {
		if got = ix.be.stats().Indexed; got >= n {
			return got
		}
		waitABit()
	}
	t.Fatalf("index worker counts %d documents indexed, waited for %d", got, n)
	return got
}

// TestBurstOfSavesIndexedOnce: a file saved 300 times in a row (sed -i in
// a loop) is indexed once, after the log went quiet, not once per save.
func TestBurstOfSavesIndexedOnce(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"other.txt": []byte("x\n")})
	// A quiet window no scheduling hiccup between two saves reaches.
	ix, err := OpenWith(data, st, Options{Background: true, settleQuiet: 3 * time.Second, settleMax: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	waitCovered(t, ix, st, sid)
	workerPid(t, ix)
	before := indexedAtLeast(t, ix, 1)
	if before != 1 {
		t.Fatalf("%d documents indexed for a tree of one file", before)
	}
	body := strings.Repeat("some text of a file being edited\n", 3000)
	for i := range 300 {
		putFile(t, st, sid, "edited.txt", []byte(fmt.Sprintf("%sversion %d\n", body, i)))
	}
	waitCovered(t, ix, st, sid)
	if n := indexedAtLeast(t, ix, before+1) - before; n != 1 {
		t.Errorf("edited.txt indexed %d times for 300 saves, want 1", n)
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-c", "version 299", "edited.txt"})
	if out != "1\n" || code != 0 || stats.Scanned || stats.Degraded {
		t.Errorf("grep -c 'version 299': %q exit %d %+v", out, code, stats)
	}
}

// TestWorkerKilledUnderMount: the same through a FUSE mount: kill -9 of
// the worker leaves the mount serving, .grep/ answers stay exact, files
// written meanwhile are found, and the index catches up with a new
// worker.
func TestWorkerKilledUnderMount(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a.txt": []byte("first needle\n")})
	ix, err := Open(data, st)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	mnt := mountSession(t, st, sid, &ix)
	waitCovered(t, ix, st, sid)
	pid := workerPid(t, ix)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	bash(t, mnt, `mkdir -p d && for i in 1 2 3; do echo "needle $i" > d/f$i.txt; done`)
	want := "a.txt:1:first needle\nd/f1.txt:1:needle 1\nd/f2.txt:1:needle 2\nd/f3.txt:1:needle 3\n"
	if out, code := shOut(t, mnt, `cat .grep/needle`); out != want || code != 0 {
		t.Fatalf("worker killed: .grep/needle exit %d, output differs:\n%s", code, diffLines(out, want))
	}
	waitCovered(t, ix, st, sid)
	if p := workerPid(t, ix); p == pid {
		t.Fatalf("worker %d still the one killed", p)
	}
	if out, code := shOut(t, mnt, `cat .grep/needle`); out != want || code != 0 {
		t.Fatalf("caught up: .grep/needle exit %d, output differs:\n%s", code, diffLines(out, want))
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-rn", "needle"})
	if out != want || code != 0 || stats.Scanned || stats.Degraded {
		t.Fatalf("caught up: exit %d %+v, output differs:\n%s", code, stats, diffLines(out, want))
	}
}

// TestRankersLeaveSchedIdle: a ranked search's rankers run on goroutines
// of their own, each on whatever thread Go gives it; the worker's threads
// are at SCHED_IDLE, so each ranker must leave it as the query's thread
// does, or a busy foreground starves the search (the p95 of the
// relevance set was hundreds of milliseconds at load 6).
func TestRankersLeaveSchedIdle(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root may leave SCHED_IDLE")
	}
	st, data := openStore(t)
	files := map[string][]byte{}
	for i := range 20 {
		files[fmt.Sprintf("pkg%d/reader_%d.go", i, i)] = []byte(fmt.Sprintf("package pkg%d\n\n// Reader buffers input.\nfunc NewReader() *Reader { return nil } // %d\n", i, i))
	}
	sid := loadSession(t, st, files)
	ix, err := Open(data, st)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	waitCovered(t, ix, st, sid)
	workerPid(t, ix)
	for range 5 {
		if hits, err := ix.Search(context.Background(), sid, "buffered reader NewReader", 5); err != nil || len(hits) == 0 {
			t.Fatalf("search: %d hits, %v", len(hits), err)
		}
	}
	if n := ix.be.stats().IdleRankers; n != 0 {
		t.Errorf("%d rankers ran at SCHED_IDLE, want 0", n)
	}
}

// TestWorkerMemLimit: $PADFS_INDEX_MEMLIMIT reaches the index worker as
// its soft memory limit; unset (or invalid), the worker takes
// workerGCLimit (without GOGC and GOMEMLIMIT in its environment).
func TestWorkerMemLimit(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int64
	}{{"", workerGCLimit}, {"300MiB", 300 << 20}, {"off", math.MaxInt64}, {"bogus", workerGCLimit}} {
		t.Run(c.env, func(t *testing.T) {
			t.Setenv(memLimitEnv, c.env)
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv("GOGC", "")
			st, data := openStore(t)
			sid := loadSession(t, st, map[string][]byte{"a": []byte("hello\n")})
			ix, err := Open(data, st)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			waitCovered(t, ix, st, sid)
			s := ix.be.stats()
			if s.Pid == 0 || s.Pid == os.Getpid() {
				t.Fatalf("no index worker (pid %d)", s.Pid)
			}
			if s.MemLimit != c.want {
				t.Errorf("%s=%q: worker's memory limit %d, want %d", memLimitEnv, c.env, s.MemLimit, c.want)
			}
		})
	}
}

func TestWorkerMemLimitParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		bad  bool
	}{{"", defaultMemLimit, false}, {"1GiB", 1 << 30, false}, {"64KiB", 64 << 10, false}, {"1000", 1000, false},
		{"5B", 5, false}, {"off", math.MaxInt64, false}, {"0", 0, true}, {"-1MiB", 0, true}, {"12MB", 0, true},
		{"99999999999TiB", 0, true}} {
		got, err := workerMemLimit(c.in)
		if (err != nil) != c.bad || (!c.bad && got != c.want) {
			t.Errorf("workerMemLimit(%q) = %d, %v; want %d (error: %v)", c.in, got, err, c.want, c.bad)
		}
	}
}
