package fs

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Agent workloads, side by side on a padfs mount and on a plain directory of
// the same disk (t.TempDir()), driven by real tools through bash -c from the
// benchmark goroutine. Run them all (about 1.5 minutes on 2 cores):
//
//	go test -run '^$' -bench BenchmarkAgent -benchtime 1x ./fs/
//
// CPU profiles of the padfs side only (the FUSE server runs in the test
// process; setup and the plain side are left out), one per workload:
//
//	mkdir -p /tmp/prof && go test -c -o /tmp/fs.test ./fs/ &&
//	PADFS_BENCH_PROFILE=/tmp/prof /tmp/fs.test -test.run '^$' -test.bench BenchmarkAgent -test.benchtime 1x
//	go tool pprof -top /tmp/fs.test /tmp/prof/BenchmarkAgent_untar_0.pprof
//
// They never run in a plain `go test` (only with -bench).
//
// FUSE requests of the padfs side, by opcode (failed and negative lookups
// counted apart as LOOKUP-ENOENT), with PADFS_BENCH_OPS=1: reported as
// fuse-reqs/op and logged per workload (go test -v). The count comes from
// go-fuse's debug trace, which slows the padfs side down: do not compare
// times from such a run.
//
// Each iteration runs the workload on both sides (padfs first on even
// iterations, plain first on odd ones) and times each side on its own;
// setup (fresh trees, input files) is not timed. Reported per workload:
//
//	ns/op          the padfs side only (so benchstat tracks padfs)
//	padfs-ms/op    the padfs side
//	plain-ms/op    the plain directory
//	padfs/plain-x  their ratio (1 = as fast as the plain directory)
//
// plus throughput (MB/s, files/s) where it means something.
//
// Caches: page caches are not dropped (that needs root and would disturb
// everything else on the machine), so reads are warm on both sides:
// the plain side reads the page cache of what it just wrote, and the padfs
// side reads the kernel's FUSE page cache where FOPEN_KEEP_CACHE allows it,
// otherwise the store's bbolt/WAL files through the page cache. The numbers
// measure padfs's CPU and FUSE round trips more than the disk. Before each
// timed script the benchmark waits for padfs's background WAL fold and runs
// sync(1) (untimed, see settle), so one side's writeback does not land in
// the other's time; alternating the order per iteration evens out the rest
// when -benchtime is more than 1x. Other processes on the machine still
// add noise: use -count and benchstat, and compare ratios.

// benchSrcDirs is the slice of $(go env GOROOT)/src that untar, git and grep
// work on: about 3,600 files in 280 directories, 23 MB (a 26 MB tarball).
var benchSrcDirs = []string{"net", "go", "crypto", "cmd/go"}

// benchLiteral is a selective literal for grep (a few dozen hits).
const benchLiteral = "errNoSuchHost"

const benchGit = "git -c user.name=b -c user.email=b@example.com -c init.defaultBranch=main -c gc.auto=0 -c maintenance.auto=false "

// benchTree is the tarball all tree workloads extract.
type benchTree struct {
	tarball string
	files   int   // regular files
	bytes   int64 // their content
}

func BenchmarkAgent(b *testing.B) {
	requireTools(b, "bash", "tar", "go")
	tree := makeBenchTarball(b)

	b.Run("untar", func(b *testing.B) {
		s := newBenchSides(b)
		p := pairLoop(b, s, nil, func(dir string, i int) string {
			return fmt.Sprintf("mkdir u%d && tar -xf %s -C u%d", i, tree.tarball, i)
		})
		p.report(b)
		p.throughput(b, float64(tree.bytes)/1e6, "MB/s")
		p.throughput(b, float64(tree.files), "files/s")
	})

	b.Run("git", func(b *testing.B) {
		requireTools(b, "git")
		s := newBenchSides(b)
		p := pairLoop(b, s, func(dir string, i int) {
			benchSh(b, dir, fmt.Sprintf("mkdir g%d && tar -xf %s -C g%d", i, tree.tarball, i))
		}, func(dir string, i int) string {
			return fmt.Sprintf("cd g%d && %sinit -q && %sadd -A && %scommit -q -m x && %sstatus --porcelain",
				i, benchGit, benchGit, benchGit, benchGit)
		})
		p.check(b, func(side, out string) error {
			if out != "" {
				return fmt.Errorf("git status after the commit is not clean:\n%.2000s", out)
			}
			return nil
		})
		p.report(b)
	})

	b.Run("status", func(b *testing.B) {
		// git status of a committed tree, a while after the last
		// command (settle's pause): lstat of every file again, as an
		// agent's next tool run does.
		requireTools(b, "git")
		s := newBenchSides(b)
		p := pairLoop(b, s, func(dir string, i int) {
			benchSh(b, dir, fmt.Sprintf("mkdir s%d && tar -xf %s -C s%d && cd s%d && %sinit -q && %sadd -A && %scommit -q -m x",
				i, tree.tarball, i, i, benchGit, benchGit, benchGit))
		}, func(dir string, i int) string {
			return fmt.Sprintf("cd s%d && %sstatus --porcelain", i, benchGit)
		})
		p.check(b, func(side, out string) error {
			if out != "" {
				return fmt.Errorf("git status of the committed tree is not clean:\n%.2000s", out)
			}
			return nil
		})
		p.report(b)
	})

	b.Run("edit", func(b *testing.B) {
		// 200 sed -i of one line of a 200 KB file (4,000 lines of 50
		// bytes), then cat: each sed writes a new file and renames it
		// over the old one.
		var body strings.Builder
		for l := range 4000 {
			fmt.Fprintf(&body, "line %05d: %-38s\n", l, "the quick brown fox jumps over")
		}
		s := newBenchSides(b)
		p := pairLoop(b, s, func(dir string, i int) {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("e%d.txt", i)), []byte(body.String()), 0o644); err != nil {
				b.Fatal(err)
			}
		}, func(dir string, i int) string {
			return fmt.Sprintf(`f=e%d.txt; for k in $(seq 200); do sed -i "s/^line 02000: .*/line 02000: edit $k/" $f; done; cat $f >/dev/null; grep -c '^line 02000: edit 200$' $f`, i)
		})
		p.check(b, func(side, out string) error {
			if out != "1\n" {
				return fmt.Errorf("last edit not found: %q", out)
			}
			return nil
		})
		p.report(b)
		p.throughput(b, 200, "seds/s")
	})

	b.Run("grep", func(b *testing.B) {
		s := newBenchSides(b)
		for _, dir := range []string{s.padfs, s.plain} {
			benchSh(b, dir, "mkdir t && tar -xf "+tree.tarball+" -C t")
		}
		p := pairLoop(b, s, nil, func(dir string, i int) string {
			return "grep -rnF -- " + benchLiteral + " t | wc -l"
		})
		p.check(b, func(side, out string) error {
			if out == "0\n" || out != p.out["plain"] {
				return fmt.Errorf("grep found %q lines, the plain side %q", out, p.out["plain"])
			}
			return nil
		})
		p.report(b)
		p.throughput(b, float64(tree.bytes)/1e6, "MB/s")
	})

	b.Run("bigfile", func(b *testing.B) {
		// 256 MiB of pseudo-random bytes (zeros would only measure
		// padfs's chunk dedup), written with dd bs=128k, then read with
		// cat. Timed separately: write (dd up to its close, which is the
		// commit on padfs) and read.
		const size = 256 << 20
		src := filepath.Join(b.TempDir(), "random.bin")
		writeRandom(b, src, size)
		s := newBenchSides(b)
		wr := pairTimes{out: map[string]string{}, counter: s.ops}
		rd := pairTimes{out: map[string]string{}, counter: s.ops}
		for i := 0; i < b.N; i++ {
			for _, side := range s.order(i) {
				dir := s.dir(side)
				wr.add(b, side, dir, fmt.Sprintf("dd if=%s of=big%d bs=128k status=none", src, i))
				rd.add(b, side, dir, fmt.Sprintf("cat big%d >/dev/null", i))
				benchSh(b, dir, fmt.Sprintf("rm big%d", i)) // bound the plain side's disk use
			}
		}
		mb := float64(size) / 1e6
		b.ReportMetric(wr.perOp(b, "padfs")+rd.perOp(b, "padfs"), "padfs-ms/op")
		b.ReportMetric(wr.perOp(b, "plain")+rd.perOp(b, "plain"), "plain-ms/op")
		b.ReportMetric((wr.padfs+rd.padfs).Seconds()/(wr.plain+rd.plain).Seconds(), "padfs/plain-x")
		b.ReportMetric(float64((wr.padfs+rd.padfs).Nanoseconds())/float64(b.N), "ns/op")
		b.ReportMetric(wr.padfs.Seconds()/wr.plain.Seconds(), "write-padfs/plain-x")
		b.ReportMetric(rd.padfs.Seconds()/rd.plain.Seconds(), "read-padfs/plain-x")
		b.ReportMetric(mb*float64(b.N)/wr.padfs.Seconds(), "padfs-write-MB/s")
		b.ReportMetric(mb*float64(b.N)/wr.plain.Seconds(), "plain-write-MB/s")
		b.ReportMetric(mb*float64(b.N)/rd.padfs.Seconds(), "padfs-read-MB/s")
		b.ReportMetric(mb*float64(b.N)/rd.plain.Seconds(), "plain-read-MB/s")
		wr.reportOps(b, "write-")
		rd.reportOps(b, "read-")
	})

	// 500 small files written by one python3 process, each fsync'd (the
	// price of durability), and the same without fsync for comparison.
	for _, fsync := range []bool{true, false} {
		name, call := "fsync", "os.fsync(fd); "
		if !fsync {
			name, call = "nofsync", ""
		}
		b.Run(name, func(b *testing.B) {
			requireTools(b, "python3")
			s := newBenchSides(b)
			p := pairLoop(b, s, nil, func(dir string, i int) string {
				return fmt.Sprintf(`python3 -c '
import os
os.mkdir("p%d")
for k in range(500):
    fd = os.open("p%d/f%%03d.txt" %% k, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, b"small file %%d\n" %% k * 20)
    %sos.close(fd)
'`, i, i, call)
			})
			p.report(b)
			p.throughput(b, 500, "files/s")
		})
	}
}

// benchSides are the two directories a workload runs in.
type benchSides struct {
	padfs, plain string
	ops          *opCounter // with PADFS_BENCH_OPS
}

// newBenchSides mounts a fresh store (unmounted in b.Cleanup) and makes a
// plain directory; both live under b.TempDir(), on the same disk.
func newBenchSides(b *testing.B) benchSides {
	b.Helper()
	if os.Getenv("PADFS_BENCH_OPS") == "" {
		mnt, _, _ := mountTest(b)
		return benchSides{padfs: mnt, plain: b.TempDir()}
	}
	c := &opCounter{lookups: map[string]bool{}, counts: map[string]int{}}
	mnt, _, _ := mountTestOpts(b, Options{Debug: true, debugLog: log.New(c, "", 0)})
	return benchSides{padfs: mnt, plain: b.TempDir(), ops: c}
}

// opCounter counts FUSE requests by opcode from go-fuse's debug trace
// (one Write per line: "rx 12: LOOKUP n1 ..." then "tx 12:     OK, ...").
type opCounter struct {
	mu      sync.Mutex
	lookups map[string]bool // unique ids of lookups awaiting their answer
	counts  map[string]int
}

func (c *opCounter) Write(p []byte) (int, error) {
	line := string(p)
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case strings.HasPrefix(line, "rx "):
		f := strings.Fields(line)
		if len(f) < 3 {
			break
		}
		c.counts[f[2]]++
		if f[2] == "LOOKUP" {
			c.lookups[f[1]] = true
		}
	case strings.HasPrefix(line, "tx "):
		f := strings.Fields(line)
		if len(f) < 3 || !c.lookups[f[1]] {
			break
		}
		delete(c.lookups, f[1])
		// A negative entry is an OK answer with node id 0.
		if f[2] != "OK," || (len(f) > 3 && f[3] == "{n0") {
			c.counts["LOOKUP-ENOENT"]++
		}
	}
	return len(p), nil
}

func (c *opCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

func (s benchSides) dir(side string) string {
	if side == "padfs" {
		return s.padfs
	}
	return s.plain
}

// order alternates which side goes first.
func (s benchSides) order(i int) []string {
	if i%2 == 0 {
		return []string{"padfs", "plain"}
	}
	return []string{"plain", "padfs"}
}

// pairTimes accumulates the time of each side, and keeps the last output.
type pairTimes struct {
	padfs, plain time.Duration
	out          map[string]string
	// FUSE requests of the padfs side by opcode, with PADFS_BENCH_OPS.
	counter *opCounter
	ops     map[string]int
}

// add times one bash -c script in dir, after settle.
func (p *pairTimes) add(b *testing.B, side, dir, script string) {
	b.Helper()
	settle(b)
	var before map[string]int
	if p.counter != nil && side == "padfs" {
		before = p.counter.snapshot()
	}
	stop := profilePadfs(b, side)
	t0 := time.Now()
	out, err := shErr(dir, script)
	d := time.Since(t0)
	stop()
	if before != nil {
		if p.ops == nil {
			p.ops = map[string]int{}
		}
		for op, n := range p.counter.snapshot() {
			p.ops[op] += n - before[op]
		}
	}
	if err != nil {
		b.Fatalf("%s: bash -c %q in %s: %v\n%s", side, script, dir, err, out)
	}
	if side == "padfs" {
		p.padfs += d
	} else {
		p.plain += d
	}
	p.out[side] = out
}

// profilePadfs starts a CPU profile of this process (the FUSE server) for
// the padfs side of a workload when $PADFS_BENCH_PROFILE names a directory:
// DIR/<benchmark>_<k>.pprof holds the k-th timed padfs script of that
// benchmark (bigfile: 0 is the write, 1 the read), without setup or the
// plain side. Not with -cpuprofile: there is one CPU profiler per process.
var profileSeq = map[string]int{}

func profilePadfs(b *testing.B, side string) (stop func()) {
	dir := os.Getenv("PADFS_BENCH_PROFILE")
	if dir == "" || side != "padfs" {
		return func() {}
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(b.Name())
	k := profileSeq[name]
	profileSeq[name]++
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s_%d.pprof", name, k)))
	if err != nil {
		b.Fatalf("profile: %v", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		b.Fatalf("profile %s: %v", f.Name(), err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// pairLoop runs b.N iterations of setup (untimed, may be nil) and the
// script work returns, on both sides.
func pairLoop(b *testing.B, s benchSides, setup func(dir string, i int), work func(dir string, i int) string) *pairTimes {
	b.Helper()
	p := &pairTimes{out: map[string]string{}, counter: s.ops}
	for i := 0; i < b.N; i++ {
		for _, side := range s.order(i) {
			dir := s.dir(side)
			if setup != nil {
				setup(dir, i)
			}
			p.add(b, side, dir, work(dir, i))
		}
	}
	return p
}

// check verifies the last output of each side.
func (p *pairTimes) check(b *testing.B, ok func(side, out string) error) {
	b.Helper()
	for _, side := range []string{"plain", "padfs"} {
		if err := ok(side, p.out[side]); err != nil {
			b.Errorf("%s: %v", side, err)
		}
	}
}

func (p *pairTimes) perOp(b *testing.B, side string) float64 {
	d := p.plain
	if side == "padfs" {
		d = p.padfs
	}
	return float64(d.Microseconds()) / 1e3 / float64(b.N)
}

func (p *pairTimes) report(b *testing.B) {
	b.ReportMetric(float64(p.padfs.Nanoseconds())/float64(b.N), "ns/op")
	b.ReportMetric(p.perOp(b, "padfs"), "padfs-ms/op")
	b.ReportMetric(p.perOp(b, "plain"), "plain-ms/op")
	b.ReportMetric(p.padfs.Seconds()/p.plain.Seconds(), "padfs/plain-x")
	p.reportOps(b, "")
}

// reportOps reports the FUSE requests per op (with PADFS_BENCH_OPS) and
// logs them by opcode, most frequent first.
func (p *pairTimes) reportOps(b *testing.B, prefix string) {
	if p.counter == nil {
		return
	}
	total := 0
	for op, n := range p.ops {
		if op != "LOOKUP-ENOENT" {
			total += n
		}
	}
	b.ReportMetric(float64(total)/float64(b.N), prefix+"fuse-reqs/op")
	ops := slices.SortedFunc(maps.Keys(p.ops), func(x, y string) int { return p.ops[y] - p.ops[x] })
	var sb strings.Builder
	for _, op := range ops {
		fmt.Fprintf(&sb, " %s=%d", op, p.ops[op]/b.N)
	}
	b.Logf("%sFUSE requests per op: %d:%s", prefix, total/b.N, sb.String())
}

// throughput reports amount per op divided by each side's time.
func (p *pairTimes) throughput(b *testing.B, perOp float64, unit string) {
	n := perOp * float64(b.N)
	b.ReportMetric(n/p.padfs.Seconds(), "padfs-"+unit)
	b.ReportMetric(n/p.plain.Seconds(), "plain-"+unit)
}

// settle lets the previous side's deferred work finish before the next
// timed script: padfs folds its WAL into bbolt (with fsync) about once a
// second, and sync(1) writes back the dirty pages of both sides, so neither
// side pays for the other's writeback or journal commits. It does not drop
// caches.
func settle(b *testing.B) {
	b.Helper()
	time.Sleep(1100 * time.Millisecond)
	if out, err := exec.Command("sync").CombinedOutput(); err != nil {
		b.Fatalf("sync: %v\n%s", err, out)
	}
}

// benchSh runs an untimed setup script.
func benchSh(b *testing.B, dir, script string) {
	b.Helper()
	if out, err := shErr(dir, script); err != nil {
		b.Fatalf("bash -c %q in %s: %v\n%s", script, dir, err, out)
	}
}

func requireTools(b testing.TB, tools ...string) {
	b.Helper()
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			b.Skipf("%s not installed", t)
		}
	}
}

// makeBenchTarball tars benchSrcDirs of GOROOT/src once and counts what is
// in it.
func makeBenchTarball(b *testing.B) benchTree {
	b.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Fatalf("go env GOROOT: %v", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "src")
	tb := benchTree{tarball: filepath.Join(b.TempDir(), "src.tar")}
	benchSh(b, src, "tar -cf "+tb.tarball+" "+strings.Join(benchSrcDirs, " "))
	f, err := os.Open(tb.tarball)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.Fatalf("read %s: %v", tb.tarball, err)
		}
		if h.Typeflag == tar.TypeReg {
			tb.files++
			tb.bytes += h.Size
		}
	}
	return tb
}

// writeRandom writes size pseudo-random bytes to path.
func writeRandom(b *testing.B, path string, size int) {
	b.Helper()
	r := rand.NewChaCha8([32]byte{1})
	buf := make([]byte, 1<<20)
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	for n := 0; n < size; n += len(buf) {
		r.Read(buf)
		if _, err := f.Write(buf); err != nil {
			f.Close()
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}
