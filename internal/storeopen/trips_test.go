package storeopen_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

// fuseOps are the metadata operations whose cost in round trips
// TestRoundTripsPerFUSEOp reports, each run n times on names of its own.
var fuseOps = []struct {
	name string
	op   func(dir string, i int) error
}{
	{"create", func(dir string, i int) error {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("new%d", i)))
		if err != nil {
			return err
		}
		return f.Close()
	}},
	{"write+close", func(dir string, i int) error {
		return os.WriteFile(filepath.Join(dir, fmt.Sprintf("w%d", i)), []byte("some text\n"), 0o644)
	}},
	{"stat", func(dir string, i int) error {
		_, err := os.Lstat(filepath.Join(dir, "old", fmt.Sprintf("f%d", i)))
		return err
	}},
	{"readdir", func(dir string, i int) error {
		_, err := os.ReadDir(filepath.Join(dir, fmt.Sprintf("d%d", i)))
		return err
	}},
	{"unlink", func(dir string, i int) error {
		return os.Remove(filepath.Join(dir, "old", fmt.Sprintf("g%d", i)))
	}},
}

// mountPG mounts session sid of st at mnt, holding its lease, until the
// returned function (also run at cleanup) unmounts it.
func mountPG(t *testing.T, st storeAndDir, mnt string) func() {
	t.Helper()
	release, err := storeopen.LeaseMount(st.st, &st.sid, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := fs.Mount(st.st, mnt, fs.Options{Session: &st.sid, SpillDir: filepath.Join(st.dir, "spill"),
		Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())})
	if err != nil {
		release()
		t.Skipf("cannot mount FUSE at %s: %v", mnt, err)
	}
	done := false
	stop := func() {
		if done {
			return
		}
		done = true
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
		if err := release(); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// newPGSession opens a store on a fresh database of the test server and
// creates a session in it.
func newPGSession(t *testing.T, name string) (storeAndDir, *postgres.Store) {
	t.Helper()
	dir := t.TempDir()
	st, err := storeopen.Open(dir, pgtest.DB(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pg, _ := storeopen.Postgres(st)
	h, err := st.CreateSession(name, uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	return storeAndDir{st, dir, h.ID}, pg
}

type storeAndDir struct {
	st  *mvcc.Store
	dir string
	sid mvcc.SessionID
}

// TestRoundTripsPerFUSEOp mounts a session of a PostgreSQL store (holding
// its lease, as `padfs mount` does), and counts the transactions and round
// trips each metadata operation costs, once the process has read the
// session (a second mount, so that the kernel has nothing cached):
//
//	go test ./internal/storeopen/ -run TestRoundTripsPerFUSEOp -v
func TestRoundTripsPerFUSEOp(t *testing.T) {
	s, pg := newPGSession(t, "trips")
	mnt := filepath.Join(t.TempDir(), "mnt")
	const n = 8
	stop := mountPG(t, s, mnt)
	if err := os.Mkdir(filepath.Join(mnt, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		for _, p := range []string{fmt.Sprintf("old/f%d", i), fmt.Sprintf("old/g%d", i), fmt.Sprintf("d%d/x", i)} {
			os.MkdirAll(filepath.Dir(filepath.Join(mnt, p)), 0o755)
			if err := os.WriteFile(filepath.Join(mnt, p), []byte(p), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	stop()
	mountPG(t, s, mnt)
	os.ReadDir(mnt)
	for _, o := range fuseOps {
		before := pg.Stats()
		for i := range n {
			if err := o.op(mnt, i); err != nil {
				t.Fatalf("%s %d: %v", o.name, i, err)
			}
		}
		// A created file never written is committed at its RELEASE,
		// which the kernel sends after close(2) returns: commit it now
		// (or wait for that commit), so it is counted with its op.
		if err := s.st.Sync(); err != nil {
			t.Fatal(err)
		}
		d := pg.Stats().Sub(before)
		t.Logf("%-12s per op: %.1f trips (%.1f views, %.1f local, %.1f through deferred, %.1f updates, %.1f deferred, in %.1f batches; %.1f begins, %.1f gets, %.1f pages, %.1f commits; %.1f begun ahead, %.1f idle)",
			o.name, per(d.Trips, n), per(d.Views, n), per(d.LocalViews, n), per(d.DeferViews, n), per(d.Updates, n), per(d.Deferred, n), per(d.Batches, n),
			per(d.Begins, n), per(d.Gets, n), per(d.Pages, n), per(d.Commits, n), per(d.Ahead, n), per(d.Idle, n))
		// A stat reads only the leased session's keys, which this process
		// has read before: lease-local, no round trip. A commit is one
		// (writes and COMMIT), and one more to begin under the writer lock
		// unless the previous commit began it ahead (when the operations
		// follow each other within Options.AheadIdle, as here unless the
		// machine is very busy).
		if o.name == "stat" && d.Trips != 0 {
			t.Errorf("stat of a known file: %v; want no round trip (lease-local reads)", d)
		}
		// A new file's create joins its content's commit (mvcc/held.go):
		// one commit per file written (and one spare, for an inode
		// number block or a begin that missed).
		if o.name == "write+close" && d.Updates > int64(n)+1 {
			t.Errorf("write+close of a new file: %d updates for %d files, want one each", d.Updates, n)
		}
		if d.Trips != d.Begins+d.Gets+d.Pages+d.Commits || d.Commits != d.Batches || d.Begins > d.Batches || d.Updates < d.Batches {
			t.Errorf("%s: %v", o.name, d)
		}
	}
}

func per(v int64, n int) float64 { return float64(v) / float64(n) }
