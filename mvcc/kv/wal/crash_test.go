package wal

import (
	"bufio"
	"bytes"
	"errors"
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

	// crashTarget is how many acked Updates TestCrash waits for before it
	// kills the child.
	crashTarget = 3000
	// crashChildMax bounds the child in case nobody kills it; far above
	// crashTarget so that the kill lands while it is still writing. (A
	// child whose parent is gone also dies of SIGPIPE at its next print.)
	crashChildMax = 100 * crashTarget
)

// TestCrashChild is the process TestCrash kills: it updates key i and then
// prints i, until it is killed (or has acked crashChildMax Updates).
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("run by TestCrash")
	}
	opts := Options{FlushInterval: time.Hour} // everything stays in the log
	if m := os.Getenv(crashModeEnv); m == "flushing" || m == "compacting" {
		// Rotate and flush all the time, so the kill lands mid-flush too.
		opts = Options{FlushInterval: 2 * time.Millisecond, MemtableSize: 16 << 10}
	}
	s, err := openDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv(crashModeEnv) == "compacting" {
		// Compact all the time, so the kill lands in the copy, its
		// fdatasync, the rename or the swap.
		go func() {
			for {
				if err := s.Compact(nil); err != nil {
					fmt.Fprintln(os.Stderr, "compact:", err)
					os.Exit(1)
				}
				fmt.Println("compacted")
			}
		}()
	}
	for i := 0; i < crashChildMax; i++ {
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
	for _, mode := range []string{"log-only", "flushing", "compacting"} {
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
			// kill SIGKILLs the child this test started (os.Process does
			// not signal a pid it has already reaped).
			killed, waited := false, false
			kill := func() {
				if !killed {
					killed = true
					if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
						t.Errorf("kill %d: %v", cmd.Process.Pid, err)
					}
				}
			}
			// A t.Fatalf below must not leave the child running.
			t.Cleanup(func() {
				if !waited {
					kill()
					cmd.Wait()
				}
			})

			// Every number printed is an Update that had returned.
			const target = crashTarget
			acked, compacted := -1, 0
			// In "compacting" the kill waits for a few whole compactions
			// too, so that it lands amid one.
			wantCompacted := 0
			if mode == "compacting" {
				wantCompacted = 3
			}
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if sc.Text() == "compacted" {
					compacted++
				}
				n, err := strconv.Atoi(sc.Text())
				if err != nil {
					continue // the test framework's own lines
				}
				if n != acked+1 {
					t.Fatalf("child acked %d after %d", n, acked)
				}
				if acked = n; acked+1 >= target && compacted >= wantCompacted {
					kill()
				}
			}
			err = cmd.Wait()
			waited = true
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
			t.Logf("acked %d, recovered %d, %d compactions before the kill; %s", acked+1, n, compacted, log)
		})
	}
}
