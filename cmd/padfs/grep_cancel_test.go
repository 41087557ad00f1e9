package main

import (
	"bytes"
	"context"
	"io"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc"
)

// grepScanning reports whether a goroutine of this process is inside a
// grep scan, and the goroutine dump.
func grepScanning() (bool, string) {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			s := string(buf[:n])
			return strings.Contains(s, "github.com/padfs/padfs/grep.(*Matcher).scan("), s
		}
		buf = make([]byte, 2*len(buf))
	}
}

// TestGrepClientGoneStopsScan: a padfs grep served through the control
// socket stops when its client goes away, in the middle of a file's
// scan (a pattern Go's regexp needs about a minute per MiB for, over
// 4 MiB): the client exits 2 and no scan goroutine is left.
func TestGrepClientGoneStopsScan(t *testing.T) {
	dir, st := startCtl(t)
	h, err := st.CreateSession("grep", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.Create(h.ID, h.Root, "big.txt", mvcc.Attr{Mode: syscall.S_IFREG | 0o644}, "")
	if err != nil {
		t.Fatal(err)
	}
	line := []byte("abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcdefghij\n")
	if _, err := st.WriteContent(context.Background(), h.ID, n.Ino, bytes.NewReader(bytes.Repeat(line, (4<<20)/len(line))), 0); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() {
		done <- execute(ctx, []string{"--data", dir, "grep", "--session", h.ID.String(), "-E", `([a-z0-9]{1,50}){1,20}[A-Z]`},
			strings.NewReader(""), io.Discard, io.Discard)
	}()
	const hangGuard = 60 * time.Second // a bound for a hang, not a timing assertion
	deadline := time.Now().Add(hangGuard)
	for {
		if on, _ := grepScanning(); on {
			break
		}
		select {
		case code := <-done:
			t.Fatalf("grep ended (exit %d) before its scan was seen", code)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no grep scan started within %v", hangGuard)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel() // the client goes away: its connection closes
	select {
	case code := <-done:
		if code != 2 {
			t.Errorf("client exit %d, want 2 (lost connection)", code)
		}
	case <-time.After(hangGuard):
		t.Fatalf("the client did not return within %v of its cancel", hangGuard)
	}
	deadline = time.Now().Add(hangGuard)
	for {
		on, dump := grepScanning()
		if !on {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the grep still scans %v after its client went away:\n%s", hangGuard, dump)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
