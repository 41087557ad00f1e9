package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// smallDisk mounts a 24 MiB tmpfs as the data directory (unmounted in
// cleanup) and returns it with a mountpoint.
func smallDisk(t *testing.T) (data, mnt string) {
	t.Helper()
	needFUSE(t)
	data, mnt = dirs(t)
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	// Registered after startMount's cleanups would be too late: cleanups
	// run last-first, so this one (first) runs after the mount is gone.
	t.Cleanup(func() {
		if err := syscall.Unmount(data, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount tmpfs %s: %v", data, err)
		}
	})
	return data, mnt
}

// TestDiskFull: on a full disk, writers get ENOSPC (not EIO), the mount
// stays up and serves reads and listings, a file can be deleted, and then
// writes work again without a restart. A mount can be reopened on a full
// disk after a kill -9, serving the log it cannot fold from memory.
func TestDiskFull(t *testing.T) {
	data, mnt := smallDisk(t)
	sid := newSession(t, data)
	m := startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `echo hello > a.txt && mkdir d && echo deep > d/b.txt`)

	r := shResult(t, data, mnt, `dd if=/dev/urandom of=big bs=1M count=40 2>&1`)
	if r.code == 0 || !strings.Contains(r.out+r.errout, "No space left on device") {
		t.Fatalf("filling the disk: exit %d, want ENOSPC:\n%s%s", r.code, r.out, r.errout)
	}
	if strings.Contains(r.out+r.errout, "Input/output error") {
		t.Errorf("a full disk gave EIO:\n%s", r.out)
	}
	// Small writes fail with ENOSPC too, reads and listings work.
	r = shResult(t, data, mnt, `head -c 200000 /dev/urandom > more 2>&1`)
	t.Logf("small write on a full disk: exit %d %s", r.code, r.errout)
	sh(t, data, mnt, `test "$(cat a.txt)" = hello && test "$(cat d/b.txt)" = deep && ls -la . d >/dev/null`)

	// The store's failures were out of space, never EIO.
	for _, l := range strings.Split(m.stderr.String(), "\n") {
		if strings.Contains(l, `msg="padfs: system error"`) || strings.Contains(l, `msg="padfs: internal error"`) {
			t.Errorf("a full disk became EIO: %s", l)
		}
	}

	// Delete, then write again.
	sh(t, data, mnt, `rm -f big more`)
	sh(t, data, mnt, `echo again > c.txt && test "$(cat c.txt)" = again && head -c 1000000 /dev/urandom > mid && test $(stat -c %s mid) = 1000000`)

	// Crash with commits in the log, fill the disk from outside, remount.
	sh(t, data, mnt, `for i in 1 2 3 4 5; do echo "last $i" > last$i; done`)
	m.kill()
	filler := filepath.Join(data, "filler")
	exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M", "count=64").Run()
	var st syscall.Statfs_t
	if err := syscall.Statfs(data, &st); err != nil || st.Bavail > 64 {
		t.Fatalf("disk not full: %d blocks free (%v)", st.Bavail, err)
	}
	m = startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `test "$(cat last5)" = "last 5" && test "$(cat a.txt)" = hello && ls >/dev/null`)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	sh(t, data, mnt, `echo after > after.txt && test "$(cat after.txt)" = after`)
	m.stop()
	if ls := mustPadfs(t, data, "session", "ls"); !strings.Contains(ls, sid) {
		t.Errorf("session ls after the full disk does not list %s", sid)
	}
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `test "$(cat last5)" = "last 5" && test "$(cat after.txt)" = after`)
}
