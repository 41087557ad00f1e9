package search

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hangGuard bounds waits for what should happen at once, so that a hang
// fails with the state instead of hanging the suite (not a timing
// assertion).
const hangGuard = 60 * time.Second

// slowPattern has no literal for a prefilter and a large automaton: Go's
// regexp takes about a minute per MiB of lowercase text with it here.
const slowPattern = `([a-z0-9]{1,50}){1,20}[A-Z]`

// scanFrame names the function a grep spends its time in.
const scanFrame = "github.com/padfs/padfs/grep.(*Matcher).scan("

// grepScanning reports whether a goroutine of this process is inside a
// grep scan, and the goroutine dump.
func grepScanning() (bool, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			s := string(buf[:n])
			return strings.Contains(s, scanFrame), s
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestGrepReadInterrupted: a FUSE INTERRUPT of the open of a .grep/
// file (a caller's signal) stops the grep that generates it: the open
// returns EINTR to the caller, and the scan goroutines end. Without
// the interrupt this grep would run for minutes.
func TestGrepReadInterrupted(t *testing.T) {
	st, data := openStore(t)
	h, err := st.CreateSession("interrupt", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	line := []byte("abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij\n")
	putFile(t, st, h.ID, "big.txt", bytes.Repeat(line, (4<<20)/len(line)))
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	mnt := mountSession(t, st, h.ID, &ix)

	// The caller: this test binary, opening the file with a handled
	// SIGUSR1 on the thread that opens (see TestHelperInterruptedOpen).
	name := filepath.Join(mnt, ".grep", "-E -- "+slowPattern)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperInterruptedOpen$")
	cmd.Env = append(os.Environ(), "PADFS_TEST_OPEN="+name)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("the caller printed no thread id: %v", lines.Err())
	}
	tid, err := strconv.Atoi(strings.TrimPrefix(lines.Text(), "tid "))
	if err != nil {
		t.Fatalf("the caller's first line %q: %v", lines.Text(), err)
	}
	// Once the grep scans, the caller's open is a FUSE request in
	// flight: a signal to its thread makes the kernel send an INTERRUPT.
	deadline := time.Now().Add(hangGuard)
	for {
		if on, _ := grepScanning(); on {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no grep scan started within %v", hangGuard)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := unix.Tgkill(cmd.Process.Pid, tid, unix.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() {
		t.Fatalf("the caller printed no result: %v", lines.Err())
	}
	if got := lines.Text(); got != "open: "+syscall.EINTR.Error() {
		t.Errorf("the interrupted open: %q, want EINTR", got)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("the caller: %v", err)
	}
	// The work stops too (not only the request): no scan goroutine is
	// left.
	deadline = time.Now().Add(hangGuard)
	for {
		on, dump := grepScanning()
		if !on {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grep still scans %v after the interrupt:\n%s", hangGuard, dump)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHelperInterruptedOpen is the caller of TestGrepReadInterrupted,
// run as a subprocess: it prints its thread id, opens $PADFS_TEST_OPEN
// on that thread (open(2) itself: os.Open would retry on EINTR) and
// prints how the open ended. SIGUSR1 is handled, so it interrupts the
// open without killing the process.
func TestHelperInterruptedOpen(t *testing.T) {
	p := os.Getenv("PADFS_TEST_OPEN")
	if p == "" {
		t.Skip("the caller of TestGrepReadInterrupted; runs as its subprocess")
	}
	signal.Notify(make(chan os.Signal, 1), syscall.SIGUSR1)
	runtime.LockOSThread()
	fmt.Printf("tid %d\n", unix.Gettid())
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	if err == nil {
		unix.Close(fd)
		fmt.Println("open: ok")
		return
	}
	fmt.Printf("open: %v\n", err)
}
