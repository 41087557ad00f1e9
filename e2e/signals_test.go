package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBusyMountpointThenLazyDetach: SIGTERM while a process has its working
// directory in the mount keeps serving and says why; a second SIGTERM
// detaches lazily and padfs exits 0 once the holder is gone. Data written
// before is kept.
func TestBusyMountpointThenLazyDetach(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	m := startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, "echo kept > kept.txt")

	// A process of ours holds the mountpoint busy (cwd and an open file).
	holder := exec.Command("bash", "-c", "exec 3<kept.txt; read -r line; echo \"$line\"")
	holder.Dir = mnt
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.Process.Kill(); holder.Wait() })

	m.cmd.Process.Signal(syscall.SIGTERM)
	waitFor(t, "the busy warning", func() bool { return strings.Contains(m.stderr.String(), "cannot unmount yet") })
	if !isMounted(mnt) {
		t.Fatal("mount went away while busy")
	}
	if b, err := os.ReadFile(filepath.Join(mnt, "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("mount not serving after the first SIGTERM: %q %v", b, err)
	}

	m.cmd.Process.Signal(syscall.SIGTERM) // lazy detach
	waitFor(t, "the lazy detach", func() bool { return !isMounted(mnt) })
	stdin.Write([]byte("bye\n")) // the holder closes its file and exits
	stdin.Close()
	holder.Wait()
	m.wait()
	if m.exitErr != nil {
		t.Fatalf("padfs exited with %v; stderr:\n%s", m.exitErr, m.stderr.String())
	}

	startMount(t, data, mnt, "--session", sid)
	if b, err := os.ReadFile(filepath.Join(mnt, "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Errorf("after lazy detach and remount: %q %v", b, err)
	}
}

// TestExternalUmountEndsMount: `umount MOUNTPOINT` from outside ends padfs
// cleanly (exit 0, socket removed).
func TestExternalUmountEndsMount(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	m := startMount(t, data, mnt)
	sh(t, data, mnt, "mkdir s1 && echo x > s1/f")
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Skipf("umount(2) not permitted here: %v", err)
	}
	m.wait()
	if m.exitErr != nil {
		t.Fatalf("padfs exited with %v after an external umount; stderr:\n%s", m.exitErr, m.stderr.String())
	}
	if _, err := os.Lstat(filepath.Join(data, "padfs.sock")); !os.IsNotExist(err) {
		t.Errorf("control socket left behind: %v", err)
	}
	found := false
	for _, r := range sessionsJSON(t, data) {
		found = found || (r.Name == "s1" && r.Files == 1)
	}
	if !found {
		t.Errorf("session ls after external umount: no session s1 with 1 file: %+v", sessionsJSON(t, data))
	}
}
