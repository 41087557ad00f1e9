package search

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
)

// TestBenchIndexBuild measures a full index build of $(go env GOROOT)/src
// in this process (wall and CPU time, index size). It is skipped unless
// PADFS_BENCH_INDEX=1; PADFS_BENCH_CPUPROFILE=FILE writes a CPU profile
// of the build:
//
//	PADFS_BENCH_INDEX=1 go test ./search -run TestBenchIndexBuild -v -timeout 30m
func TestBenchIndexBuild(t *testing.T) {
	if os.Getenv("PADFS_BENCH_INDEX") == "" {
		t.Skip("set PADFS_BENCH_INDEX=1 to run the index build benchmark")
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := st.CreateSession("gosrc", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	files, content := loadTreeFromDisk(t, st, h.ID, src)
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if p := os.Getenv("PADFS_BENCH_CPUPROFILE"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	cpu0 := cpuTime()
	start := time.Now()
	if err := ix.Rebuild(t.Context(), h.ID, nil); err != nil {
		t.Fatal(err)
	}
	wall, cpu := time.Since(start), cpuTime()-cpu0
	size, _ := ix.Size(h.ID)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	t.Logf("%d files, %.1f MB: build %.1fs wall (%.1f MB/s), %.1f CPU-s (%.1f MB per CPU-s); index %.1f MB = %.2f x content; max RSS %d MB",
		files, float64(content)/1e6, wall.Seconds(), float64(content)/1e6/wall.Seconds(),
		cpu.Seconds(), float64(content)/1e6/cpu.Seconds(), float64(size)/1e6, float64(size)/float64(content), ru.Maxrss>>10)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestBenchIndexWorker measures what the index lag after an untar is made
// of: Go's src tree (PADFS_BENCH_TREE=DIR: another tree) written into a
// fresh session through the store, then indexed by an index with its real
// worker (the child process a mount starts, at SCHED_IDLE); with
// PADFS_BENCH_FOLLOW=1 an index that covers the session's first file
// follows the writes with a mount's settle delays instead (catch-ups from
// the log, as after an untar's first seconds). It reports the lag (from the last write until the
// index covers it) and the content MB/s over it, the worker's CPU
// seconds over its whole life (and per MB) and peak RSS (from its rusage
// once it exited), and the index size over the content. Skipped unless
// PADFS_BENCH_INDEX=1:
//
//	PADFS_BENCH_INDEX=1 go test ./search -run 'TestBenchIndexWorker$' -v -timeout 30m
func TestBenchIndexWorker(t *testing.T) {
	if os.Getenv("PADFS_BENCH_INDEX") == "" {
		t.Skip("set PADFS_BENCH_INDEX=1 to run the index worker benchmark")
	}
	src := os.Getenv("PADFS_BENCH_TREE")
	if src == "" {
		src = filepath.Join(goroot(t), "src")
	}
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := st.CreateSession("bench", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	// Following the writes is how a mount meets an untar, but when the
	// worker gets to run varies with the machine's load: by default the
	// tree is written first and the index then built from empty (the same
	// work per document, in a build's batches), which repeats better.
	follow := os.Getenv("PADFS_BENCH_FOLLOW") != ""
	var ix *Index
	closed := false
	defer func() {
		if ix != nil && !closed {
			ix.Close()
		}
	}()
	var ru0 syscall.Rusage
	open := func() {
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru0)
		if ix, err = OpenWith(data, st, Options{Background: true}); err != nil {
			t.Fatal(err)
		}
	}
	if follow {
		// An index that covers the session already: the tree then comes
		// in catch-ups from the log (as after the first seconds of an
		// untar), not in a build from empty.
		putFile(t, st, h.ID, "README", []byte("bench\n"))
		open()
		benchWaitCovered(t, ix, st, h.ID)
	}
	start := time.Now()
	files, content := loadTreeFromDisk(t, st, h.ID, src)
	loaded := time.Now()
	if !follow {
		open()
	}
	benchWaitCovered(t, ix, st, h.ID)
	lag := time.Since(loaded)
	size, _ := ix.Size(h.ID)
	closed = true
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	worker := time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) - time.Duration(ru0.Utime.Nano()+ru0.Stime.Nano())
	mb := float64(content) / 1e6
	load, _ := os.ReadFile("/proc/loadavg")
	t.Logf("%d files, %.1f MB loaded in %.1fs; index lag %.1fs (%.1f MB/s); worker %.1f CPU-s (%.3f CPU-s/MB), peak RSS %d MB; index %.1f MB = %.2f x content; loadavg %s",
		files, mb, loaded.Sub(start).Seconds(), lag.Seconds(), mb/lag.Seconds(), worker.Seconds(), worker.Seconds()/mb, ru.Maxrss>>10,
		float64(size)/1e6, float64(size)/float64(content), strings.TrimSpace(string(load)))
	if size == 0 {
		t.Fatal("empty index")
	}
}

// benchWaitCovered waits until ix covers sid's last commit, however long
// (a loaded machine starves the idle worker for minutes).
func benchWaitCovered(t *testing.T, ix *Index, st *mvcc.Store, sid mvcc.SessionID) {
	var last uint64
	if err := st.View(func(tx *mvcc.ReadTx) error {
		var err error
		last, _, err = tx.LastEvent(sid)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for {
		seq, _, err := ix.Covered(sid)
		if err != nil {
			t.Fatal(err)
		}
		if seq >= last {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
