package fs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc"
)

// A caller killed with SIGKILL while its close waits for a commit, or its
// write waits for the buffer that commit holds, exits without waiting for
// padfs (the kernel keeps it unkillable until its request is answered);
// the commit goes on and stores the acknowledged writes.
func TestKilledCallerIsNotPinned(t *testing.T) {
	var block atomic.Bool
	entered := make(chan struct{}, 16)
	release := make(chan struct{})
	hook := func(mvcc.SessionID, mvcc.Ino) error {
		if block.Load() {
			entered <- struct{}{}
			<-release
		}
		return nil
	}
	mnt, _, _ := mountTestOpts(t, Options{commitHook: hook})
	released := false
	unblock := func() {
		if !released {
			released = true
			block.Store(false)
			close(release)
		}
	}
	t.Cleanup(unblock)
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	block.Store(true)

	start := func(script string) *exec.Cmd {
		// bash changes into the mount, not the forked child (whose
		// chdir, if it met a garbage collection of this process,
		// would wait for a FUSE reply this process cannot give).
		cmd := exec.Command("bash", "-c", "cd \"$0\" && "+script, mnt)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	// exited waits for cmd after a SIGKILL. The bound only guards
	// against hanging the test binary when the caller is pinned: a
	// killed process exits at once, or after a kill poll (1 s).
	exited := func(what string, cmd *exec.Cmd) {
		t.Helper()
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			unblock()
			<-done
			t.Errorf("%s: killed while padfs was busy for it, it did not exit until padfs finished", what)
		}
	}

	// A writer whose close commits (blocked in the hook).
	closer := start("exec 3>>f; echo data >&3; exec 3>&-; sleep 600")
	<-entered
	exited("a writer killed in close(2)", closer)

	// A second writer whose write waits for the buffer the commit holds.
	writer := start("exec 3>>f; echo more >&3; sleep 600")
	// Its open or write waits for the buffer the commit holds.
	waitFUSE(t, writer.Process.Pid)
	exited("a writer killed in write(2) behind a commit", writer)

	unblock()
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The killed writer's write may or may not have been applied.
	if s := string(got); s != "data\n" && s != "data\nmore\n" {
		t.Errorf("after the commit went on: %q, want the acknowledged write", s)
	}
}

// waitFUSE waits until process pid waits for a FUSE reply (its wchan),
// or has exited. The bound is a hang guard.
func waitFUSE(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/wchan", pid))
		if err != nil || strings.Contains(string(b), "request_wait_answer") {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("process %d never waited for padfs", pid)
}

// Programs started after a mount do not inherit its /dev/fuse descriptor
// (which would keep the connection alive, and its users waiting, if padfs
// died).
func TestFUSEDescriptorNotInherited(t *testing.T) {
	mnt, _, _ := mountTest(t)
	if out := sh(t, mnt, "ls -l /proc/self/fd/"); strings.Contains(out, "/dev/fuse") {
		t.Errorf("a child process holds /dev/fuse:\n%s", out)
	}
}
