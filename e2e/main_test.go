// Package e2e tests the real padfs binary with real tools (tar, git, sed,
// python3, cp, dd...) on real FUSE mounts. TestMain builds the binary once
// into a temporary directory; every test mounts under t.TempDir() and
// unmounts in t.Cleanup, also on failure. Only processes the tests start are
// ever signalled, by pid.
//
// The tests need Linux, /dev/fuse, and root or fusermount3; without them
// they are skipped (CI has them).
package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	padfsBin  string // the binary under test
	binDir    string // its directory (first in PATH of scripts)
	skipWhy   string // non-empty: FUSE is not usable here
	goRootSrc string // $(go env GOROOT)/src, for real source trees
)

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "padfs-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	binDir = dir
	padfsBin = filepath.Join(dir, "padfs")
	build := exec.Command("go", "build", "-o", padfsBin, "github.com/padfs/padfs/cmd/padfs")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go build padfs:", err)
		return 2
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: go env GOROOT:", err)
		return 2
	}
	goRootSrc = filepath.Join(strings.TrimSpace(string(out)), "src")
	if _, err := os.Stat("/dev/fuse"); err != nil {
		skipWhy = "no /dev/fuse"
	} else if os.Geteuid() != 0 {
		if _, err := exec.LookPath("fusermount3"); err != nil {
			skipWhy = "not root and no fusermount3"
		}
	}
	return m.Run()
}

// noteSources stats every Go source, go.mod and go.sum of the module.
// The binary under test is built from them by a subprocess, which go
// test's result cache cannot see: the stats make a changed source rerun
// these tests instead of replaying a cached pass. They count only while
// m.Run runs (testing installs its file log there, not before: called
// from TestMain, the stats were not seen and e2e results were replayed
// after a change), so every test notes them, once (needFUSE, and
// TestSourcesNoted for runs of tests that do not mount).
var noteSourcesOnce sync.Once

func noteModuleSources() { noteSourcesOnce.Do(func() { noteSources("..") }) }

// TestSourcesNoted makes the module's sources inputs of every e2e run.
func TestSourcesNoted(t *testing.T) {
	noteModuleSources()
	if _, err := os.Stat("../go.mod"); err != nil {
		t.Fatalf("module root not found from e2e/: %v", err)
	}
}

func noteSources(root string) {
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata"):
			return filepath.SkipDir
		case !d.IsDir() && (strings.HasSuffix(p, ".go") || d.Name() == "go.mod" || d.Name() == "go.sum"):
			os.Stat(p)
		}
		return nil
	})
}

func needFUSE(t *testing.T) {
	t.Helper()
	noteModuleSources()
	if skipWhy != "" {
		t.Skip("FUSE unavailable:", skipWhy)
	}
}

// env is the environment of every padfs and bash subprocess.
func env(data string) []string {
	e := []string{
		"PATH=" + binDir + ":" + os.Getenv("PATH"),
		"PADFS_DATA=" + data,
		"LC_ALL=C",
		"GIT_AUTHOR_NAME=padfs e2e", "GIT_AUTHOR_EMAIL=e2e@padfs.invalid",
		"GIT_COMMITTER_NAME=padfs e2e", "GIT_COMMITTER_EMAIL=e2e@padfs.invalid",
		"GIT_CONFIG_NOSYSTEM=1",
	}
	if h := os.Getenv("HOME"); h != "" {
		e = append(e, "HOME="+h)
	}
	for _, k := range []string{"GOROOT", "GOPATH", "GOCACHE", "PYENV_ROOT", "PYENV_VERSION",
		"PADFS_INDEX_CPUPROFILE", "PADFS_INDEX_MEMPROFILE", "PADFS_INDEX_MEMLIMIT"} {
		if v := os.Getenv(k); v != "" {
			e = append(e, k+"="+v)
		}
	}
	return e
}

// result is a finished subprocess.
type result struct {
	code        int
	out, errout string
}

// padfs runs the binary with --data data and returns what it did.
func padfs(t *testing.T, data string, args ...string) result {
	t.Helper()
	cmd := exec.Command(padfsBin, append([]string{"--data", data}, args...)...)
	cmd.Env = env(data)
	return runCmd(t, cmd)
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	r := result{out: o.String(), errout: e.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	default:
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return r
}

// mustPadfs runs padfs and fails the test unless it exits 0.
func mustPadfs(t *testing.T, data string, args ...string) string {
	t.Helper()
	r := padfs(t, data, args...)
	if r.code != 0 {
		t.Fatalf("padfs %s: exit %d: %s%s", strings.Join(args, " "), r.code, r.out, r.errout)
	}
	return strings.TrimSpace(r.out)
}

// sh runs a bash script (set -euo pipefail) in dir and returns its stdout.
func sh(t *testing.T, data, dir, script string) string {
	t.Helper()
	r := shResult(t, data, dir, script)
	if r.code != 0 {
		t.Fatalf("script failed (exit %d) in %s:\n%s\nstdout:\n%s\nstderr:\n%s", r.code, dir, script, r.out, r.errout)
	}
	return r.out
}

func shResult(t *testing.T, data, dir, script string) result {
	t.Helper()
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
	cmd.Dir = dir
	cmd.Env = env(data)
	return runCmd(t, cmd)
}

// syncBuffer collects a process's output from its copying goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// mount is a running `padfs mount` process started by a test.
type mount struct {
	t         *testing.T
	data      string
	dir       string // mountpoint
	cmd       *exec.Cmd
	banner    string // the "mounted" line
	firstLine string // the first line on stdout, whatever it was
	stdout    syncBuffer
	stderr    syncBuffer
	exited    chan struct{}
	exitErr   error
	stopOnce  sync.Once
}

// startMount starts `padfs mount` and waits until it reports the mount
// (its one line on stdout), failing the test if it exits instead.
func startMount(t *testing.T, data, mnt string, args ...string) *mount {
	t.Helper()
	m, err := tryMount(t, data, mnt, args...)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// tryMount is startMount that returns the failure (with padfs's stderr).
func tryMount(t *testing.T, data, mnt string, args ...string) (*mount, error) {
	t.Helper()
	m := &mount{t: t, data: data, dir: mnt, exited: make(chan struct{})}
	m.cmd = exec.Command(padfsBin, append(append([]string{"--data", data, "mount"}, args...), mnt)...)
	m.cmd.Env = env(data)
	m.cmd.Stderr = &m.stderr
	pr, err := m.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := m.cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		r := bufio.NewReader(pr)
		line, _ := r.ReadString('\n')
		lines <- line
		io.Copy(&m.stdout, r)
	}()
	go func() {
		m.exitErr = m.cmd.Wait()
		close(m.exited)
	}()
	t.Cleanup(m.cleanup)
	line := <-lines
	m.firstLine = line
	if !strings.HasPrefix(line, "padfs: mounted ") {
		<-m.exited
		return m, fmt.Errorf("padfs mount %s did not mount (%v): stdout %q stderr %q", mnt, m.exitErr, line, m.stderr.String())
	}
	m.banner = strings.TrimSpace(line)
	return m, nil
}

// failMount runs `padfs mount` that is expected to fail and returns what
// it did. If it mounts after all, the test fails and the mount is stopped.
func failMount(t *testing.T, data, mnt string, args ...string) result {
	t.Helper()
	m, err := tryMount(t, data, mnt, args...)
	if err == nil {
		t.Errorf("padfs mount %v %s succeeded: %s", args, mnt, m.banner)
		m.stop()
		return result{out: m.banner + "\n" + m.stdout.String(), errout: m.stderr.String()}
	}
	var ee *exec.ExitError
	r := result{out: m.firstLine + m.stdout.String(), errout: m.stderr.String()}
	if errors.As(m.exitErr, &ee) {
		r.code = ee.ExitCode()
	} else if m.exitErr != nil {
		t.Fatalf("padfs mount: %v", m.exitErr)
	}
	return r
}

// stop sends SIGTERM and waits for a clean exit.
func (m *mount) stop() {
	m.t.Helper()
	m.stopOnce.Do(func() {
		m.cmd.Process.Signal(syscall.SIGTERM)
		m.wait()
		if m.exitErr != nil {
			m.t.Errorf("padfs mount exited with %v after SIGTERM; stderr:\n%s", m.exitErr, m.stderr.String())
		}
		if isMounted(m.dir) {
			m.t.Errorf("%s still mounted after padfs exited", m.dir)
		}
	})
}

// kill sends SIGKILL to the padfs process this test started, waits for it
// and lazily detaches the dead mount.
func (m *mount) kill() {
	m.t.Helper()
	m.stopOnce.Do(func() {
		m.cmd.Process.Signal(syscall.SIGKILL)
		<-m.exited
		if err := detach(m.dir); err != nil {
			m.t.Error(err)
		}
	})
}

// wait waits for the process to exit, for at most pollBound: every minute
// it logs that it is still waiting, with padfs's stderr so far; past the
// bound it fails the test with that stderr and kills the process.
func (m *mount) wait() {
	bound := time.NewTimer(pollBound(m.t))
	defer bound.Stop()
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-m.exited:
			return
		case <-tick.C:
			m.t.Logf("still waiting for padfs mount (pid %d) to exit; stderr so far:\n%s",
				m.cmd.Process.Pid, m.stderr.String())
		case <-bound.C:
			m.t.Errorf("padfs mount (pid %d) did not exit within %v; killing it; stderr:\n%s",
				m.cmd.Process.Pid, pollBound(m.t), m.stderr.String())
			m.cmd.Process.Signal(syscall.SIGKILL)
			<-m.exited
			return
		}
	}
}

func (m *mount) cleanup() {
	select {
	case <-m.exited:
	default:
		m.cmd.Process.Signal(syscall.SIGTERM)
		m.wait()
	}
	if err := detach(m.dir); err != nil {
		m.t.Error(err)
	}
	if m.t.Failed() {
		m.t.Logf("padfs mount %s stderr:\n%s", m.dir, m.stderr.String())
	}
}

// detach lazily unmounts dir if it is (still) a mount: umount(2) with
// MNT_DETACH as root, else through the FUSE helper (fusermount3 -u -z, then
// fusermount -u -z). It fails only if dir stays mounted.
func detach(dir string) error {
	if !isMounted(dir) {
		return nil
	}
	err := syscall.Unmount(dir, syscall.MNT_DETACH)
	if err == nil {
		return nil
	}
	errs := []string{fmt.Sprintf("umount2(MNT_DETACH): %v", err)}
	for _, helper := range []string{"fusermount3", "fusermount"} {
		out, err := exec.Command(helper, "-u", "-z", dir).CombinedOutput()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Sprintf("%s -u -z: %v %s", helper, err, bytes.TrimSpace(out)))
	}
	if !isMounted(dir) {
		return nil
	}
	return fmt.Errorf("cannot detach %s: %s", dir, strings.Join(errs, "; "))
}

// isMounted reports whether dir is a mount point (from /proc/self/mountinfo).
func isMounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.ReplaceAll(f[4], `\040`, " ") == dir {
			return true
		}
	}
	return false
}

// pollBound is how long a wait of a test lasts before it fails: half of
// what is left of go test's -timeout (so a hang fails with its state, not
// with a dump of every goroutine), at least a minute.
func pollBound(t testing.TB) time.Duration {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, set := d.Deadline(); set {
			return max(time.Minute, time.Until(dl)/2)
		}
	}
	return 10 * time.Minute
}

// waitFor polls cond until it holds; every minute it logs that it is still
// waiting, past pollBound it fails the test (the mounts' cleanups then log
// their stderr).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	bound := pollBound(t)
	next := start.Add(time.Minute)
	for !cond() {
		if time.Since(start) > bound {
			t.Fatalf("gave up after %v waiting for %s", bound, what)
		}
		if time.Now().After(next) {
			t.Logf("still waiting for %s", what)
			next = time.Now().Add(time.Minute)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// newSession creates a session in data (no mount running) and returns its id.
func newSession(t *testing.T, data string, name ...string) string {
	t.Helper()
	args := []string{"session", "new"}
	if len(name) > 0 {
		args = append(args, "--name", name[0])
	}
	return mustPadfs(t, data, args...)
}

// dirs makes a data directory and a mountpoint under t.TempDir().
func dirs(t *testing.T) (data, mnt string) {
	t.Helper()
	base := t.TempDir()
	data, mnt = filepath.Join(base, "data"), filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	return data, mnt
}
