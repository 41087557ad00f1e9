// Package pgtest runs a throwaway PostgreSQL server for tests: initdb into
// a temporary directory, listening only on a unix socket in that
// directory (no TCP), fsync off (synchronous_commit on), as an
// unprivileged user (the "postgres" account when the tests run as root,
// which initdb refuses). One server per test binary (start it from
// TestMain), one database per test:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
//	func TestX(t *testing.T) {
//		url := pgtest.DB(t) // skips, naming why, where PostgreSQL cannot run
//		...
//	}
//
// Where no PostgreSQL binaries are installed the tests skip with a message
// that says so; a server that is installed but fails to start fails the
// tests, with the server's log, rather than skipping them.
package pgtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running throwaway PostgreSQL.
type Server struct {
	dir    string // temporary directory: data/, the socket, server.log
	sock   string // unix socket directory
	user   string // the database superuser
	cmd    *exec.Cmd
	exited chan struct{}
	dbs    atomic.Int64

	bin, data string // postgres's directory; the cluster
	cred      *syscall.Credential
}

var (
	mu      sync.Mutex
	inMain  bool    // Main runs the tests: DB may start the server
	current *Server // started by the first DB
	failure error   // why it did not start
)

// Main runs the tests and stops the package's server, if one of them
// started it (DB starts it on first use, so tests that need none pay
// nothing), also when tests fail. It returns m.Run's exit code.
func Main(m *testing.M) int {
	mu.Lock()
	inMain = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	srv := current
	current, failure = nil, errors.New("server stopped")
	mu.Unlock()
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	return code
}

// DB creates a fresh, empty database on the package's server (starting it
// on first use) and returns its URL (postgres://USER@/NAME?host=SOCKETDIR).
// It skips the test when PostgreSQL is not installed, and fails it when
// the server does not start.
func DB(t testing.TB) string {
	t.Helper()
	mu.Lock()
	if !inMain {
		mu.Unlock()
		t.Fatal("pgtest: no server: call pgtest.Main from TestMain")
	}
	if current == nil && failure == nil {
		current, failure = Start()
	}
	srv, ferr := current, failure
	mu.Unlock()
	switch {
	case errors.Is(ferr, errNoBinaries):
		t.Skipf("pgtest: %v", ferr)
	case ferr != nil:
		t.Fatalf("pgtest: %v", ferr)
	}
	u, err := srv.CreateDB(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// Current returns the package's server (nil if it did not start).
func Current() *Server {
	mu.Lock()
	defer mu.Unlock()
	return current
}

var errNoBinaries = errors.New("PostgreSQL is not installed (no postgres and initdb in /usr/lib/postgresql/*/bin or $PATH; apt-get install postgresql)")

// binDir finds the directory holding postgres and initdb: the newest
// /usr/lib/postgresql/N/bin (Debian), else $PATH.
func binDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if isExec(filepath.Join(d, "postgres")) && isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("postgres"); err == nil {
		d := filepath.Dir(p)
		if isExec(filepath.Join(d, "initdb")) {
			return d, nil
		}
	}
	return "", errNoBinaries
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Start initializes and starts a new server. Stop it when done.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	owner := os.Getuid()
	group := os.Getgid()
	dbUser := "padfs"
	if os.Geteuid() == 0 {
		// initdb and postgres refuse to run as root.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and no postgres user to run the server as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
		owner, group = uid, gid
	}
	base, err := tempBase(owner, group)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(base, "padfs-pg-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{dir: dir, sock: dir, user: dbUser}
	fail := func(err error) (*Server, error) {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fail(err)
	}
	if err := os.Chown(dir, owner, group); err != nil {
		return fail(fmt.Errorf("pgtest: chown %s to uid %d: %w", dir, owner, err))
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", dbUser, "--auth=trust",
		"--no-sync", "--encoding=UTF8", "--locale=C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	initdb.Dir = dir
	initdb.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := initdb.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("pgtest: initdb %s: %v: %s", data, err, bytes.TrimSpace(out)))
	}
	s.bin, s.data, s.cred = bin, data, cred
	if err := s.launch(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// launch starts the postmaster on s.data and waits until it answers.
func (s *Server) launch() error {
	logPath := filepath.Join(s.dir, "server.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	s.exited = make(chan struct{})
	s.cmd = exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.data,
		"-k", s.sock, "-c", "listen_addresses=",
		// synchronous_commit stays on, as padfs documents it (a commit
		// returns once its WAL is written: it survives a crash of the
		// server); fsync off: a throwaway cluster need not survive a
		// power loss, and the disk's flushes are not what tests measure.
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200", "-c", "shared_buffers=32MB",
		// Nothing in /dev/shm (small in containers), no parallel workers or
		// autovacuum competing with the tests for the cores.
		"-c", "dynamic_shared_memory_type=mmap", "-c", "max_parallel_workers_per_gather=0", "-c", "autovacuum=off",
		"-c", "log_min_messages=warning", "-c", "log_statement=none")
	// Its own process group (Stop kills the whole group); killed with the
	// test binary if that dies first.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	s.cmd.Dir = s.dir
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := s.exited
	cmd := s.cmd
	go func() { cmd.Wait(); close(exited) }()
	if err := s.waitReady(60 * time.Second); err != nil {
		log, _ := os.ReadFile(logPath)
		s.halt()
		return fmt.Errorf("pgtest: server in %s did not start: %v; server log:\n%s", s.dir, err, bytes.TrimSpace(log))
	}
	return nil
}

// Halt shuts the server down (fast shutdown: clients are disconnected,
// what committed is kept) and leaves its directory for Resume.
func (s *Server) Halt() { s.halt() }

// Resume starts a halted server again on the same data and socket.
func (s *Server) Resume() error { return s.launch() }

func (s *Server) halt() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.exited:
		return
	default:
	}
	pid := s.cmd.Process.Pid
	syscall.Kill(pid, syscall.SIGINT) // fast shutdown
	select {
	case <-s.exited:
	case <-time.After(20 * time.Second):
	}
	syscall.Kill(-pid, syscall.SIGKILL) // backends left behind, if any
	<-s.exited
}

// tempBase is where the server's directory goes: $TMPDIR if the server's
// user can reach it and the socket path stays well under the kernel's 107
// bytes, else /tmp.
func tempBase(uid, gid int) (string, error) {
	for _, d := range []string{os.TempDir(), "/tmp"} {
		if len(d) <= 64 && reachable(d, uid, gid) {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: neither %s nor /tmp can be reached by uid %d, which runs the server", os.TempDir(), uid)
}

// reachable reports whether uid (group gid) may search every directory
// from / to dir.
func reachable(dir string, uid, gid int) bool {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil || !fi.IsDir() {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		perm := fi.Mode().Perm()
		switch {
		case !ok:
			return false
		case int(st.Uid) == uid:
			if perm&0o100 == 0 {
				return false
			}
		case int(st.Gid) == gid:
			if perm&0o010 == 0 {
				return false
			}
		case perm&0o001 == 0:
			return false
		}
		if d == "/" {
			return true
		}
	}
}

// waitReady connects until the server answers, it exits, or timeout.
func (s *Server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited: %v", s.cmd.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			err = c.Ping(ctx)
			c.Close(ctx)
		}
		cancel()
		if err == nil {
			return nil
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no connection within %v: %v", timeout, last)
}

// URL returns the URL of database db.
func (s *Server) URL(db string) string {
	return (&url.URL{Scheme: "postgres", User: url.User(s.user), Path: "/" + db,
		RawQuery: url.Values{"host": {s.sock}}.Encode()}).String()
}

// CreateDB creates a new empty database and returns its URL.
func (s *Server) CreateDB(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect to %s: %w", s.sock, err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.URL(name), nil
}

// Stop shuts the server down (fast shutdown, then SIGKILL of its process
// group) and removes its directory.
func (s *Server) Stop() error {
	s.halt()
	return os.RemoveAll(s.dir)
}

// Dir is the server's temporary directory (data/, server.log, the socket).
func (s *Server) Dir() string { return s.dir }

// Pid is the postmaster's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// StartT starts a server for one test and its subtests (for packages
// whose TestMain is taken): it skips the test where PostgreSQL is not
// installed, fails it if the server does not start, and stops the server
// at the test's cleanup, also on failure.
func StartT(t testing.TB) *Server {
	t.Helper()
	s, err := Start()
	if errors.Is(err, errNoBinaries) {
		t.Skipf("pgtest: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// DB creates a fresh database on s for t and returns its URL.
func (s *Server) DB(t testing.TB) string {
	t.Helper()
	u, err := s.CreateDB(context.Background())
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return u
}

// SelfCPU is this process's CPU seconds (user+system).
func SelfCPU() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// TreeCPU is the CPU seconds (user, system) of pid, its reaped children
// and its live children (a postmaster and its backends).
func TreeCPU(pid int) (user, sys float64) {
	var ticks [2]int64
	pids := []string{strconv.Itoa(pid)}
	kids, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range kids {
		b, _ := os.ReadFile(f)
		pids = append(pids, strings.Fields(string(b))...)
	}
	for i, p := range pids {
		b, err := os.ReadFile("/proc/" + p + "/stat")
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		last := 12
		if i == 0 {
			last = 14
		}
		for j, s := range f[11 : last+1] {
			v, _ := strconv.ParseInt(s, 10, 64)
			ticks[j%2] += v // utime, stime, cutime, cstime
		}
	}
	return float64(ticks[0]) / 100, float64(ticks[1]) / 100
}
