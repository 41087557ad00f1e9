package fs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// mountTest opens a store in a temporary data directory, creates a session
// and mounts it under t.TempDir(); everything is undone in t.Cleanup.
func mountTest(t testing.TB) (mnt string, st *mvcc.Store, m *Server) {
	t.Helper()
	data := t.TempDir()
	st, err := mvcc.OpenDir(data)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("test", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	mnt = filepath.Join(t.TempDir(), "mnt")
	m = mountAt(t, st, mnt, Options{Session: &h.ID, SpillDir: filepath.Join(data, "spill")})
	return mnt, st, m
}

// mountAt mounts st at mnt (created) and unmounts in t.Cleanup.
func mountAt(t testing.TB, st *mvcc.Store, mnt string, opts Options) *Server {
	t.Helper()
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if opts.Uid == 0 {
		opts.Uid, opts.Gid = uint32(os.Getuid()), uint32(os.Getgid())
	}
	m, err := Mount(st, mnt, opts)
	if err != nil {
		t.Fatalf("mount %s: %v", mnt, err)
	}
	// Unmount is idempotent: tests may unmount themselves first.
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
			// Do not leave a dead mount behind.
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return m
}

// sh runs a bash script with the working directory dir and fails the test
// on a non-zero exit.
func sh(t *testing.T, dir, script string) string {
	t.Helper()
	out, err := shErr(dir, script)
	if err != nil {
		t.Fatalf("bash -c %q in %s: %v\n%s", script, dir, err, out)
	}
	return out
}

func shErr(dir, script string) (string, error) {
	cmd := exec.Command("bash", "-c", "cd \"$0\" && "+script, dir)
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}
