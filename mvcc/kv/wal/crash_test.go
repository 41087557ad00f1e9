package wal

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

const (
	crashDirEnv  = "PADFS_WAL_CRASH_DIR"
	crashModeEnv = "PADFS_WAL_CRASH_MODE"
)

// TestCrashChild is the process TestCrash kills: it updates key i and then
// prints i, for ever.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrash")
	}
	opts := Options{FlushInterval: time.Hour} // everything stays in the log
	if os.Getenv(crashModeEnv) == "flushing" {
		// Rotate and flush all the time, so the kill lands mid-flush too.
		opts = Options{FlushInterval: 2 * time.Millisecond, MemtableSize: 16 << 10}
	}
	s, err := openDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute) // in case the parent is gone
	for i := 0; time.Now().Before(deadline); i++ {
		if err := s.Update(func(tx kv.Txn) error { return tx.Put(key(i), value(i)) }); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("%d\n", i)
	}
}

func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	for _, mode := range []string{"log-only", "flushing"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashModeEnv+"="+mode)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			pid := cmd.Process.Pid
			killed := false
			kill := func() {
				if !killed {
					killed = true
					if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
						t.Errorf("kill %d: %v", pid, err)
					}
				}
			}
			watchdog := time.AfterFunc(2*time.Minute, kill)
			defer watchdog.Stop()

			// Every number printed is an Update that had returned.
			const target = 3000
			acked := -1
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				n, err := strconv.Atoi(sc.Text())
				if err != nil {
					continue // the test framework's own lines
				}
				if n != acked+1 {
					t.Fatalf("child acked %d after %d", n, acked)
				}
				if acked = n; acked+1 == target {
					kill()
				}
			}
			err = cmd.Wait()
			if acked+1 < target {
				t.Fatalf("child stopped after %d Updates: %v\n%s", acked+1, err, stderr.Bytes())
			}

			s, log := mustOpen(t, dir, Options{})
			defer s.Close()
			// What survives is a prefix of the Updates: every acked one, plus
			// at most the one that returned while the kill landed.
			n := 0
			verr := s.View(func(r kv.Reader) error {
				return r.Scan([]byte("key/"), nil, func(k, v []byte) (bool, error) {
					if !bytes.Equal(k, key(n)) || !bytes.Equal(v, value(n)) {
						return false, fmt.Errorf("entry %d is %q; want %q", n, k, key(n))
					}
					n++
					return true, nil
				})
			})
			if verr != nil {
				t.Fatal(verr)
			}
			if n < acked+1 || n > acked+2 {
				t.Fatalf("%d keys after the crash; %d Updates were acked", n, acked+1)
			}
			t.Logf("acked %d, recovered %d; %s", acked+1, n, log)
		})
	}
}
