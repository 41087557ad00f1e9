package pgtest

import (
	"context"
	"errors"
	"os"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestStartStop: a server starts, serves a fresh database, and Stop leaves
// neither a process nor its directory behind.
func TestStartStop(t *testing.T) {
	s, err := Start()
	if errors.Is(err, errNoBinaries) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			s.Stop()
		}
	})
	ctx := context.Background()
	url, err := s.CreateDB(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := c.QueryRow(ctx, "SELECT 41 + 1").Scan(&n); err != nil || n != 42 {
		t.Fatalf("query: %d, %v", n, err)
	}
	c.Close(ctx)
	pid, dir := s.Pid(), s.Dir()
	stopped = true
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("postmaster %d after Stop: kill 0 = %v; want ESRCH", pid, err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after Stop: %v; want it removed", dir, err)
	}
}

func TestReachable(t *testing.T) {
	if !reachable("/tmp", 65534, 65534) {
		t.Error("/tmp not reachable by nobody")
	}
	d := t.TempDir()
	if err := os.Mkdir(d+"/x", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 65534 && reachable(d+"/x", 65534, 65534) {
		t.Errorf("%s/x reachable by nobody through a 0700 directory", d)
	}
}
