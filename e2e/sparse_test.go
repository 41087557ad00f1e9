package e2e

import (
	"strings"
	"testing"
)

// TestSparseHugeFile: with the real binary and tools, a 999999999999999-byte
// file (pjdfstest truncate/12.t) is made at once and stores nothing; padfs
// log and diff name it without reading a petabyte; SIGTERM unmounts and a
// remount shows the same. Before, the truncate never returned and SIGTERM
// only logged "unmounting".
func TestSparseHugeFile(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	m := startMount(t, data, mnt, "--session", sid)
	since := strings.TrimSpace(mustPadfs(t, data, "now"))
	sh(t, data, mnt, "touch f && timeout 60 truncate -s 999999999999999 f && printf x >> f")
	if got := strings.TrimSpace(sh(t, data, mnt, "stat -c %s f")); got != "1000000000000000" {
		t.Fatalf("stat: size %q", got)
	}
	if got := sh(t, data, mnt, "timeout 60 tail -c 2 f | od -An -c | tr -d ' \\n'"); got != `\0x` {
		t.Errorf("last two bytes %q", got)
	}
	if log := mustPadfs(t, data, "log", "--session", sid, "--json", "f"); !strings.Contains(log, `"size":1000000000000000`) {
		t.Errorf("padfs log:\n%s", log)
	}
	// diff names the file: its content is too large to hold in memory.
	if r := padfs(t, data, "diff", "--session", sid, "-u", since); r.code == 0 || !strings.Contains(r.errout, "f: file too large") {
		t.Errorf("padfs diff -u of a sparse petabyte: exit %d\n%s%s", r.code, r.out, r.errout)
	}
	// grep reports the file instead of reading it into memory.
	sh(t, data, mnt, "echo x > small")
	if r := padfs(t, data, "grep", "--session", sid, "-r", "x", "."); !strings.Contains(r.out, "small:x") || !strings.Contains(r.errout, "f: file too large") {
		t.Errorf("padfs grep over a sparse petabyte: exit %d\n%s%s", r.code, r.out, r.errout)
	}
	if du := strings.TrimSpace(sh(t, data, data, "du -sm . | cut -f1")); len(du) > 2 {
		t.Errorf("the data directory takes %s MiB", du)
	}
	m.stop()
	startMount(t, data, mnt, "--session", sid)
	if got := strings.TrimSpace(sh(t, data, mnt, "stat -c %s f")); got != "1000000000000000" {
		t.Errorf("after remount: size %q", got)
	}
}
