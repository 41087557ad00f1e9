package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mountDirs makes mountpoints named names under a fresh temporary directory.
func mountDirs(t *testing.T, names ...string) map[string]string {
	t.Helper()
	base := t.TempDir()
	m := map[string]string{}
	for _, n := range names {
		m[n] = filepath.Join(base, n)
		if err := os.Mkdir(m[n], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func exited(m *mount) bool {
	select {
	case <-m.exited:
		return true
	default:
		return false
	}
}

// TestSeveralMounts: while one `padfs mount` runs, further `padfs mount`
// commands of the same data directory (another session, a read-only past
// of the same one) are served by the running process; each stays in the
// foreground and ends only its own mount; the first process exits once
// every mount ended.
func TestSeveralMounts(t *testing.T) {
	needFUSE(t)
	data, _ := dirs(t)
	d := mountDirs(t, "a", "b", "c", "d", "e", "f")
	s1 := newSession(t, data, "one")
	s2 := newSession(t, data, "two")

	a := startMount(t, data, d["a"], "--session", s1)
	sh(t, data, d["a"], "echo v1 > f")
	t1 := mustPadfs(t, data, "now")
	sh(t, data, d["a"], "echo v2 > f")

	b := startMount(t, data, d["b"], "--session", "two")
	c := startMount(t, data, d["c"], "--session", s1, "--asof", t1)
	for _, tc := range []struct {
		m    *mount
		want string
	}{
		{b, fmt.Sprintf("padfs: mounted session %s at %s (data %s, pid %d)", s2, d["b"], data, b.cmd.Process.Pid)},
		{c, fmt.Sprintf("padfs: mounted session %s read-only as of %s at %s (data %s, pid %d)", s1, t1, d["c"], data, c.cmd.Process.Pid)},
	} {
		if tc.m.banner != tc.want {
			t.Errorf("banner %q, want %q", tc.m.banner, tc.want)
		}
	}

	// All three serve: B its own session, C session one as of t1.
	sh(t, data, d["b"], "echo in-b > g")
	if got := readFile(t, filepath.Join(d["a"], "f")); got != "v2\n" {
		t.Errorf("a/f = %q", got)
	}
	if got := readFile(t, filepath.Join(d["c"], "f")); got != "v1\n" {
		t.Errorf("c/f (as of t1) = %q, want v1", got)
	}
	if got := readFile(t, filepath.Join(d["b"], "g")); got != "in-b\n" {
		t.Errorf("b/g = %q", got)
	}
	if _, err := os.Stat(filepath.Join(d["a"], "g")); !os.IsNotExist(err) {
		t.Errorf("b's file in a: %v", err)
	}
	if err := os.WriteFile(filepath.Join(d["c"], "f"), []byte("no"), 0o644); !errors.Is(err, syscall.EROFS) {
		t.Errorf("write in the read-only mount: %v", err)
	}
	rows := sessionsJSON(t, data)
	if rows[s1].Files != 1 || rows[s2].Files != 1 {
		t.Errorf("session ls beside three mounts: %+v", rows)
	}
	// A command run inside B defaults to B's session.
	if got := sh(t, data, d["b"], "padfs log --json | jq -r .path"); !strings.Contains(got, "g") || strings.Contains(got, "f") {
		t.Errorf("padfs log inside b: %q", got)
	}

	// A second writable mount of session one is refused (one line, exit 2);
	// so is the mountpoint of a running mount.
	wantOneLineFailure(t, "second writable mount", failMount(t, data, d["d"], "--session", s1), d["d"], "in use", d["a"])
	wantOneLineFailure(t, "busy mountpoint", failMount(t, data, d["b"], "--session", s2), "", "busy")
	wantOneLineFailure(t, "unknown session", failMount(t, data, d["d"], "--session", "nosuch"), d["d"], "unknown session")

	// SIGINT to B's client ends B only.
	b.cmd.Process.Signal(syscall.SIGINT)
	b.wait()
	if b.exitErr != nil || isMounted(d["b"]) {
		t.Fatalf("B after SIGINT: exit %v, mounted %v; stderr:\n%s", b.exitErr, isMounted(d["b"]), b.stderr.String())
	}
	if got := readFile(t, filepath.Join(d["a"], "f")); got != "v2\n" {
		t.Errorf("a/f after B ended = %q", got)
	}
	if got := readFile(t, filepath.Join(d["c"], "f")); got != "v1\n" {
		t.Errorf("c/f after B ended = %q", got)
	}

	// kill -9 of a client: the serving process unmounts its mount.
	k := startMount(t, data, d["d"], "--session", s2)
	if got := readFile(t, filepath.Join(d["d"], "g")); got != "in-b\n" {
		t.Errorf("d/g = %q", got)
	}
	k.cmd.Process.Signal(syscall.SIGKILL)
	<-k.exited
	waitFor(t, "the mount of the killed client to go", func() bool { return !isMounted(d["d"]) })

	// umount from outside ends a served mount; its client exits 0.
	u := startMount(t, data, d["e"], "--session", s2)
	sh(t, data, d["e"], "echo via-e > h")
	if err := syscall.Unmount(d["e"], 0); err != nil {
		t.Fatalf("umount %s: %v", d["e"], err)
	}
	u.wait()
	if u.exitErr != nil {
		t.Errorf("client after an external umount: %v; stderr:\n%s", u.exitErr, u.stderr.String())
	}
	if r := sessionsJSON(t, data)[s2]; r.Files != 2 {
		t.Errorf("session two after e's umount: %+v, want 2 files", r)
	}

	// SIGINT to A's process: A unmounts, the process keeps serving C
	// (and the socket), and exits once C ended.
	a.cmd.Process.Signal(syscall.SIGINT)
	waitFor(t, "A to unmount", func() bool { return !isMounted(d["a"]) })
	waitFor(t, "A to say it keeps serving", func() bool { return strings.Contains(a.stderr.String(), "still serving") })
	if exited(a) {
		t.Fatalf("the first padfs exited with a mount still served; stderr:\n%s", a.stderr.String())
	}
	if got := readFile(t, filepath.Join(d["c"], "f")); got != "v1\n" {
		t.Errorf("c/f after A ended = %q", got)
	}
	if got := mustPadfs(t, data, "session", "ls"); !strings.Contains(got, s1) {
		t.Errorf("session ls after A ended: %q", got)
	}
	// A new mount still goes to the running process.
	n := startMount(t, data, d["f"], "--session", s1)
	if got := readFile(t, filepath.Join(d["f"], "f")); got != "v2\n" {
		t.Errorf("f/f = %q", got)
	}
	n.stop()
	c.stop()
	a.wait()
	if a.exitErr != nil {
		t.Errorf("first padfs exit: %v; stderr:\n%s", a.exitErr, a.stderr.String())
	}
	if _, err := os.Lstat(filepath.Join(data, "padfs.sock")); !os.IsNotExist(err) {
		t.Errorf("control socket left behind: %v", err)
	}
	if r := sessionsJSON(t, data)[s1]; r.Files != 1 {
		t.Errorf("session one after every mount ended: %+v", r)
	}
}

// TestSeveralMountsFirstSignalledTwice: signals to the first padfs after
// its own mount ended end the mounts it still serves; their clients exit 0.
func TestSeveralMountsFirstSignalledTwice(t *testing.T) {
	needFUSE(t)
	data, _ := dirs(t)
	d := mountDirs(t, "a", "b")
	s1 := newSession(t, data, "one")
	s2 := newSession(t, data, "two")
	a := startMount(t, data, d["a"], "--session", s1)
	b := startMount(t, data, d["b"], "--session", s2)
	a.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "A to say it keeps serving", func() bool { return strings.Contains(a.stderr.String(), "still serving") })
	sh(t, data, d["b"], "printf dirty > written")
	a.cmd.Process.Signal(syscall.SIGTERM) // ends B
	b.wait()
	a.wait()
	if a.exitErr != nil || b.exitErr != nil {
		t.Fatalf("exits: first %v, client %v; stderr:\n%s\n%s", a.exitErr, b.exitErr, a.stderr.String(), b.stderr.String())
	}
	if isMounted(d["a"]) || isMounted(d["b"]) {
		t.Fatal("still mounted")
	}
	if r := sessionsJSON(t, data)[s2]; r.Files != 1 || r.Bytes != 5 {
		t.Errorf("session two: %+v, want the written file (5 bytes)", r)
	}
}

// TestAllSessionsByName: the all-sessions mount lists by-name/, symlinks
// from names to id directories, following session new and rename through
// the CLI; with it running, a writable mount of one of its sessions is
// refused, a read-only one works.
func TestAllSessionsByName(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	d := mountDirs(t, "one", "past")
	s1 := newSession(t, data, "alpha")
	startMount(t, data, mnt)
	s2 := mustPadfs(t, data, "session", "new", "--name", "beta")
	if got := sh(t, data, mnt, "ls"); got != s1+"\n"+s2+"\nby-name\n" {
		t.Errorf("ls of the root: %q", got)
	}
	if got := sh(t, data, mnt, "ls by-name"); got != "alpha\nbeta\n" {
		t.Errorf("ls by-name: %q", got)
	}
	if got := sh(t, data, mnt, "readlink by-name/beta"); got != "../"+s2+"\n" {
		t.Errorf("readlink by-name/beta: %q", got)
	}
	sh(t, data, mnt, "echo hi > by-name/alpha/f && cat "+s1+"/f >/dev/null")
	mustPadfs(t, data, "session", "rename", s1, "gamma")
	if got := sh(t, data, mnt, "ls by-name && cat by-name/gamma/f"); got != "beta\ngamma\nhi\n" {
		t.Errorf("after rename: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(mnt, "by-name", "alpha")); !os.IsNotExist(err) {
		t.Errorf("by-name/alpha after the rename: %v", err)
	}
	// Every session is writable in the all-sessions mount already.
	wantOneLineFailure(t, "writable mount beside all sessions", failMount(t, data, d["one"], "--session", "gamma"), d["one"], "in use", mnt)
	t1 := mustPadfs(t, data, "now")
	startMount(t, data, d["past"], "--session", "gamma", "--asof", t1)
	if got := readFile(t, filepath.Join(d["past"], "f")); got != "hi\n" {
		t.Errorf("past/f = %q", got)
	}
}

// TestServedMountBusy: a busy further mount behaves as a busy first
// mount: SIGTERM to its client says so (on the client's stderr) and keeps
// serving, a second one detaches lazily, and the client exits 0 once the
// last file there is closed. The first mount is untouched.
func TestServedMountBusy(t *testing.T) {
	needFUSE(t)
	data, _ := dirs(t)
	d := mountDirs(t, "a", "b")
	s1 := newSession(t, data, "one")
	s2 := newSession(t, data, "two")
	a := startMount(t, data, d["a"], "--session", s1)
	b := startMount(t, data, d["b"], "--session", s2)
	sh(t, data, d["b"], "echo kept > kept.txt")

	holder := exec.Command("bash", "-c", "exec 3<kept.txt; read -r line; echo \"$line\"")
	holder.Dir = d["b"]
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })

	b.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "the busy warning", func() bool { return strings.Contains(b.stderr.String(), "cannot unmount yet") })
	if got := readFile(t, filepath.Join(d["b"], "kept.txt")); got != "kept\n" || !isMounted(d["b"]) {
		t.Fatalf("b not serving after the first SIGTERM: %q", got)
	}
	b.cmd.Process.Signal(syscall.SIGTERM) // lazy detach
	waitFor(t, "the lazy detach", func() bool { return !isMounted(d["b"]) })
	if exited(b) {
		t.Errorf("client exited while its detached mount still serves an open file")
	}
	stdin.Write([]byte("bye\n"))
	stdin.Close()
	holder.Wait()
	b.wait()
	if b.exitErr != nil {
		t.Fatalf("client exit %v; stderr:\n%s", b.exitErr, b.stderr.String())
	}
	sh(t, data, d["a"], "echo still > s && test \"$(cat s)\" = still")
	if exited(a) {
		t.Fatal("the first padfs exited")
	}
	// Session two can be mounted again at once.
	startMount(t, data, d["b"], "--session", s2)
	if got := readFile(t, filepath.Join(d["b"], "kept.txt")); got != "kept\n" {
		t.Errorf("b/kept.txt after remount: %q", got)
	}
}
