package fs

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// openStoreOver opens the store of data directory dir as storeopen.OpenDir
// does (bbolt behind the log), with the log wrapped by wrap (a counting, a
// faulty or a shared kv). The caller closes it.
func openStoreOver(t testing.TB, dir string, wrap func(*wal.Store) kv.Store) *mvcc.Store {
	t.Helper()
	b, err := bolt.Open(filepath.Join(dir, mvcc.StoreFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(filepath.Join(dir, mvcc.WALDir), b, wal.Options{})
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	st, err := mvcc.New(wrap(w))
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	return st
}

// mountTest opens a store in a temporary data directory, creates a session
// and mounts it under t.TempDir(); everything is undone in t.Cleanup.
func mountTest(t testing.TB) (mnt string, st *mvcc.Store, m *Server) {
	t.Helper()
	return mountTestOpts(t, Options{})
}

// mountTestOpts is mountTest with more options (Session and SpillDir are
// set here).
func mountTestOpts(t testing.TB, opts Options) (mnt string, st *mvcc.Store, m *Server) {
	t.Helper()
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("test", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	mnt = filepath.Join(t.TempDir(), "mnt")
	opts.Session, opts.SpillDir = &h.ID, filepath.Join(data, "spill")
	if os.Getenv("PADFS_TEST_PASSTHROUGH") != "" && !strings.HasPrefix(t.Name(), "TestPassthrough") {
		// The whole suite over staging files where the kernel can.
		opts.Passthrough = PassthroughAuto
	}
	m = mountAt(t, st, mnt, opts)
	return mnt, st, m
}

// mountAt mounts st at mnt (created) and unmounts in t.Cleanup. It skips
// the test when this process cannot mount FUSE at all (see fuseUnavailable).
func mountAt(t testing.TB, st *mvcc.Store, mnt string, opts Options) *Server {
	t.Helper()
	if why := fuseUnavailable(); why != "" {
		t.Skip("FUSE unavailable:", why)
	}
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
		err := m.Unmount()
		// A mount can be busy for a moment after the last process of
		// the test left it, on a loaded machine (seen once in a suite
		// run, never alone); busy for 3 s is a failure.
		for i := 0; err != nil && strings.Contains(err.Error(), "busy") && i < 30; i++ {
			time.Sleep(100 * time.Millisecond)
			err = m.Unmount()
			if err == nil {
				t.Logf("unmount %s: busy for %d00 ms after the test", mnt, i+1)
			}
		}
		if err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
			// Do not leave a dead mount behind.
			if err := lazyUnmount(mnt); err != nil {
				t.Error(err)
			}
		}
	})
	return m
}

// lazyUnmount lazily unmounts dir: `umount -l` as root, else through the FUSE
// helper (fusermount3 -u -z, then fusermount -u -z).
func lazyUnmount(dir string) error {
	var errs []string
	for _, argv := range [][]string{{"umount", "-l"}, {"fusermount3", "-u", "-z"}, {"fusermount", "-u", "-z"}} {
		out, err := exec.Command(argv[0], append(argv[1:], dir)...).CombinedOutput()
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Sprintf("%s: %v %s", strings.Join(argv, " "), err, bytes.TrimSpace(out)))
	}
	return fmt.Errorf("cannot detach %s: %s", dir, strings.Join(errs, "; "))
}

// fuseProbe caches fuseUnavailable's answer for the test binary.
var fuseProbe struct {
	once sync.Once
	why  string
}

// fuseUnavailable says why this process cannot mount FUSE, or "" if it
// can: /dev/fuse is missing, or a trial mount of an empty file system
// (with the options Mount uses to get in: mount(2) directly, else the
// fusermount3 helper) fails, e.g. when not root and without fusermount3, or
// without CAP_SYS_ADMIN in a container. Only then are FUSE tests skipped;
// once the trial mount works, a failing Mount fails the test.
func fuseUnavailable() string {
	fuseProbe.once.Do(func() {
		if _, err := os.Stat("/dev/fuse"); err != nil {
			fuseProbe.why = fmt.Sprintf("no /dev/fuse (%v)", err)
			return
		}
		dir, err := os.MkdirTemp("", "padfs-fuse-probe-")
		if err != nil {
			fuseProbe.why = fmt.Sprintf("trial mount: %v", err)
			return
		}
		defer os.Remove(dir)
		srv, err := fuse.NewServer(fuse.NewDefaultRawFileSystem(), dir,
			&fuse.MountOptions{DirectMount: true, FsName: "padfs-probe", Name: "padfs-probe"})
		if err != nil {
			fuseProbe.why = fmt.Sprintf("cannot mount (root with CAP_SYS_ADMIN, or fusermount3, is needed): %v", err)
			return
		}
		go srv.Serve()
		if err := srv.WaitMount(); err != nil {
			fuseProbe.why = fmt.Sprintf("trial mount: %v", err)
		}
		if err := srv.Unmount(); err != nil {
			lazyUnmount(dir)
		}
	})
	return fuseProbe.why
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
