package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/internal/testtrees"
)

// The end-to-end benchmark: the real padfs binary mounted as a user mounts
// it (index on), go-fuse's loopback example (built from this module's
// graph) over a directory of the same disk, the same loopback without FUSE
// passthrough (loopbacknopt: the example hands its files' data to the
// kernel, so its data rows are ext4's), and a plain directory, driven
// by the same shell workloads, interleaved target by target within each
// workload. It prints one markdown table. The README's performance
// numbers come from it:
//
//	PADFS_BENCH_E2E=1 go test ./e2e -run 'TestBenchE2E$' -v -timeout 120m
//
// PADFS_BENCH_ROUNDS=N repeats the whole sequence N times and prints
// medians (rounds after the first untar content padfs has stored before,
// so its chunk dedup flatters it there). PADFS_BENCH_TREE=a,b,... tars
// only those directories of $(go env GOROOT)/src instead of all of it.
// PADFS_BENCH_BIG_MB sets the size of the write+fsync file (512).
// PADFS_BENCH_ONLY=name,... runs only those workloads (for iterating on
// one path, e.g. 'write + fsync,read back,fresh 1 MB files');
// PADFS_BENCH_CPUPROFILE=FILE mounts padfs with --cpuprofile FILE (and
// padfs-pg with FILE.pg).
// PADFS_BENCH_MOUNT_ARGS="--flag ..." adds flags to padfs mount (to
// compare a mount option in one build, e.g. --passthrough=off).
// PADFS_BENCH_STORE=postgres adds a fourth target in the same run: padfs
// on a PostgreSQL store (--store, a throwaway pgtest server on this
// machine), with its ratio to padfs on its own bbolt store and the
// server's CPU seconds per workload:
//
//	PADFS_BENCH_E2E=1 PADFS_BENCH_STORE=postgres PADFS_BENCH_TREE=go,text go test ./e2e -run 'TestBenchE2E$' -v -timeout 120m
//
// TestBenchE2ESmoke runs every workload once at a tiny scale in the normal
// suite and checks that the targets produce the same results, so
// the harness cannot rot.

// benchConfig is the scale of one benchmark run.
type benchConfig struct {
	tree    []string // directories of GOROOT/src to tar ("." for all)
	rounds  int
	nSmall  int // small files created, cat'ed and removed
	nSed    int // files edited by the sed -i loop
	bigMB   int // the write+fsync file
	freshMB int // fresh 1 MB files
	report  bool
	only    map[string]bool // workloads to run (nil: all)
	cpuProf string          // padfs mount --cpuprofile
	pg      bool            // also padfs on a PostgreSQL store
}

// benchWorkload is one row of the table. prep runs untimed before run;
// check runs untimed after it. The output of run and check must be the
// same on every target.
type benchWorkload struct {
	name, prep, run, check string
}

var benchWorkloads = []benchWorkload{
	{name: "untar", run: `mkdir src && tar -xf "$TARBALL" -C src`,
		check: `find src -type f | wc -l; find src -type f -print0 | sort -z | xargs -0 cat | sha256sum`},
	{name: "grep -rn", run: `grep -rnF 'func (t *Tree) ' src | sort`},
	{name: "find + ls -lR", run: `find src | wc -l; ls -lR src | wc -l`},
	// git commit of 12k+ loose objects starts git gc --auto; detached, it
	// would run into the next rows (and keep the mount busy at its end),
	// so it runs in the row, on every target.
	{name: "git init/add/commit/status", run: `cd src
git init -q -b main
git add -A
git -c gc.autoDetach=false commit -q -m import
git status --porcelain`,
		check: `cd src && git rev-parse 'HEAD^{tree}' && test -z "$(git status --porcelain)"`},
	{name: "small files create/cat/rm", run: `mkdir small
for i in $(seq "$NSMALL"); do echo "small file $i" > small/f$i; done
cat small/* | sha256sum
rm small/*
rmdir small`},
	{name: "sed -i loop", run: `files=$(find src/go -type f -name '*.go' | sort | sed -n "1,${NSED}p")
for f in $files; do sed -i 's/Copyright/COPYRIGHT/' "$f"; done`,
		check: `files=$(find src/go -type f -name '*.go' | sort | sed -n "1,${NSED}p"); echo $files | wc -w; cat $files | sha256sum`},
	{name: "write + fsync", run: `dd if="$RAND" of=big bs=1M count="$BIG_MB" conv=fsync status=none`},
	{name: "read back", run: `dd if=big of=/dev/null bs=1M status=none`,
		check: `sha256sum < big`},
	{name: "fresh 1 MB files", run: `mkdir fresh
dd if="$RAND" bs=1M skip="$BIG_MB" count="$FRESH_MB" status=none | split -b 1M -a 4 - fresh/f`,
		check: `ls fresh | wc -l; cat fresh/* | sha256sum`},
	{name: "go build",
		// The module (testdata/trees/benchmod) with text/template/parse
		// beside it as benchmod/parse.
		prep:  `mkdir -p "gomod$ROUND" && cp -r "$BENCHMOD/." "gomod$ROUND/" && cp -r "$PARSE" "gomod$ROUND/parse"`,
		run:   `cd "gomod$ROUND" && go build -o bin/ ./...`,
		check: `"gomod$ROUND/bin/bench"`},
	{name: "go test", run: `cd "gomod$ROUND" && go test -count=1 ./... | sed 's/\t[0-9.]*s$//'`},
	{name: "rm -rf", run: `rm -rf src big fresh "gomod$ROUND"`, check: `ls | wc -l`},
}

// benchTarget is one directory the workloads run in.
type benchTarget struct {
	name string
	dir  string
	pid  int    // the FUSE server's process (0: none)
	data string // padfs's data directory (the bbolt one for the others)
}

func TestBenchE2E(t *testing.T) {
	if os.Getenv("PADFS_BENCH_E2E") != "1" {
		t.Skip("set PADFS_BENCH_E2E=1 to run the end-to-end benchmark")
	}
	needFUSE(t)
	c := benchConfig{tree: []string{"."}, rounds: 1, nSmall: 2000, nSed: 200, bigMB: 512, freshMB: 256, report: true}
	if v := os.Getenv("PADFS_BENCH_TREE"); v != "" {
		c.tree = strings.Split(v, ",")
	}
	if v := os.Getenv("PADFS_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PADFS_BENCH_ROUNDS=%q: want a positive integer", v)
		}
		c.rounds = n
	}
	if v := os.Getenv("PADFS_BENCH_BIG_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("PADFS_BENCH_BIG_MB=%q: want a positive integer", v)
		}
		c.bigMB = n
	}
	if v := os.Getenv("PADFS_BENCH_ONLY"); v != "" {
		c.only = map[string]bool{}
		for _, w := range strings.Split(v, ",") {
			if !slices.ContainsFunc(benchWorkloads, func(b benchWorkload) bool { return b.name == w }) {
				t.Fatalf("PADFS_BENCH_ONLY: no workload %q", w)
			}
			c.only[w] = true
		}
	}
	c.cpuProf = os.Getenv("PADFS_BENCH_CPUPROFILE")
	switch v := os.Getenv("PADFS_BENCH_STORE"); v {
	case "", "bolt":
	case "postgres":
		c.pg = true
	default:
		t.Fatalf("PADFS_BENCH_STORE=%q: want postgres (or empty)", v)
	}
	runBench(t, c)
}

// TestBenchE2ESmoke runs every workload of the benchmark once at a tiny
// scale and checks the targets agree; it measures nothing.
func TestBenchE2ESmoke(t *testing.T) {
	needFUSE(t)
	runBench(t, benchConfig{tree: []string{"go/token", "go/scanner", "text/template"},
		rounds: 1, nSmall: 50, nSed: 5, bigMB: 4, freshMB: 4})
}

// benchSample is one workload on one target in one round.
type benchSample struct {
	secs, cpu float64 // wall time; the FUSE server's CPU seconds
	srv       float64 // the PostgreSQL server's CPU seconds (padfs-pg only)
}

func runBench(t *testing.T, c benchConfig) {
	base := t.TempDir()
	loopbackBin, noptBin := buildLoopbacks(t)
	plain := filepath.Join(base, "plain")
	lbOrig, lbMnt := filepath.Join(base, "loopback-orig"), filepath.Join(base, "loopback-mnt")
	noptOrig, noptMnt := filepath.Join(base, "nopt-orig"), filepath.Join(base, "nopt-mnt")
	data, mnt := filepath.Join(base, "data"), filepath.Join(base, "padfs-mnt")
	for _, d := range []string{plain, lbOrig, lbMnt, noptOrig, noptMnt, mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	lbPid := startLoopback(t, loopbackBin, lbOrig, lbMnt)
	noptPid := startLoopback(t, noptBin, noptOrig, noptMnt)
	sid := newSession(t, data, "bench")
	margs := []string{"--session", sid}
	if c.cpuProf != "" {
		margs = append(margs, "--cpuprofile", c.cpuProf)
	}
	margs = append(margs, strings.Fields(os.Getenv("PADFS_BENCH_MOUNT_ARGS"))...)
	m := startMount(t, data, mnt, margs...)
	targets := []benchTarget{{"plain", plain, 0, data}, {"loopback", lbMnt, lbPid, data}, {"padfs", mnt, m.cmd.Process.Pid, data}}
	var pgSid string
	pgSrv := 0 // the PostgreSQL server's pid
	if c.pg {
		srv := pgtest.StartT(t)
		url := srv.DB(t)
		pgSrv = srv.Pid()
		pgData, pgMnt := filepath.Join(base, "pg-data"), filepath.Join(base, "padfs-pg-mnt")
		if err := os.Mkdir(pgMnt, 0o755); err != nil {
			t.Fatal(err)
		}
		pgSid = mustPgPadfs(t, pgData, url, "session", "new", "--name", "bench")
		pargs := []string{"--store", url, "--session", pgSid}
		if c.cpuProf != "" {
			pargs = append(pargs, "--cpuprofile", c.cpuProf+".pg")
		}
		pm := startMount(t, pgData, pgMnt, pargs...)
		targets = append(targets, benchTarget{"padfs-pg", pgMnt, pm.cmd.Process.Pid, pgData})
	}
	// Last, so that the targets above keep their places (targets[3]).
	targets = append(targets, benchTarget{"nopt", noptMnt, noptPid, data})

	benchMod, err := testtrees.Dir("benchmod")
	if err != nil {
		t.Fatal(err)
	}
	tarball := filepath.Join(base, "src.tar")
	sh(t, "", goRootSrc, `tar -cf "`+tarball+`" `+strings.Join(c.tree, " "))
	goCache := strings.TrimSpace(sh(t, "", base, "go env GOCACHE"))
	goModCache := strings.TrimSpace(sh(t, "", base, "go env GOMODCACHE"))
	rnd := filepath.Join(base, "random")

	loadStart := loadAvg()
	samples := map[string]map[string][]benchSample{}
	var lags, lagCPU, idxRatio, pgLags []float64
	var content int64 // bytes of the untarred tree's files
	var padfsGrep []float64
	var lagGrep [][3]float64 // while the index lags: padfs grep s, GNU grep -rnF s, events behind
	for round := 1; round <= c.rounds; round++ {
		// Fresh random bytes each round, so padfs cannot dedup them
		// against an earlier round.
		sh(t, "", base, fmt.Sprintf(`head -c %dM /dev/urandom > "%s"`, c.bigMB+c.freshMB, rnd))
		wantBig := strings.TrimSpace(sh(t, "", base, fmt.Sprintf(`head -c %dM "%s" | sha256sum`, c.bigMB, rnd)))
		vars := []string{
			"TARBALL=" + tarball, "RAND=" + rnd, "ROUND=" + strconv.Itoa(round),
			"NSMALL=" + strconv.Itoa(c.nSmall), "NSED=" + strconv.Itoa(c.nSed),
			"BIG_MB=" + strconv.Itoa(c.bigMB), "FRESH_MB=" + strconv.Itoa(c.freshMB),
			"PARSE=" + filepath.Join(goRootSrc, "text/template/parse"), "BENCHMOD=" + benchMod,
			// The go command's caches stay outside every target.
			"GOCACHE=" + goCache, "GOMODCACHE=" + goModCache, "GOFLAGS=", "GOWORK=off",
			"GOTOOLCHAIN=local", "GOPROXY=off",
		}
		for _, w := range benchWorkloads {
			if c.only != nil && !c.only[w.name] {
				continue
			}
			if samples[w.name] == nil {
				samples[w.name] = map[string][]benchSample{}
			}
			outs := map[string]string{}
			for _, tg := range targets {
				if w.prep != "" {
					benchSh(t, tg.data, tg.dir, vars, w.prep)
				}
				srvCPU := func() float64 {
					if tg.name != "padfs-pg" {
						return 0
					}
					u, s := pgtest.TreeCPU(pgSrv)
					return u + s
				}
				cpu0, srv0 := procCPU(tg.pid), srvCPU()
				start := time.Now()
				out := benchSh(t, tg.data, tg.dir, vars, w.run)
				secs := time.Since(start).Seconds()
				s := benchSample{secs: secs, cpu: procCPU(tg.pid) - cpu0, srv: srvCPU() - srv0}
				samples[w.name][tg.name] = append(samples[w.name][tg.name], s)
				if w.name == "untar" {
					if tg.name == "plain" {
						content = treeBytes(t, filepath.Join(plain, "src"))
					}
					if tg.name == "padfs" {
						// Right after the untar, while the index lags:
						// padfs grep against GNU grep over the mount
						// (both count in the lag below).
						lagGrep = append(lagGrep, grepWhileLagging(t, data, mnt, sid, vars))
						lag, cpu := indexLag(t, data, sid, start.Add(time.Duration(secs*float64(time.Second))), tg.pid)
						lags, lagCPU = append(lags, lag), append(lagCPU, cpu)
						idxRatio = append(idxRatio, float64(treeBytes(t, filepath.Join(data, "index", sid)))/float64(content))
					}
					if tg.name == "padfs-pg" {
						lag, _ := indexLag(t, tg.data, pgSid, start.Add(time.Duration(secs*float64(time.Second))), tg.pid)
						pgLags = append(pgLags, lag)
					}
				}
				if w.check != "" {
					out += benchSh(t, tg.data, tg.dir, vars, w.check)
				}
				outs[tg.name] = out
				// Leave no dirty page cache of one target to be written
				// back during the next target's turn.
				sh(t, "", base, "sync")
			}
			checkBenchOutputs(t, w.name, outs, round, targets)
			if w.name == "grep -rn" {
				// padfs's own grep, through the index, from inside the mount.
				start := time.Now()
				out := benchSh(t, data, mnt, vars, `padfs grep -rnF 'func (t *Tree) ' src | sort`)
				padfsGrep = append(padfsGrep, time.Since(start).Seconds())
				if out != outs["padfs"] {
					t.Errorf("round %d: padfs grep -rnF printed\n%.2000s\ngrep -rnF on the mount printed\n%.2000s", round, out, outs["padfs"])
				}
			}
			if w.name == "read back" && !strings.HasPrefix(outs["padfs"], strings.Fields(wantBig)[0]) {
				t.Errorf("round %d: read back: padfs's big file hashes to %q, want %q", round, outs["padfs"], wantBig)
			}
		}
	}
	var rss int64
	var parts []string // each process's share, to tell the mount from its index worker
	for i, p := range procTree(targets[2].pid) {
		kb := procStatusKB(p, "VmHWM")
		rss += kb
		if i == 0 {
			// File-backed pages (bbolt's mmap of padfs.db) count in RSS
			// but are the page cache's, not the process's memory.
			parts = append(parts, fmt.Sprintf("mount %.0f MB, at the end %.0f MB anonymous + %.0f MB file-backed",
				float64(kb)/1024, float64(procStatusKB(p, "RssAnon"))/1024, float64(procStatusKB(p, "RssFile"))/1024))
		} else {
			parts = append(parts, fmt.Sprintf("child %.0f MB", float64(kb)/1024))
		}
	}
	lbRSS := procStatusKB(lbPid, "VmHWM")
	var pgRSS int64
	if c.pg {
		for _, p := range procTree(targets[3].pid) {
			pgRSS += procStatusKB(p, "VmHWM")
		}
	}

	var b strings.Builder
	fmt.Fprintf(&b, "machine: %s\nload average (1, 5, 15 min): %s at the start, %s at the end\n\n", machine(base), loadStart, loadAvg())
	fmt.Fprintf(&b, "tree: %s of %s (%.1f MB, %d rounds, medians)\n\n", strings.Join(c.tree, ","), goRootSrc, float64(content)/1e6, c.rounds)
	// nopt is go-fuse's loopback without FUSE passthrough (loopbacknopt):
	// the example passes its files' reads and writes to the kernel, so
	// its data rows are ext4's; padfs/nopt compares two FUSE servers.
	head := "| workload | plain s | loopback s | padfs s | padfs/loopback | padfs CPU s | loopback CPU s | nopt s | padfs/nopt |"
	rule := "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
	if c.pg {
		head += " padfs-pg s | pg/bbolt | padfs-pg CPU s | server CPU s |"
		rule += "---:|---:|---:|---:|"
	}
	fmt.Fprintln(&b, head)
	fmt.Fprintln(&b, rule)
	med := func(w, tg string, f func(benchSample) float64) float64 {
		var v []float64
		for _, s := range samples[w][tg] {
			v = append(v, f(s))
		}
		return median(v)
	}
	secs := func(s benchSample) float64 { return s.secs }
	cpu := func(s benchSample) float64 { return s.cpu }
	for _, w := range benchWorkloads {
		if c.only != nil && !c.only[w.name] {
			continue
		}
		p, l, x := med(w.name, "plain", secs), med(w.name, "loopback", secs), med(w.name, "padfs", secs)
		n := med(w.name, "nopt", secs)
		fmt.Fprintf(&b, "| %s | %.3f | %.3f | %.3f | %.2f | %.2f | %.2f | %.3f | %.2f |", w.name, p, l, x, x/l,
			med(w.name, "padfs", cpu), med(w.name, "loopback", cpu), n, x/n)
		if c.pg {
			g := med(w.name, "padfs-pg", secs)
			fmt.Fprintf(&b, " %.3f | %.2f | %.2f | %.2f |", g, g/x, med(w.name, "padfs-pg", cpu),
				med(w.name, "padfs-pg", func(s benchSample) float64 { return s.srv }))
		}
		fmt.Fprintln(&b)
	}
	fmt.Fprintln(&b)
	mbps := func(w string, mb int) {
		if len(samples[w]["padfs"]) == 0 {
			return
		}
		p, l, x := float64(mb)/med(w, "plain", secs), float64(mb)/med(w, "loopback", secs), float64(mb)/med(w, "padfs", secs)
		n := float64(mb) / med(w, "nopt", secs)
		fmt.Fprintf(&b, "%s (%d MB): plain %.0f MB/s, loopback %.0f MB/s, padfs %.0f MB/s (%.0f%% of loopback), nopt %.0f MB/s (padfs %.0f%% of it)\n",
			w, mb, p, l, x, 100*x/l, n, 100*x/n)
	}
	mbps("write + fsync", c.bigMB)
	mbps("read back", c.bigMB)
	mbps("fresh 1 MB files", c.freshMB)
	fmt.Fprintf(&b, "padfs grep -rnF (through the index, same output): %.3f s (grep -rnF on the mount: %.3f s)\n", median(padfsGrep), med("grep -rn", "padfs", secs))
	for _, g := range lagGrep {
		fmt.Fprintf(&b, "while the index lagged (%.0f events behind): padfs grep -rnF %.3f s, GNU grep -rnF on the mount %.3f s (same output)\n", g[2], g[0], g[1])
	}
	fmt.Fprintf(&b, "index lag after untar: %.2f s (padfs CPU during catch-up %.2f s; the greps above ran in it)\n", median(lags), median(lagCPU))
	fmt.Fprintf(&b, "index size / content size: %.2f\n", median(idxRatio))
	fmt.Fprintf(&b, "padfs peak RSS: %.0f MB (loopback %.0f MB; %s)\n", float64(rss)/1024, float64(lbRSS)/1024, strings.Join(parts, "; "))
	if c.pg {
		fmt.Fprintf(&b, "padfs-pg: index lag after untar %.2f s, peak RSS %.0f MB (padfs only, not the server)\n", median(pgLags), float64(pgRSS)/1024)
	}
	if c.report {
		fmt.Print("\n" + b.String())
	} else {
		t.Log("\n" + b.String())
	}
}

// benchSh runs a workload script with the benchmark's variables.
func benchSh(t *testing.T, data, dir string, vars []string, script string) string {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	cmd.Env = append(env(data), vars...)
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("script failed (exit %d) in %s:\n%s\nstdout:\n%s\nstderr:\n%s", r.code, dir, script, r.out, r.errout)
	}
	return r.out
}

// checkBenchOutputs fails the test unless every target printed the same
// (non-empty, where the workload prints) result.
func checkBenchOutputs(t *testing.T, w string, outs map[string]string, round int, targets []benchTarget) {
	t.Helper()
	if w == "grep -rn" && outs["plain"] == "" {
		t.Errorf("round %d: %s found nothing on the plain directory", round, w)
	}
	for _, tg := range targets[1:] {
		if outs[tg.name] != outs["plain"] {
			t.Errorf("round %d: %s: %s printed\n%.2000s\nthe plain directory printed\n%.2000s", round, w, tg.name, outs[tg.name], outs["plain"])
		}
	}
}

var loopbackOnce struct {
	sync.Once
	bin, nopt string
	err       error
}

// buildLoopbacks builds go-fuse's example/loopback at the version in this
// module's graph, and the same without FUSE passthrough (loopbacknopt).
func buildLoopbacks(t *testing.T) (loopback, nopt string) {
	t.Helper()
	loopbackOnce.Do(func() {
		loopbackOnce.bin, loopbackOnce.nopt = filepath.Join(binDir, "loopback"), filepath.Join(binDir, "loopbacknopt")
		for bin, pkg := range map[string]string{
			loopbackOnce.bin:  "github.com/hanwen/go-fuse/v2/example/loopback",
			loopbackOnce.nopt: "github.com/padfs/padfs/e2e/loopbacknopt",
		} {
			if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
				loopbackOnce.err = fmt.Errorf("go build %s: %v: %s", pkg, err, out)
				return
			}
		}
	})
	if loopbackOnce.err != nil {
		t.Fatal(loopbackOnce.err)
	}
	return loopbackOnce.bin, loopbackOnce.nopt
}

// startLoopback mounts orig at mnt with a loopback (the example, or
// loopbacknopt) and returns its pid; t.Cleanup unmounts it.
func startLoopback(t *testing.T, bin, orig, mnt string) int {
	t.Helper()
	args := []string{"-q"}
	if os.Geteuid() == 0 {
		args = append(args, "-directmount") // no fusermount3 needed as root
	}
	cmd := exec.Command(bin, append(args, mnt, orig)...)
	var errout syncBuffer
	cmd.Stderr = &errout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			t.Errorf("loopback (pid %d) did not exit a minute after SIGTERM", cmd.Process.Pid)
			cmd.Process.Kill()
			<-exited
		}
		if err := detach(mnt); err != nil {
			t.Error(err)
		}
	})
	waitFor(t, "loopback mount at "+mnt, func() bool {
		select {
		case <-exited:
			t.Fatalf("loopback exited before mounting: %s", errout.String())
		default:
		}
		return isMounted(mnt)
	})
	return cmd.Process.Pid
}

// indexStatus is one session's object of `padfs index status --json`.
type indexStatus struct {
	Session string `json:"session"`
	Covered uint64 `json:"covered"`
	Last    uint64 `json:"last"`
}

// grepWhileLagging runs padfs grep and then GNU grep -rnF over the mount
// right after the untar, checks they print the same, and returns their
// times and how many events the index was behind before the first.
func grepWhileLagging(t *testing.T, data, mnt, sid string, vars []string) [3]float64 {
	t.Helper()
	behind := 0.0
	var st struct {
		Sessions []indexStatus `json:"sessions"`
	}
	if err := json.Unmarshal([]byte(mustPadfs(t, data, "index", "status", "--json")), &st); err == nil {
		for _, s := range st.Sessions {
			if s.Session == sid {
				behind = float64(s.Last - s.Covered)
			}
		}
	}
	const pat = `'func (t *Tree) ' src | sort`
	start := time.Now()
	own := benchSh(t, data, mnt, vars, `padfs grep -rnF `+pat)
	ownSecs := time.Since(start).Seconds()
	start = time.Now()
	gnu := benchSh(t, data, mnt, vars, `grep -rnF `+pat)
	gnuSecs := time.Since(start).Seconds()
	if own != gnu {
		t.Errorf("while the index lagged, padfs grep -rnF printed\n%.2000s\nGNU grep -rnF on the mount printed\n%.2000s", own, gnu)
	}
	return [3]float64{ownSecs, gnuSecs, behind}
}

// indexLag waits until padfs's index covers the session's last commit
// and returns the seconds since end (the end of the untar) and the CPU
// seconds padfs spent meanwhile.
func indexLag(t *testing.T, data, sid string, end time.Time, pid int) (lag, cpu float64) {
	t.Helper()
	cpu0 := procCPU(pid)
	mustPadfs(t, data, "now") // commits whatever the mount still buffers
	status := func() indexStatus {
		var st struct {
			Sessions []indexStatus `json:"sessions"`
		}
		out := mustPadfs(t, data, "index", "status", "--json")
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("padfs index status --json: %q: %v", out, err)
		}
		for _, s := range st.Sessions {
			if s.Session == sid {
				return s
			}
		}
		t.Fatalf("padfs index status --json: no session %s in %q", sid, out)
		return indexStatus{}
	}
	target := status().Last
	if target == 0 {
		t.Fatalf("padfs index status: session %s has no events after the untar", sid)
	}
	// Each poll is a padfs process competing with the indexer: poll less
	// often as the wait grows (the error stays under 5%).
	for next := time.Now().Add(time.Minute); status().Covered < target; {
		time.Sleep(min(max(time.Since(end)/20, 20*time.Millisecond), time.Second))
		if time.Now().After(next) {
			t.Logf("still waiting for the index to cover event %d", target)
			next = time.Now().Add(time.Minute)
		}
	}
	return time.Since(end).Seconds(), procCPU(pid) - cpu0
}

// treeBytes is the sum of the sizes of the regular files below root.
func treeBytes(t *testing.T, root string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatalf("size of %s: %v", root, err)
	}
	return n
}

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's times (100 on
// every Linux architecture Go supports).
const clockTick = 100

// procCPU returns the CPU seconds (user+system) of pid, of its reaped
// children and of its live descendants; 0 for pid 0.
func procCPU(pid int) float64 {
	if pid == 0 {
		return 0
	}
	var ticks int64
	for i, p := range procTree(pid) {
		f := procStatFields(p)
		if len(f) < 15 {
			continue
		}
		// Fields after "(comm)": state is [0], utime [11], stime [12],
		// cutime [13], cstime [14].
		last := 12
		if i == 0 {
			last = 14
		}
		for _, s := range f[11 : last+1] {
			v, _ := strconv.ParseInt(s, 10, 64)
			ticks += v
		}
	}
	return float64(ticks) / clockTick
}

// procTree returns pid and its live descendants.
func procTree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", out[i]))
		for _, tf := range tasks {
			b, _ := os.ReadFile(tf)
			for _, s := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(s); err == nil {
					out = append(out, c)
				}
			}
		}
	}
	return out
}

func procStatFields(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// procStatusKB returns a "kB" line of /proc/<pid>/status (VmHWM...).
func procStatusKB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// machine describes where the benchmark ran.
func machine(dir string) string {
	model := "unknown CPU"
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		b, _ := io.ReadAll(f)
		f.Close()
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	fsType := "unknown filesystem"
	if out, err := exec.Command("df", "--output=source,fstype", dir).Output(); err == nil {
		if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) == 2 {
			fsType = strings.Join(strings.Fields(lines[1]), " ")
		}
	}
	var u syscall.Utsname
	kernel := ""
	if syscall.Uname(&u) == nil {
		var k []byte
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			k = append(k, byte(c))
		}
		kernel = "Linux " + string(k) + ", "
	}
	return fmt.Sprintf("%s%d CPUs (%s), %s on %s, %s", kernel, runtime.NumCPU(), model, dir, fsType, runtime.Version())
}

// loadAvg is the first three fields of /proc/loadavg: the machine may be
// shared, and the numbers mean little if it was busy.
func loadAvg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
