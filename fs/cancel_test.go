package fs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc"
)

// hangGuard is how long a test waits for something that should happen at
// once before it reports a hang (not a timing assertion).
const hangGuard = 60 * time.Second

// A cat of a sparse petabyte killed midway leaves padfs idle: every read
// is one request of bounded size, answered without store reads.
func TestInterruptCatOfSparseFile(t *testing.T) {
	mnt, _, _ := mountTest(t)
	sh(t, mnt, "timeout 60 truncate -s 999999999999999 f")
	// No cmd.Dir in the mount: the child's chdir before exec would need
	// this process's FUSE server while a vfork holds its P (a GC then
	// deadlocks); absolute paths instead.
	cmd := exec.Command("cat", filepath.Join(mnt, "f"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait until it has read some of the holes (the position of its
	// descriptor 3), then kill it.
	deadline := time.Now().Add(hangGuard)
	for pos := int64(0); pos < 64<<20; {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("cat read nothing")
		}
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/fdinfo/3")
		if v, ok := strings.CutPrefix(string(b), "pos:"); ok {
			pos, _ = strconv.ParseInt(strings.TrimSpace(strings.SplitN(v, "\n", 2)[0]), 10, 64)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("cat ended with %v", cmd.ProcessState)
	}
	if out := sh(t, mnt, "stat -c %s f"); strings.TrimSpace(out) != "999999999999999" {
		t.Errorf("stat after the kill: %q", out)
	}
}

// Unmount (what SIGTERM runs) stops a long request instead of waiting
// for it: a close whose commit is held is cancelled, and the unmount's own
// flush commits the data.
func TestInterruptUnmountStopsCommit(t *testing.T) {
	entered, stopped := make(chan struct{}), make(chan error, 1)
	var first atomic.Bool
	opts := Options{manualTicks: true}
	opts.commitHook = func(mvcc.SessionID, mvcc.Ino) error {
		if first.CompareAndSwap(false, true) {
			close(entered)
			select {
			case err := <-stopped:
				if err != errUnmounting {
					t.Errorf("stopped by %v, want Unmount", err)
				}
			case <-time.After(hangGuard):
				t.Error("Unmount never stopped the close's commit")
			}
		}
		return nil
	}
	opts.killedHook = func(err error) {
		select {
		case stopped <- err:
		default:
		}
	}
	mnt, st, m := mountTestOpts(t, opts)
	sid := sessionOf(t, m)
	// The writer runs outside the mount (its cwd would keep it busy).
	cmd := exec.Command("bash", "-c", `head -c 1048576 /dev/urandom > "$0/f"`, mnt)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(hangGuard):
		t.Fatal("the close never reached a commit")
	}
	unmounted := make(chan error, 1)
	go func() { unmounted <- m.Unmount() }()
	cmd.Wait() // its close returns (EINTR) once the commit stops
	select {
	case err := <-unmounted:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Unmount hangs")
	}
	in, err := st.Walk(sid, "f", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if in.Size != 1<<20 {
		t.Errorf("after the unmount: %d bytes stored, want %d", in.Size, 1<<20)
	}
}
