package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestBenchBigDir measures one directory of many files (issue 10.5):
// create, `ls -l`, a stat of each name and `rm -rf`, on go-fuse's loopback
// over the local filesystem and on padfs, each cold (a fresh mount, so the
// kernel's caches are empty) where it says so; then, on padfs, `ls -l` of
// a directory that once held as many short-lived files and now holds 20,
// against one that only ever held 20. It measures; it asserts only that the
// targets list the same.
//
//	PADFS_BENCH_BIGDIR=1 [PADFS_BENCH_BIGDIR_N=100000] go test ./e2e -run 'TestBenchBigDir$' -v -timeout 2h
func TestBenchBigDir(t *testing.T) {
	if os.Getenv("PADFS_BENCH_BIGDIR") != "1" {
		t.Skip("set PADFS_BENCH_BIGDIR=1 to run the big-directory benchmark")
	}
	needFUSE(t)
	n := 100000
	if v := os.Getenv("PADFS_BENCH_BIGDIR_N"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("PADFS_BENCH_BIGDIR_N=%q: want a positive integer", v)
		}
	}
	base := t.TempDir()
	loopbackBin := buildLoopback(t)
	lbOrig := filepath.Join(base, "loopback-orig")
	data := filepath.Join(base, "data")
	if err := os.Mkdir(lbOrig, 0o755); err != nil {
		t.Fatal(err)
	}
	sid := newSession(t, data, "bigdir")
	vars := []string{"N=" + strconv.Itoa(n)}
	loadStart := loadAvg()

	// fresh returns a new mount of the target and its server's pid: the
	// kernel knows nothing of it yet.
	mounts := 0
	fresh := func(target string) (string, int) {
		mounts++
		mnt := filepath.Join(base, fmt.Sprintf("%s-%d", target, mounts))
		if err := os.Mkdir(mnt, 0o755); err != nil {
			t.Fatal(err)
		}
		if target == "loopback" {
			return mnt, startLoopback(t, loopbackBin, lbOrig, mnt)
		}
		m := startMount(t, data, mnt, "--session", sid)
		padfsMounts = append(padfsMounts, m)
		return mnt, m.cmd.Process.Pid
	}
	type row struct {
		secs, cpu float64
		load      string
	}
	results := map[string]map[string]row{}
	measure := func(target, name, dir string, pid int, script string) string {
		cpu0 := procCPU(pid)
		start := time.Now()
		out := benchSh(t, data, dir, vars, script)
		r := row{time.Since(start).Seconds(), procCPU(pid) - cpu0, loadAvg()}
		if results[name] == nil {
			results[name] = map[string]row{}
		}
		results[name][target] = r
		t.Logf("%s %s: %.2f s, server CPU %.2f s, load %s", target, name, r.secs, r.cpu, r.load)
		return out
	}
	create := `mkdir d && cd d && python3 -c 'import os
for i in range(int(os.environ["N"])): open("f%06d" % i, "w").close()'`
	stat := `cd d && python3 -c 'import os
for i in range(int(os.environ["N"])): os.stat("f%06d" % i)'`
	listings := map[string]string{}
	for _, target := range []string{"loopback", "padfs"} {
		mnt, pid := fresh(target)
		measure(target, "create", mnt, pid, create)
		stopPadfs(t)
		mnt, pid = fresh(target)
		listings[target] = measure(target, "ls -l (cold)", mnt, pid, `ls -l d | wc -l`)
		measure(target, "ls -l (warm)", mnt, pid, `ls -l d | wc -l`)
		stopPadfs(t)
		mnt, pid = fresh(target)
		measure(target, "stat each (cold)", mnt, pid, stat)
		measure(target, "rm -rf", mnt, pid, `rm -rf d`)
		stopPadfs(t)
	}
	if listings["padfs"] != listings["loopback"] || strings.TrimSpace(listings["padfs"]) != strconv.Itoa(n+1) {
		t.Errorf("ls -l | wc -l: loopback %q, padfs %q, want %d", listings["loopback"], listings["padfs"], n+1)
	}

	// padfs against itself: a churned directory and a quiet one, cold.
	mnt, pid := fresh("padfs")
	measure("padfs", "churn", mnt, pid, `mkdir churned quiet && for i in $(seq -w 20); do : > churned/keep$i; : > quiet/keep$i; done
cd churned && python3 -c 'import os
n = int(os.environ["N"])
for i in range(n): open("tmp%06d.o" % i, "w").close()
for i in range(n): os.unlink("tmp%06d.o" % i)'`)
	stopPadfs(t)
	mnt, pid = fresh("padfs")
	churned := measure("padfs", "ls -l churned (cold)", mnt, pid, `ls -l churned`)
	quiet := measure("padfs", "ls -l quiet (cold)", mnt, pid, `ls -l quiet`)
	if strings.Count(churned, "keep") != 20 || strings.Count(quiet, "keep") != 20 {
		t.Errorf("ls -l churned:\n%s\nls -l quiet:\n%s", churned, quiet)
	}
	stopPadfs(t)

	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s\nload average (1, 5, 15 min): %s at the start, %s at the end\n\n", machine(base), loadStart, loadAvg())
	fmt.Fprintf(&b, "%d files in one directory\n\n", n)
	fmt.Fprintln(&b, "| workload | loopback s | padfs s | padfs/loopback | loopback CPU s | padfs CPU s | load (1 min) after padfs |")
	fmt.Fprintln(&b, "|---|---:|---:|---:|---:|---:|---|")
	for _, w := range []string{"create", "ls -l (cold)", "ls -l (warm)", "stat each (cold)", "rm -rf"} {
		l, p := results[w]["loopback"], results[w]["padfs"]
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %s |\n", w, l.secs, p.secs, p.secs/l.secs, l.cpu, p.cpu, strings.Fields(p.load)[0])
	}
	c, q := results["ls -l churned (cold)"]["padfs"], results["ls -l quiet (cold)"]["padfs"]
	fmt.Fprintf(&b, "\npadfs ls -l of 20 files, cold: %.3f s (CPU %.3f s) in a directory that had %d more; %.3f s (CPU %.3f s) in one that only had 20\n",
		c.secs, c.cpu, n, q.secs, q.cpu)
	fmt.Print("\n" + b.String())
}

// padfsMounts are the benchmark's padfs mounts; stopPadfs ends them (a
// session has one writable mount at a time).
var padfsMounts []*mount

func stopPadfs(t *testing.T) {
	t.Helper()
	for _, m := range padfsMounts {
		m.stop()
	}
	padfsMounts = nil
}
