package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// startPassthrough mounts sid with --passthrough=on, or skips naming why
// the kernel or the process cannot do passthrough.
func startPassthrough(t *testing.T, data, mnt, sid string) *mount {
	t.Helper()
	m, err := tryMount(t, data, mnt, "--session", sid, "--passthrough=on")
	if err != nil && strings.Contains(m.stderr.String(), "--passthrough=on") {
		t.Skip("FUSE passthrough unavailable:", strings.TrimSpace(m.stderr.String()))
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPassthroughKill9: with open files served from staging files, a file
// whose close returned and one whose fsync returned (still open) survive a
// kill -9 of padfs; the stage directory holds nothing after the next
// start.
func TestPassthroughKill9(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	m := startPassthrough(t, data, mnt, sid)
	closed := bytes.Repeat([]byte("closed\n"), 150000)
	synced := bytes.Repeat([]byte("synced\n"), 150000)
	if err := os.WriteFile(filepath.Join(mnt, "closed.txt"), closed, 0o644); err != nil {
		t.Fatal(err)
	}
	// A writer that fsyncs and keeps its file open, then says so.
	py := exec.Command("python3", "-c", `
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"synced\n" * 150000)
os.fsync(fd)
os.write(fd, b"after the fsync, lost or not\n")
print("synced", flush=True)
sys.stdin.read()
`, filepath.Join(mnt, "synced.txt"))
	stdin := startSynced(t, py)
	if ents, _ := os.ReadDir(filepath.Join(data, "stage")); len(ents) == 0 {
		t.Error("no mount directory under <data>/stage while passthrough is on")
	}
	m.kill()
	stdin.Close()
	py.Process.Kill()
	py.Wait()

	// Whatever a dead process left in stage/ goes at the next start.
	junk := filepath.Join(data, "stage", "mount-dead", "s-junk")
	if err := os.MkdirAll(filepath.Dir(junk), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(junk, []byte("unacknowledged"), 0o600); err != nil {
		t.Fatal(err)
	}
	m = startPassthrough(t, data, mnt, sid)
	if got, err := os.ReadFile(filepath.Join(mnt, "closed.txt")); err != nil || !bytes.Equal(got, closed) {
		t.Errorf("closed.txt after kill -9: %d bytes (%v), want %d", len(got), err, len(closed))
	}
	got, err := os.ReadFile(filepath.Join(mnt, "synced.txt"))
	if err != nil || !bytes.HasPrefix(got, synced) {
		t.Errorf("synced.txt after kill -9: %d bytes (%v), want at least the %d fsync'd", len(got), err, len(synced))
	}
	if _, err := os.Stat(junk); !os.IsNotExist(err) {
		t.Errorf("%s survived the start of a new mount (%v)", junk, err)
	}
	m.stop()
	if _, err := os.Stat(filepath.Join(data, "stage", "mount-dead")); !os.IsNotExist(err) {
		t.Errorf("stage directory of a dead mount still there after the unmount (%v)", err)
	}
	if ents, _ := os.ReadDir(filepath.Join(data, "stage")); len(ents) != 0 {
		t.Errorf("%d entries left in <data>/stage after the unmount", len(ents))
	}
}

// TestPassthroughFlag: --passthrough=off, and the default (off: staging
// writes every byte to the data disk twice, see the README), mount and
// write through padfs; a bad value exits 2 naming the choices.
func TestPassthroughFlag(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	r := failMount(t, data, mnt, "--session", sid, "--passthrough=maybe")
	if r.code != 2 || !strings.Contains(r.errout, "want auto, on or off") {
		t.Errorf("--passthrough=maybe: exit %d, stderr %q", r.code, r.errout)
	}
	m := startMount(t, data, mnt, "--session", sid, "--passthrough=off")
	sh(t, data, mnt, `head -c 3000000 /dev/urandom > f && cp f g && cmp f g`)
	if ents, _ := os.ReadDir(filepath.Join(data, "stage")); len(ents) != 0 {
		t.Errorf("--passthrough=off made %d stage directories", len(ents))
	}
	m.stop()
	m = startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `head -c 3000000 /dev/urandom > h && cp h i && cmp h i`)
	if ents, _ := os.ReadDir(filepath.Join(data, "stage")); len(ents) != 0 {
		t.Errorf("the default mount made %d stage directories, want passthrough off", len(ents))
	}
	m.stop()
}
