package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/spf13/cobra"
)

// ctltest is a command registered only in this test binary: it reports
// where it ran, echoes what it reads, and exits with the code it is given.
func init() { addCommand(newCtlTestCmd) }

var blockStarted = make(chan struct{}, 1)
var blockEnded = make(chan error, 1)

func newCtlTestCmd() *cobra.Command {
	c := &cobra.Command{
		Use:    "ctltest",
		Hidden: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			code, _ := cmd.Flags().GetInt("code")
			read, _ := cmd.Flags().GetInt("read")
			fail, _ := cmd.Flags().GetString("fail")
			block, _ := cmd.Flags().GetBool("block")
			return withApp(cmd, func(a *App) error {
				where := "direct"
				if a.Mount != nil {
					where = "mount:" + a.Mount.Mountpoint
				}
				fmt.Fprintf(a.Out, "where=%s args=%s cwd=%s uid=%d\n", where, strings.Join(args, ","), a.Cwd, a.Uid)
				fmt.Fprintf(a.Err, "to stderr\n")
				if read > 0 {
					buf := make([]byte, read)
					n, err := io.ReadFull(a.In, buf)
					fmt.Fprintf(a.Out, "stdin=%q err=%v\n", buf[:n], err)
				}
				if block {
					blockStarted <- struct{}{}
					<-cmd.Context().Done()
					blockEnded <- cmd.Context().Err()
					return cmd.Context().Err()
				}
				if fail != "" {
					return errors.New(fail)
				}
				if code != 0 {
					return exitError{code}
				}
				return nil
			})
		},
	}
	c.Flags().Int("code", 0, "exit code")
	c.Flags().Int("read", 0, "bytes to read from stdin")
	c.Flags().String("fail", "", "error message")
	c.Flags().Bool("block", false, "block until cancelled")
	return c
}

// startCtl opens a store in a fresh data dir and serves its socket, as a
// mount would (without FUSE).
func startCtl(t *testing.T) (string, *mvcc.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := storeopen.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := listenCtl(App{Dir: dir, Store: st, Mount: &MountInfo{Mountpoint: "/fake", Pid: os.Getpid(), Data: dir}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		st.Close()
		if _, err := os.Lstat(socketPath(dir)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket not removed on close: %v", err)
		}
	})
	return dir, st
}

func run(t *testing.T, stdin io.Reader, args ...string) (code int, out, errs string) {
	t.Helper()
	var o, e bytes.Buffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	code = execute(context.Background(), args, stdin, &o, &e)
	return code, o.String(), e.String()
}

func TestForwardRelaysOutputCodeAndCwd(t *testing.T) {
	dir, _ := startCtl(t)
	fi, err := os.Stat(socketPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Errorf("socket mode %v, want socket 0600", fi.Mode())
	}
	cwd, _ := os.Getwd()
	code, out, errs := run(t, nil, "--data", dir, "ctltest", "--code", "3", "x", "y")
	if code != 3 {
		t.Errorf("code %d, want 3", code)
	}
	want := fmt.Sprintf("where=mount:/fake args=x,y cwd=%s uid=%d\n", cwd, os.Getuid())
	if out != want || errs != "to stderr\n" {
		t.Errorf("out %q errs %q, want %q and %q", out, errs, want, "to stderr\n")
	}
	code, out, errs = run(t, nil, "--data", dir, "ctltest", "--fail", "boom\nsecond line")
	if code != 2 || errs != "to stderr\npadfs: boom second line\n" || !strings.HasPrefix(out, "where=mount") {
		t.Errorf("fail: code %d out %q errs %q", code, out, errs)
	}
}

func TestForwardPullsOnlyTheStdinItReads(t *testing.T) {
	dir, _ := startCtl(t)
	in := strings.NewReader("12345rest")
	code, out, _ := run(t, in, "--data", dir, "ctltest", "--read", "5")
	if code != 0 || !strings.Contains(out, `stdin="12345" err=<nil>`) {
		t.Errorf("code %d out %q", code, out)
	}
	if rest, _ := io.ReadAll(in); string(rest) != "rest" {
		t.Errorf("client consumed too much stdin: left %q", rest)
	}
	code, out, _ = run(t, strings.NewReader("ab"), "--data", dir, "ctltest", "--read", "5")
	if code != 0 || !strings.Contains(out, `stdin="ab" err=unexpected EOF`) {
		t.Errorf("short stdin: code %d out %q", code, out)
	}
}

func TestForwardedStoreCommands(t *testing.T) {
	dir, st := startCtl(t)
	code, out, errs := run(t, nil, "--data", dir, "session", "new", "--name", "viasock")
	if code != 0 {
		t.Fatalf("session new: %d %s", code, errs)
	}
	id := strings.TrimSpace(out)
	if _, err := st.LiveHeader(mustSID(t, id)); err != nil {
		t.Errorf("session %s not in the served store: %v", id, err)
	}
	code, out, errs = run(t, nil, "--data", dir, "session", "ls")
	if code != 0 || !strings.Contains(out, id) || !strings.Contains(out, "viasock") {
		t.Errorf("session ls: %d %q %q", code, out, errs)
	}
	before, _ := st.Now()
	code, out, _ = run(t, nil, "--data", dir, "now")
	h, err := mvcc.ParseHLC(strings.TrimSpace(out))
	if code != 0 || err != nil || h <= before || h.String() != strings.TrimSpace(out) {
		t.Errorf("now: code %d out %q (err %v), want canonical HLC after %s", code, out, err, before)
	}
}

func TestForwardConcurrent(t *testing.T) {
	dir, _ := startCtl(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var o, e bytes.Buffer
			code := execute(context.Background(), []string{"--data", dir, "ctltest", "--code", fmt.Sprint(i%3 + 1), fmt.Sprint(i)},
				strings.NewReader(""), &o, &e)
			if code != i%3+1 || !strings.Contains(o.String(), fmt.Sprintf("args=%d ", i)) {
				t.Errorf("request %d: code %d out %q", i, code, o.String())
			}
		}()
	}
	wg.Wait()
}

func TestClientGoneCancelsCommand(t *testing.T) {
	dir, _ := startCtl(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() {
		done <- execute(ctx, []string{"--data", dir, "ctltest", "--block"}, strings.NewReader(""), io.Discard, io.Discard)
	}()
	<-blockStarted
	cancel()
	if err := <-blockEnded; !errors.Is(err, context.Canceled) {
		t.Errorf("server-side command ended with %v, want context.Canceled", err)
	}
	if code := <-done; code != 2 {
		t.Errorf("client code %d, want 2 (lost connection)", code)
	}
}

func TestStaleSocketIsReplacedLiveOneRefused(t *testing.T) {
	dir := t.TempDir()
	// A socket file whose server died (kill -9 leaves exactly this).
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketPath(dir), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if _, err := os.Lstat(socketPath(dir)); err != nil {
		t.Fatal("stale socket missing:", err)
	}
	// With nobody serving, commands open the store directly.
	code, out, errs := run(t, nil, "--data", dir, "ctltest")
	if code != 0 || !strings.HasPrefix(out, "where=direct") {
		t.Fatalf("direct: %d %q %q", code, out, errs)
	}
	st, err := storeopen.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := listenCtl(App{Dir: dir, Store: st, Mount: &MountInfo{Mountpoint: "/first", Pid: os.Getpid()}}, discard)
	if err != nil {
		t.Fatalf("stale socket blocked the server: %v", err)
	}
	defer srv.Close()
	if _, err := listenCtl(App{Dir: dir, Store: st}, discard); err == nil || !strings.Contains(err.Error(), "/first") {
		t.Errorf("second server on a live socket: err %v, want refusal naming /first", err)
	}
	info, err := queryMount(dir)
	if err != nil || info.Mountpoint != "/first" {
		t.Errorf("info: %+v %v", info, err)
	}
}

func mustSID(t *testing.T, s string) mvcc.SessionID {
	t.Helper()
	id, err := mvcc.ParseSessionID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
