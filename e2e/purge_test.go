package e2e

import (
	"bufio"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/internal/rawscan"
)

// TestHardForgetKilledFinishesAtNextCommand: padfs session forget --hard
// --confirm killed with SIGKILL in the middle of its batches leaves the
// session marked; the next padfs command that opens the store finishes the
// purge (saying so), and then no byte of the session is left in the data
// directory.
func TestHardForgetKilledFinishesAtNextCommand(t *testing.T) {
	needFUSE(t)
	const marker, kept = "PADFS-MARKER-killed-4e1b9a", "PADFS-MARKER-kept-c03d55"
	data, mnt := dirs(t)
	keep := newSession(t, data, "keep")
	sid := newSession(t, data, "big")
	m := startMount(t, data, mnt)
	sh(t, data, mnt, `
		echo "`+kept+`" > `+keep+`/k.txt
		cd `+sid+` && python3 -c '
import os
for d in range(20):
    os.mkdir("d%d" % d)
for i in range(3000):
    with open("d%d/f%d" % (i % 20, i), "w") as f:
        f.write("file %d `+marker+`\n" % i)
'`)
	m.stop()
	if len(rawscan.Hits(t, data, marker)) == 0 {
		t.Fatal("marker not on disk before the purge: the test proves nothing")
	}
	token := tokenOf(t, mustPadfs(t, data, "session", "forget", "--hard", sid))

	cmd := exec.Command(padfsBin, "--data", data, "session", "forget", "--hard", sid, "--confirm", token)
	cmd.Env = env(data)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// The progress bar appears after the first batch: kill it then.
	sc := bufio.NewScanner(stderr)
	sc.Split(bufio.ScanRunes)
	var seen strings.Builder
	for sc.Scan() && !strings.Contains(seen.String(), "purging keys") {
		seen.WriteString(sc.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if !strings.Contains(seen.String(), "purging keys") {
		t.Fatalf("no progress before the purge ended: %q", seen.String())
	}

	// The next command finishes it, and says so on stderr.
	r := padfs(t, data, "session", "ls", "--all")
	if r.code != 0 || !strings.Contains(r.errout, "finishing the hard forget of session "+sid) || strings.Contains(r.out, sid) {
		t.Fatalf("session ls after the kill: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.out, r.errout)
	}
	if hits := rawscan.Hits(t, data, marker); len(hits) > 0 {
		t.Fatalf("%s still in %v after the purge finished", marker, hits)
	}
	if len(rawscan.Hits(t, data, kept)) == 0 {
		t.Fatal("the other session's content is gone too")
	}
	// Nothing left to finish, and the session is gone.
	if r := padfs(t, data, "session", "ls", "--all"); r.code != 0 || strings.Contains(r.errout, "finishing") {
		t.Fatalf("second session ls: %+v", r)
	}
	if r := padfs(t, data, "log", "--session", sid); r.code != 2 {
		t.Fatalf("log of the purged session: %+v", r)
	}
}
