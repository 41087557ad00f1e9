package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/oklog/ulid/v2"
	"github.com/padfs/padfs/internal/pgtest"
)

// Sessions shared between hosts through one PostgreSQL store: each
// "host" is a padfs process with a data directory of its own, all pointed
// at one throwaway server (started here; the e2e TestMain is taken).

// pgPadfs runs padfs on data directory data with $PADFS_STORE=url.
func pgPadfs(t *testing.T, data, url string, args ...string) result {
	t.Helper()
	cmd := exec.Command(padfsBin, append([]string{"--data", data}, args...)...)
	cmd.Env = append(env(data), "PADFS_STORE="+url)
	return runCmd(t, cmd)
}

func mustPgPadfs(t *testing.T, data, url string, args ...string) string {
	t.Helper()
	r := pgPadfs(t, data, url, args...)
	if r.code != 0 {
		t.Fatalf("padfs %s: exit %d: %s%s", strings.Join(args, " "), r.code, r.out, r.errout)
	}
	return strings.TrimSpace(r.out)
}

// host is one padfs "host": a data directory and a mountpoint.
type host struct{ data, mnt string }

func newHost(t *testing.T, name string) host {
	t.Helper()
	base := t.TempDir()
	h := host{data: filepath.Join(base, name+"-data"), mnt: filepath.Join(base, name+"-mnt")}
	sh(t, h.data, base, "mkdir -p "+h.mnt)
	return h
}

func TestPostgres(t *testing.T) {
	needFUSE(t)
	srv := pgtest.StartT(t)
	t.Run("TwoHosts", func(t *testing.T) { testTwoHosts(t, srv.DB(t)) })
	t.Run("Lease", func(t *testing.T) { testLease(t, srv.DB(t)) })
	t.Run("Fenced", func(t *testing.T) { testFenced(t, srv.DB(t)) })
	t.Run("FurtherMount", func(t *testing.T) { testFurtherMount(t, srv.DB(t)) })
	t.Run("Restart", func(t *testing.T) { testRestart(t, srv, srv.DB(t)) })
	t.Run("Fsck", func(t *testing.T) { testFsck(t, srv.DB(t)) })
	t.Run("OneWriter", func(t *testing.T) { testOneWriter(t, srv.DB(t)) })
	t.Run("CheckpointAnyHost", func(t *testing.T) { testCheckpointAnyHost(t, srv.DB(t)) })
	t.Run("HardForget", func(t *testing.T) { testHardForget(t, srv.DB(t)) })
}

// testHardForget: a hard forget run from another host deletes every row
// holding the session's bytes (no row of padfs_kv holds its text after
// it), and its receipts, before and after, say what PostgreSQL still
// keeps (its WAL, replicas, backups) and that the table is vacuumed.
func testHardForget(t *testing.T, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s := mustPgPadfs(t, a.data, url, "session", "new")
	keep := mustPgPadfs(t, a.data, url, "session", "new")
	const secret = "pg-hard-forget-secret-5d1c"
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s)
	sh(t, a.data, a.mnt, "printf '%s\\n' "+secret+" > small; mkdir d; for i in $(seq 2000); do printf '"+secret+" %d\\n' $i; done > d/big; ln -s "+secret+" link")
	ma.stop()
	mk := startMount(t, a.data, a.mnt, "--store", url, "--session", keep)
	sh(t, a.data, a.mnt, "echo other > f")
	mk.stop()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows := func() int {
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM padfs_kv WHERE position(convert_to($1, 'UTF8') in k || v) > 0", secret).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := rows(); n == 0 {
		t.Fatalf("no row of padfs_kv holds the session's text before the forget: the check below proves nothing")
	}
	plan := mustPgPadfs(t, b.data, url, "session", "forget", "--hard", s)
	for _, want := range []string{"write-ahead log", "VACUUM (FULL) padfs_kv", "backups"} {
		if !strings.Contains(plan, want) {
			t.Errorf("hard forget receipt on PostgreSQL lacks %q:\n%s", want, plan)
		}
	}
	var pj struct {
		Token    string `json:"token"`
		Retained string `json:"retained"`
	}
	if err := json.Unmarshal([]byte(mustPgPadfs(t, b.data, url, "session", "forget", "--hard", s, "--json")), &pj); err != nil || !strings.Contains(pj.Retained, "write-ahead log") {
		t.Errorf("hard forget --json receipt: %+v, %v; want a retained field naming the WAL", pj, err)
	}
	done := mustPgPadfs(t, b.data, url, "session", "forget", "--hard", s, "--confirm", tokenOf(t, plan))
	if !strings.Contains(done, "purged session "+s) || !strings.Contains(done, "write-ahead log") {
		t.Errorf("hard forget on PostgreSQL printed %q; want the purge and what the server keeps", done)
	}
	if n := rows(); n != 0 {
		t.Errorf("%d rows of padfs_kv still hold the purged session's text", n)
	}
	if ls := mustPgPadfs(t, a.data, url, "session", "ls"); strings.Contains(ls, s) || !strings.Contains(ls, keep) {
		t.Errorf("session ls after the hard forget:\n%s\nwant %s gone and %s kept", ls, s, keep)
	}
}

// testOneWriter: commands of another host that would commit to a session
// mounted read-write (restore, prune; not checkpoint) fail with one line
// naming the holder and change nothing; the holder, which reads its
// session without asking the server (lease-local reads), goes on reading
// and writing what the store holds; read-only commands work as before.
func testOneWriter(t *testing.T, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s := mustPgPadfs(t, a.data, url, "session", "new")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s)
	sh(t, a.data, a.mnt, "printf 'one\\n' > f; mkdir d")
	t0 := mustPgPadfs(t, b.data, url, "now")
	sh(t, a.data, a.mnt, "printf 'two\\n' > f")
	pid := strconv.Itoa(ma.cmd.Process.Pid)
	for _, args := range [][]string{
		{"restore", "--session", s, "--asof", t0},
		{"prune", "--session", s, "--before", t0},
	} {
		r := pgPadfs(t, b.data, url, args...)
		msg := strings.TrimSpace(r.errout)
		if r.code == 0 || strings.Contains(msg, "\n") || !strings.Contains(msg, "mounted read-write by pid "+pid+" on host ") {
			t.Errorf("%v from another host: exit %d, stderr %q; want one line naming pid %s", args, r.code, msg, pid)
		}
	}
	if got := sh(t, a.data, a.mnt, "cat f; ls; printf 'three\\n' > f; cat f"); got != "two\nd\nf\nthree\n" {
		t.Errorf("the holder after the refused commands: %q", got)
	}
	if log := mustPgPadfs(t, b.data, url, "log", "--session", s); strings.Count(log, "\n") < 3 {
		t.Errorf("log of the session on host b:\n%s", log)
	}
	ma.stop()
	// Unmounted, the session takes the other host's commits again.
	mustPgPadfs(t, b.data, url, "restore", "--session", s, "--asof", t0)
}

// testFsck: fsck and fsck --repair on a PostgreSQL store: a damaged
// derived record (a session's counters, deleted by hand) is found and
// rebuilt; repair refuses, naming the holder, while a host has a session
// mounted read-write (another host's commits would race with it).
func testFsck(t *testing.T, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s := mustPgPadfs(t, a.data, url, "session", "new")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s)
	sh(t, a.data, a.mnt, "for i in 1 2 3; do printf '%s\\n' $i > f$i; done")
	ma.stop()
	if r := pgPadfs(t, a.data, url, "fsck"); r.code != 0 {
		t.Fatalf("fsck of an intact store: exit %d: %s%s", r.code, r.out, r.errout)
	}
	id, err := ulid.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "DELETE FROM padfs_kv WHERE k = $1", append([]byte{'N'}, id[:]...)); err != nil {
		t.Fatal(err)
	}
	if r := pgPadfs(t, a.data, url, "fsck"); r.code != 1 || !strings.Contains(r.out, "counter") {
		t.Fatalf("fsck without the session's counters: exit %d: %s%s", r.code, r.out, r.errout)
	}
	mb := startMount(t, b.data, b.mnt, "--store", url, "--session", mustPgPadfs(t, b.data, url, "session", "new"))
	r := pgPadfs(t, a.data, url, "fsck", "--repair")
	if msg := strings.TrimSpace(r.errout); r.code != 2 || strings.Contains(msg, "\n") || !strings.Contains(msg, "mounted by pid "+strconv.Itoa(mb.cmd.Process.Pid)) {
		t.Errorf("fsck --repair beside a read-write mount on another host: exit %d, stderr %q; want one line naming it", r.code, msg)
	}
	mb.stop()
	if r := pgPadfs(t, a.data, url, "fsck", "--repair"); r.code != 1 || !strings.Contains(r.out, "counter") {
		t.Fatalf("fsck --repair: exit %d: %s%s", r.code, r.out, r.errout)
	}
	if r := pgPadfs(t, a.data, url, "fsck"); r.code != 0 {
		t.Errorf("fsck after --repair: exit %d: %s%s", r.code, r.out, r.errout)
	}
	ma = startMount(t, a.data, a.mnt, "--store", url, "--session", s)
	if got := sh(t, a.data, a.mnt, "cat f1 f2 f3; printf '4\\n' > f4; cat f4"); got != "1\n2\n3\n4\n" {
		t.Errorf("session after the repair: %q", got)
	}
	ma.stop()
}

// testRestart: PostgreSQL restarted under a running mount. Operations that
// begin while the server is down block, retrying, until it is back (up to
// postgres.DefaultRetryFor), and then succeed; everything acknowledged,
// before and during the restart, is in the store; the mount goes on
// without a remount.
func testRestart(t *testing.T, srv *pgtest.Server, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s := mustPgPadfs(t, a.data, url, "session", "new")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s)
	sh(t, a.data, a.mnt, "printf 'before\\n' > before.txt; mkdir -p src; printf 'package x\\n' > src/x.go")
	srv.Halt()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			srv.Resume()
		}
	})
	// A writer (create, write, close; mkdir) while the server is down.
	// (It starts outside the mount: Start waits for its chdir.)
	w := exec.Command("bash", "-c", "cd \"$1\" && printf 'during\\n' > during.txt && mkdir d && printf 'x\\n' > d/x && cat before.txt", "bash", a.mnt)
	w.Env = env(a.data)
	var out, errout syncBuffer
	w.Stdout, w.Stderr = &out, &errout
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- w.Wait() }()
	time.Sleep(500 * time.Millisecond) // let it run into the outage (no assertion hangs on this)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	select {
	case err := <-waited:
		if err != nil || out.String() != "before\n" {
			t.Fatalf("writer across the restart: %v, stdout %q, stderr %q; want it to wait for the server and succeed", err, out.String(), errout.String())
		}
	case <-time.After(2 * time.Minute):
		w.Process.Kill()
		t.Fatalf("writer across the restart still blocked two minutes after the server came back")
	}
	// The same mount goes on writing and reading.
	if got := sh(t, a.data, a.mnt, "printf 'after\\n' > after.txt; cat before.txt during.txt d/x after.txt src/x.go"); got != "before\nduring\nx\nafter\npackage x\n" {
		t.Errorf("the mount after the restart reads %q", got)
	}
	// Every acknowledged write is in PostgreSQL: the session, mounted on
	// another host after this mount ended, has them all.
	ma.stop()
	mb := startMount(t, b.data, b.mnt, "--store", url, "--session", s)
	if got := sh(t, b.data, b.mnt, "cat before.txt during.txt d/x after.txt src/x.go"); got != "before\nduring\nx\nafter\npackage x\n" {
		t.Errorf("the session on another host after the restart reads %q", got)
	}
	mb.stop()
}

// testFurtherMount: a further mount served by a running padfs process
// (a second `padfs mount` on its data directory) takes its session's lease
// in that process: another host is refused it, naming that process, until
// the further mount ends.
func testFurtherMount(t *testing.T, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s1 := mustPgPadfs(t, a.data, url, "session", "new")
	s2 := mustPgPadfs(t, a.data, url, "session", "new")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s1)
	a2 := newHost(t, "a2")
	m2 := startMount(t, a.data, a2.mnt, "--store", url, "--session", s2)
	sh(t, a.data, a2.mnt, "printf 'two\\n' > t.txt")
	pid := strconv.Itoa(ma.cmd.Process.Pid)
	r := failMount(t, b.data, b.mnt, "--store", url, "--session", s2)
	if !strings.Contains(r.errout, "mounted by pid "+pid) {
		t.Errorf("mount of a session served as a further mount elsewhere: %q; want it held by pid %s", r.errout, pid)
	}
	m2.stop()
	mb := startMount(t, b.data, b.mnt, "--store", url, "--session", s2)
	if got := sh(t, b.data, b.mnt, "cat t.txt"); got != "two\n" {
		t.Errorf("session two after its further mount ended: %q", got)
	}
	mb.stop()
	ma.stop()
}

// testTwoHosts: two processes on two data directories mount two sessions
// of one store at once; each sees the other's sessions, log, diff, grep
// and checkpoints, and .asof/ of the other's session mounted read-only.
func testTwoHosts(t *testing.T, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s1 := mustPgPadfs(t, a.data, url, "session", "new", "--name", "one")
	s2 := mustPgPadfs(t, b.data, url, "session", "new", "--name", "two")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s1)
	mb := startMount(t, b.data, b.mnt, "--store", url, "--session", s2)
	sh(t, a.data, a.mnt, "printf 'alpha needle\\n' > a.txt; mkdir -p src; printf 'package x\\n' > src/x.go")
	sh(t, b.data, b.mnt, "printf 'beta\\n' > b.txt")

	// Host b lists both sessions (through its mount's control socket).
	ls := mustPgPadfs(t, b.data, url, "session", "ls")
	for _, id := range []string{s1, s2} {
		if !strings.Contains(ls, id) {
			t.Errorf("session ls on host b does not list %s:\n%s", id, ls)
		}
	}
	// Host b reads host a's log, and host a host b's.
	if log := mustPgPadfs(t, b.data, url, "log", "--session", s1); !strings.Contains(log, "a.txt") || !strings.Contains(log, "src/x.go") {
		t.Errorf("log of session one on host b:\n%s", log)
	}
	if log := mustPgPadfs(t, a.data, url, "log", "--session", s2); !strings.Contains(log, "b.txt") {
		t.Errorf("log of session two on host a:\n%s", log)
	}
	// A checkpoint made on host a is seen on host b; a write after it
	// shows in diff from host b.
	mustPgPadfs(t, a.data, url, "checkpoint", "--session", s1, "before")
	sh(t, a.data, a.mnt, "printf 'alpha needle changed\\n' > a.txt")
	if cps := mustPgPadfs(t, b.data, url, "checkpoint", "--session", s1, "--list"); !strings.Contains(cps, "before") {
		t.Errorf("checkpoints of session one on host b: %q", cps)
	}
	if d := mustPgPadfs(t, b.data, url, "diff", "--session", s1, "-u", "before"); !strings.Contains(d, "+alpha needle changed") {
		t.Errorf("diff of session one since its checkpoint, on host b:\n%s", d)
	}
	// grep on host b over session one, written on host a: exact.
	if g := mustPgPadfs(t, b.data, url, "grep", "-n", "--session", s1, "needle"); g != "a.txt:1:alpha needle changed" {
		t.Errorf("grep on host b over session one = %q", g)
	}
	// Host b's search index follows session one, written on host a: its
	// hits stop being "degraded" (read past the index) once it caught up.
	waitFor(t, "host b's index to follow session one", func() bool {
		r := pgPadfs(t, b.data, url, "search", "--json", "--session", s1, "needle")
		return r.code == 0 && strings.Contains(r.out, `"path":"a.txt"`) && !strings.Contains(r.out, `"degraded":true`)
	})
	// Session one, mounted read-write on host a, mounts read-only as of
	// now on a third host.
	now := mustPgPadfs(t, b.data, url, "now")
	c := newHost(t, "c")
	startMount(t, c.data, c.mnt, "--store", url, "--session", s1, "--asof", now)
	if got := sh(t, c.data, c.mnt, "cat a.txt src/x.go"); got != "alpha needle changed\npackage x\n" {
		t.Errorf("read-only mount of session one on host c as of %s: %q", now, got)
	}
	// fork on host b of session one, mounted read-write there.
	fork := mustPgPadfs(t, b.data, url, "session", "fork", s1, "--name", "forked")
	if ls := mustPgPadfs(t, a.data, url, "session", "ls"); !strings.Contains(ls, "forked") {
		t.Errorf("session ls on host a after a fork on host b:\n%s", ls)
	}
	_ = fork
	ma.stop()
	mb.stop()
}

// testLease: a second read-write mount of a session fails, naming the
// holder; once the holder is killed (-9) its lease expires and the
// session mounts elsewhere with every write the holder acknowledged.
func testLease(t *testing.T, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s := mustPgPadfs(t, a.data, url, "session", "new")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s, "--lease-ttl", "2s")
	sh(t, a.data, a.mnt, "printf 'kept\\n' > k.txt")

	r := failMount(t, b.data, b.mnt, "--store", url, "--session", s)
	msg := strings.TrimSpace(r.errout)
	pid := strconv.Itoa(ma.cmd.Process.Pid)
	if r.code == 0 || strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "mounted by pid "+pid) || !strings.Contains(msg, "on host ") ||
		!strings.Contains(msg, "since ") {
		t.Errorf("second read-write mount: exit %d, stderr %q; want one line naming pid %s, its host and since when", r.code, msg, pid)
	}
	// An all-sessions read-write mount conflicts too.
	if r := failMount(t, b.data, b.mnt, "--store", url); !strings.Contains(r.errout, "mounted by pid "+pid) {
		t.Errorf("all-sessions mount beside a session's writer: %q", r.errout)
	}

	ma.kill()
	var mb *mount
	waitFor(t, "the killed holder's lease to expire", func() bool {
		m, err := tryMount(t, b.data, b.mnt, "--store", url, "--session", s)
		if err == nil {
			mb = m
			return true
		}
		if !strings.Contains(err.Error(), "mounted by pid "+pid) {
			t.Fatalf("mount after kill -9 of the holder: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
		return false
	})
	if got := sh(t, b.data, b.mnt, "cat k.txt; printf 'new\\n' > n.txt; cat n.txt"); got != "kept\nnew\n" {
		t.Errorf("session after taking it over: %q", got)
	}
	mb.stop()
}

// testFenced: a holder paused (SIGSTOP) past its lease's expiry, while
// another host takes the session over, cannot commit when it resumes.
func testFenced(t *testing.T, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s := mustPgPadfs(t, a.data, url, "session", "new")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s, "--lease-ttl", "1s")
	sh(t, a.data, a.mnt, "mkdir before")
	pid := ma.cmd.Process.Pid
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			syscall.Kill(pid, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume) // before the mount's own cleanup (cleanups run last first)
	var mb *mount
	waitFor(t, "the paused holder's lease to expire", func() bool {
		m, err := tryMount(t, b.data, b.mnt, "--store", url, "--session", s)
		if err == nil {
			mb = m
			return true
		}
		time.Sleep(200 * time.Millisecond)
		return false
	})
	resume()
	// The former holder's commits fail: mkdir returns an error and
	// nothing reaches the store.
	r := shResult(t, a.data, a.mnt, "mkdir stale")
	if r.code == 0 {
		t.Errorf("mkdir on the fenced former holder succeeded")
	}
	if got := sh(t, b.data, b.mnt, "ls"); got != "before\n" {
		t.Errorf("session on the new holder after the former one tried to write: %q; want only before", got)
	}
	if log := mustPgPadfs(t, b.data, url, "log", "--session", s); strings.Contains(log, "stale") {
		t.Errorf("the fenced commit is in the log:\n%s", log)
	}
	sh(t, b.data, b.mnt, "mkdir after")
	// The former holder read its session without asking the server while
	// it held the lease; paused past the lease, it lost that too: it
	// reads what the new holder wrote.
	if got := sh(t, a.data, a.mnt, "ls"); got != "after\nbefore\n" {
		t.Errorf("the former holder lists %q after the new holder's mkdir after; want after and before", got)
	}
	mb.stop()
	ma.stop()
}

// logEvent is one line of `padfs log --json`.
type logEvent struct {
	Seq    uint64 `json:"seq"`
	HLC    string `json:"hlc"`
	Op     string `json:"op"`
	Path   string `json:"path"`
	Detail string `json:"detail"`
}

func parseLog(t *testing.T, jsonl string) []logEvent {
	t.Helper()
	var evs []logEvent
	for _, line := range strings.Split(strings.TrimSpace(jsonl), "\n") {
		var ev logEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// testCheckpointAnyHost: `padfs checkpoint` from a host that does not hold
// the session's lease (the session is mounted read-write on another host)
// is one commit of the session's log naming what the holder has
// committed: .asof/NAME shows it on both hosts, the log on both hosts has
// its event in place, log --since NAME has the events after it; made
// while the holder commits, each checkpoint names exactly the tree of
// the log before it. The holder's file content and metadata stay its
// own (restore from the other host is still refused).
func testCheckpointAnyHost(t *testing.T, url string) {
	a, b := newHost(t, "a"), newHost(t, "b")
	s := mustPgPadfs(t, a.data, url, "session", "new")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s)
	sh(t, a.data, a.mnt, "printf 'one\\n' > f")
	t0 := mustPgPadfs(t, b.data, url, "now")
	at := mustPgPadfs(t, b.data, url, "checkpoint", "--session", s, "cp")
	sh(t, a.data, a.mnt, "printf 'two\\n' > f; printf 'new\\n' > g")
	if got := sh(t, a.data, a.mnt, "cat .asof/cp/f; ls .asof/cp; cat f"); got != "one\nf\ntwo\n" {
		t.Errorf("the holder's .asof/cp and f after a checkpoint from another host: %q", got)
	}
	if got := mustPgPadfs(t, a.data, url, "checkpoint", "--session", s, "--list"); got != "cp "+at {
		t.Errorf("checkpoints listed on the holder's host: %q; want cp %s", got, at)
	}
	if r := pgPadfs(t, b.data, url, "checkpoint", "--session", s, "cp"); r.code == 0 || !strings.Contains(r.errout, "already names "+at) {
		t.Errorf("a second checkpoint cp from another host: exit %d, %q; want it refused as a duplicate", r.code, r.errout)
	}
	if r := pgPadfs(t, b.data, url, "restore", "--session", s, "--asof", t0); r.code == 0 || !strings.Contains(r.errout, "mounted read-write by pid ") {
		t.Errorf("restore from another host: exit %d, %q; want it refused, naming the holder", r.code, r.errout)
	}

	// Checkpoints from b while a commits.
	w := exec.Command("bash", "-c", `cd "$1" && for i in $(seq 40); do printf '%s\n' $i > n$i; done`, "bash", a.mnt)
	w.Env = env(a.data)
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 5; i++ {
		mustPgPadfs(t, b.data, url, "checkpoint", "--session", s, fmt.Sprintf("c%d", i))
	}
	if err := w.Wait(); err != nil {
		t.Fatalf("writer on the holder beside checkpoints from another host: %v", err)
	}

	// The log, on both hosts (b's padfs log, a's through its mount, and
	// a's .log/ file): the same events, numbered without gaps, HLCs
	// increasing, the checkpoints in place.
	la := mustPgPadfs(t, a.data, url, "log", "--session", s, "--json")
	if lb := mustPgPadfs(t, b.data, url, "log", "--session", s, "--json"); la != lb {
		t.Errorf("log on the holder's host:\n%s\nlog on the other:\n%s", la, lb)
	}
	if lf := strings.TrimSpace(sh(t, a.data, a.mnt, "cat .log/events.jsonl")); lf != la {
		t.Errorf(".log/events.jsonl on the holder:\n%s\npadfs log --json:\n%s", lf, la)
	}
	evs := parseLog(t, la)
	seen := map[string]bool{} // the n* files created before each event
	names := map[string]string{}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) || i > 0 && ev.HLC <= evs[i-1].HLC {
			t.Errorf("event %d: seq %d at %s after %s", i+1, ev.Seq, ev.HLC, evs[max(i-1, 0)].HLC)
		}
		if ev.Op == "session.checkpoint" {
			var want []string
			for n := range seen {
				want = append(want, n)
			}
			slices.Sort(want)
			names[ev.Detail] = strings.Join(want, " ")
			if ev.Detail == "cp" && ev.HLC != at {
				t.Errorf("checkpoint cp's event at %s; checkpoint printed %s", ev.HLC, at)
			}
			continue
		}
		if strings.HasPrefix(ev.Path, "n") {
			seen[ev.Path] = true
		}
	}
	t.Logf("the n* files each checkpoint names: %q", names)
	if len(names) != 6 {
		t.Fatalf("checkpoint events in the log: %v; want cp, c1..c5", names)
	}
	// Each checkpoint names exactly the files the log created before it,
	// on the holder (.asof/) and on b (a read-only mount as of it).
	for i := 1; i <= 5; i++ {
		cp := fmt.Sprintf("c%d", i)
		got := strings.TrimSpace(strings.ReplaceAll(sh(t, a.data, a.mnt, "ls .asof/"+cp+" | grep '^n' | sort || true"), "\n", " "))
		if got != names[cp] {
			t.Errorf(".asof/%s on the holder: %q; the log created %q before it", cp, got, names[cp])
		}
	}
	mb := startMount(t, b.data, b.mnt, "--store", url, "--session", s, "--asof", "c3")
	got := strings.TrimSpace(strings.ReplaceAll(sh(t, b.data, b.mnt, "ls | grep '^n' | sort || true"), "\n", " "))
	if got != names["c3"] {
		t.Errorf("session as of c3 on the other host: %q; the log created %q before it", got, names["c3"])
	}
	mb.stop()
	mb = startMount(t, b.data, b.mnt, "--store", url, "--session", s, "--asof", "cp")
	if got := sh(t, b.data, b.mnt, "cat f; ls"); got != "one\nf\n" {
		t.Errorf("session as of cp on the other host: %q", got)
	}
	mb.stop()
	// log --since cp on both hosts: the events after it.
	since := mustPgPadfs(t, a.data, url, "log", "--session", s, "--since", "cp", "--json")
	if sb := mustPgPadfs(t, b.data, url, "log", "--session", s, "--since", "cp", "--json"); sb != since {
		t.Errorf("log --since cp on the holder's host:\n%s\non the other:\n%s", since, sb)
	}
	var after []string
	for _, ev := range evs {
		if ev.HLC > at {
			after = append(after, fmt.Sprint(ev.Seq))
		}
	}
	var gotSince []string
	for _, ev := range parseLog(t, since) {
		gotSince = append(gotSince, fmt.Sprint(ev.Seq))
	}
	if len(after) == 0 || !slices.Equal(gotSince, after) {
		t.Errorf("log --since cp: events %v; want %v (those after %s)", gotSince, after, at)
	}
	// Mounted read-write on b once a let go: .asof/ there names them too.
	ma.stop()
	mb = startMount(t, b.data, b.mnt, "--store", url, "--session", s)
	if got := sh(t, b.data, b.mnt, "cat .asof/cp/f; ls .asof/cp; cat f"); got != "one\nf\ntwo\n" {
		t.Errorf(".asof/cp on the other host: %q", got)
	}
	got = strings.TrimSpace(strings.ReplaceAll(sh(t, b.data, b.mnt, "ls .asof/c4 | grep '^n' | sort || true"), "\n", " "))
	if got != names["c4"] {
		t.Errorf(".asof/c4 on the other host: %q; the log created %q before it", got, names["c4"])
	}
	mb.stop()
}
