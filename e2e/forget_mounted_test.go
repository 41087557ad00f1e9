package e2e

import (
	"strconv"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/pgtest"
)

// Forgetting a session mounted read-write is refused unless --force, also
// when a second `padfs mount` command (served by the first padfs process
// through its control socket) mounts it, and whether the command runs
// outside every mount or inside another one.
func TestForgetRefusedForFurtherMount(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	a, b := newSession(t, data, "alpha"), newSession(t, data, "beta")
	startMount(t, data, mnt, "--session", a)
	mnt2 := t.TempDir()
	startMount(t, data, mnt2, "--session", b)
	sh(t, data, mnt2, "echo work > f")
	outside := t.TempDir()
	for _, c := range []struct {
		where string
		dir   string
		args  []string
	}{
		{"outside", outside, []string{"session", "forget", b}},
		{"outside, by name", outside, []string{"session", "forget", "beta"}},
		{"inside the first mount", mnt, []string{"session", "forget", b}},
		{"outside, hard", outside, []string{"session", "forget", "--hard", b, "--confirm", "forget-x"}},
	} {
		r := shResult(t, data, c.dir, "padfs "+strings.Join(c.args, " "))
		if r.code != 2 || !strings.Contains(r.errout, "session "+b+" is mounted read-write at "+mnt2) {
			t.Errorf("%s: forget of a session mounted by a further mount: exit %d %q%q", c.where, r.code, r.out, r.errout)
		}
	}
	if got := sh(t, data, mnt2, "cat f"); got != "work\n" {
		t.Fatalf("the further mount after refused forgets: %q", got)
	}
	if out := mustPadfs(t, data, "session", "ls"); !strings.Contains(out, b) {
		t.Fatalf("session %s gone after refused forgets:\n%s", b, out)
	}
	// The receipt of a hard forget changes nothing: it is allowed.
	if r := padfs(t, data, "session", "forget", "--hard", b); r.code != 0 || !strings.Contains(r.out, "token:") {
		t.Errorf("hard forget receipt: exit %d %q%q", r.code, r.out, r.errout)
	}
	if r := padfs(t, data, "session", "forget", "--force", b); r.code != 0 {
		t.Errorf("forget --force: exit %d %q%q", r.code, r.out, r.errout)
	}
}

// On a PostgreSQL store a session whose lease another process holds (a
// mount on another host) is mounted read-write too.
func TestForgetRefusedForLeaseHolder(t *testing.T) {
	needFUSE(t)
	srv := pgtest.StartT(t)
	url := srv.DB(t)
	a, b := newHost(t, "a"), newHost(t, "b")
	s1 := mustPgPadfs(t, a.data, url, "session", "new")
	s2 := mustPgPadfs(t, a.data, url, "session", "new")
	ma := startMount(t, a.data, a.mnt, "--store", url, "--session", s1)
	pid := strconv.Itoa(ma.cmd.Process.Pid)
	for _, args := range [][]string{{"session", "forget", s1}, {"session", "forget", "--hard", s1, "--confirm", "forget-x"}} {
		r := pgPadfs(t, b.data, url, args...)
		if r.code != 2 || !strings.Contains(r.errout, "session "+s1+" is mounted read-write by pid "+pid+" on host ") {
			t.Errorf("%v from another host: exit %d %q%q", args, r.code, r.out, r.errout)
		}
	}
	// Another session is not held.
	if r := pgPadfs(t, b.data, url, "session", "forget", s2); r.code != 0 {
		t.Errorf("forget of an unmounted session: exit %d %q%q", r.code, r.out, r.errout)
	}
	if r := pgPadfs(t, b.data, url, "session", "forget", "--force", s1); r.code != 0 {
		t.Errorf("forget --force: exit %d %q%q", r.code, r.out, r.errout)
	}
	ma.stop()
}
