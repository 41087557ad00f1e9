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
