package fs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// writeEvents counts the "write" commits of inode ino.
func writeEvents(t *testing.T, st *mvcc.Store, sid mvcc.SessionID, ino uint64) int {
	t.Helper()
	n := 0
	err := st.View(func(tx *mvcc.ReadTx) error {
		return tx.Events(sid, 0, func(ev mvcc.Event) bool {
			if ev.Op == "write" && uint64(ev.Ino) == ino {
				n++
			}
			return true
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// pollBound is how long poll waits: well inside go test's -timeout, so a
// hang fails with the state instead of a dump of every goroutine.
func pollBound(t testing.TB) time.Duration {
	d, ok := t.(interface{ Deadline() (time.Time, bool) })
	if ok {
		if dl, set := d.Deadline(); set {
			return max(10*time.Second, time.Until(dl)/2)
		}
	}
	return 5 * time.Minute
}

// poll calls cond every few milliseconds until it reports done; past
// pollBound it fails the test with what cond last said of the state.
func poll(t testing.TB, what string, cond func() (done bool, state string)) {
	t.Helper()
	bound := pollBound(t)
	start := time.Now()
	for {
		done, state := cond()
		if done {
			return
		}
		if time.Since(start) > bound {
			t.Fatalf("gave up after %v waiting for %s: %s", bound, what, state)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func sessionOf(t *testing.T, m *Server) mvcc.SessionID {
	if m.opts.Session == nil {
		t.Fatal("not a single-session mount")
	}
	return *m.opts.Session
}

// A 100 MB file written in 128 KB requests is one version.
func TestLargeFileOneVersion(t *testing.T) {
	t.Parallel() // its own store and mount; no package state
	mnt, st, m := mountTest(t)
	sh(t, mnt, "dd if=/dev/urandom of=big bs=128K count=800 status=none")
	var fi syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mnt, "big"), &fi); err != nil {
		t.Fatal(err)
	}
	if fi.Size != 100<<20 {
		t.Fatalf("size %d", fi.Size)
	}
	if n := writeEvents(t, st, sessionOf(t, m), fi.Ino); n != 1 {
		t.Errorf("100 MB in 128 KB writes made %d versions, want 1", n)
	}
	// The content made it: compare checksums through the mount and of
	// the store's bytes read directly. (A content of many chunks has no
	// whole-file hash: each byte is hashed once, for its chunk.)
	sum := sh(t, mnt, "sha256sum < big | cut -d' ' -f1")
	in, err := st.Walk(sessionOf(t, m), "big", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	data, err := st.ReadAll(in)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x\n", sha256.Sum256(data)); sum != got {
		t.Errorf("store bytes hash to %s, mount reads %s", got, sum)
	}
	if in.ContentHash != nil {
		t.Errorf("a 100 MB file has a whole-file hash %x", in.ContentHash)
	}
	// Appending a line to it stores about one chunk more, as one version.
	sh(t, mnt, "echo tail >> big")
	if n := writeEvents(t, st, sessionOf(t, m), fi.Ino); n != 2 {
		t.Errorf("append made %d versions in all, want 2", n)
	}
}

// All handles of an inode share its buffer; stat shows the buffer.
func TestDirtyShared(t *testing.T) {
	mnt, st, m := mountTest(t)
	p := filepath.Join(mnt, "f")
	w, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w.Write([]byte("not yet committed"))
	buf := make([]byte, 100)
	n, _ := r.ReadAt(buf, 0)
	if string(buf[:n]) != "not yet committed" {
		t.Errorf("second handle reads %q", buf[:n])
	}
	var st1 syscall.Stat_t
	syscall.Stat(p, &st1)
	if st1.Size != 17 {
		t.Errorf("stat of a dirty file: size %d", st1.Size)
	}
	// Nothing committed yet but the create.
	if n := writeEvents(t, st, sessionOf(t, m), st1.Ino); n != 0 {
		t.Errorf("%d write versions before close", n)
	}
	// The ticker commits a file held open once it is quiet (polled until
	// it has; a ticker that never fires is for go test -timeout to report).
	for writeEvents(t, st, sessionOf(t, m), st1.Ino) == 0 {
		time.Sleep(100 * time.Millisecond)
	}
	// fsync commits too.
	w.Write([]byte(" more"))
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := writeEvents(t, st, sessionOf(t, m), st1.Ino); n != 2 {
		t.Errorf("after fsync: %d write versions, want 2", n)
	}
}

// Random writes, truncates and reads against a reference file, across the
// RAM/spill boundary and commits.
func TestDirtyRandom(t *testing.T) {
	mnt, _, m := mountTest(t)
	rng := rand.New(rand.NewSource(1))
	ref := filepath.Join(t.TempDir(), "ref")
	for round := 0; round < 3; round++ {
		f, err := os.OpenFile(filepath.Join(mnt, "r"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		g, err := os.OpenFile(ref, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for op := 0; op < 300; op++ {
			switch k := rng.Intn(10); {
			case k < 6:
				off := rng.Int63n(12 << 20)
				data := make([]byte, rng.Intn(200<<10)+1)
				rng.Read(data)
				if rng.Intn(3) == 0 {
					clear(data) // zeros, to make holes of chunks
				}
				f.WriteAt(data, off)
				g.WriteAt(data, off)
			case k < 7:
				sz := rng.Int63n(12 << 20)
				f.Truncate(sz)
				g.Truncate(sz)
			case k < 8:
				if op%50 == 0 {
					if err := m.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			default:
				off := rng.Int63n(12 << 20)
				a, b := make([]byte, 300<<10), make([]byte, 300<<10)
				na, _ := f.ReadAt(a, off)
				nb, _ := g.ReadAt(b, off)
				if na != nb || !bytes.Equal(a[:na], b[:nb]) {
					t.Fatalf("round %d op %d: read at %d: %d bytes vs %d, equal %v", round, op, off, na, nb, bytes.Equal(a[:min(na, nb)], b[:min(na, nb)]))
				}
			}
		}
		f.Close()
		g.Close()
		got, _ := os.ReadFile(filepath.Join(mnt, "r"))
		want, _ := os.ReadFile(ref)
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: content differs after close (%d vs %d bytes)", round, len(got), len(want))
		}
	}
	if b := m.memBytes.Load(); b != 0 {
		t.Errorf("%d bytes of buffer pages still accounted after every file was closed", b)
	}
}

// O_TRUNC plus writes is one version; an O_TRUNC open of an empty file
// commits nothing.
func TestTruncOpenOneVersion(t *testing.T) {
	mnt, st, m := mountTest(t)
	p := filepath.Join(mnt, "f")
	os.WriteFile(p, []byte("first"), 0o644)
	os.WriteFile(p, []byte("second"), 0o644)
	var s syscall.Stat_t
	syscall.Stat(p, &s)
	if n := writeEvents(t, st, sessionOf(t, m), s.Ino); n != 2 {
		t.Errorf("two WriteFile: %d write versions, want 2", n)
	}
	if got, _ := os.ReadFile(p); string(got) != "second" {
		t.Errorf("content %q", got)
	}
	before := eventCount(t, st, sessionOf(t, m))
	os.WriteFile(filepath.Join(mnt, "e"), nil, 0o644)
	os.WriteFile(filepath.Join(mnt, "e"), nil, 0o644)
	if after := eventCount(t, st, sessionOf(t, m)); after != before+1 {
		t.Errorf("creating an empty file and truncating it again: %d commits, want 1", after-before)
	}
}

func eventCount(t *testing.T, st *mvcc.Store, sid mvcc.SessionID) int {
	n := 0
	st.View(func(tx *mvcc.ReadTx) error {
		return tx.Events(sid, 0, func(mvcc.Event) bool { n++; return true })
	})
	return n
}

// Changes made behind the mount's back show after InvalidateSession.
func TestInvalidateSession(t *testing.T) {
	mnt, st, m := mountTest(t)
	p := filepath.Join(mnt, "f")
	os.WriteFile(p, []byte("old content"), 0o644)
	if got, _ := os.ReadFile(p); string(got) != "old content" {
		t.Fatalf("%q", got)
	}
	sid := sessionOf(t, m)
	in, err := st.Walk(sid, "f", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteContent(context.Background(), sid, in.Ino, bytes.NewReader([]byte("NEW CONTENT")), in.Mtime); err != nil {
		t.Fatal(err)
	}
	root, _ := st.Header(sid)
	if _, err := st.Create(sid, root.Root, "g", mvcc.Attr{Mode: 0o644}, ""); err != nil {
		t.Fatal(err)
	}
	m.InvalidateSession(sid)
	poll(t, "the mount to show both changes", func() (bool, string) {
		got, err := os.ReadFile(p)
		_, gerr := os.Stat(filepath.Join(mnt, "g"))
		return string(got) == "NEW CONTENT" && gerr == nil,
			fmt.Sprintf("f reads %q (%v), stat g: %v", got, err, gerr)
	})
}

// An O_TMPFILE file can be written, then named with linkat; its content is
// committed at close like any other.
func TestTmpfileLinkat(t *testing.T) {
	mnt, st, m := mountTest(t)
	fd, err := syscall.Open(mnt, unix.O_TMPFILE|syscall.O_RDWR, 0o640)
	if err != nil {
		t.Fatalf("O_TMPFILE: %v", err)
	}
	if _, err := syscall.Write(fd, []byte("anonymous until linked")); err != nil {
		t.Fatal(err)
	}
	if err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, filepath.Join(mnt, "named"), unix.AT_SYMLINK_FOLLOW); err != nil {
		t.Fatalf("linkat: %v", err)
	}
	if err := syscall.Close(fd); err != nil {
		t.Fatal(err)
	}
	in, err := st.Walk(sessionOf(t, m), "named", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := st.ReadAll(in)
	if string(data) != "anonymous until linked" || in.Nlink != 1 || in.Mode&0o777 != 0o640 {
		t.Errorf("linked tmpfile: %q nlink %d mode %o", data, in.Nlink, in.Mode)
	}
}

// Linux truncates on O_TRUNC whatever the access mode.
func TestTruncReadOnlyOpen(t *testing.T) {
	mnt, _, _ := mountTest(t)
	p := filepath.Join(mnt, "f")
	os.WriteFile(p, []byte("content"), 0o644)
	f, err := os.OpenFile(p, os.O_RDONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got, err := os.ReadFile(p); err != nil || len(got) != 0 {
		t.Errorf("after O_RDONLY|O_TRUNC: %q %v", got, err)
	}
}

// Small writes and truncates (short pages: a page in RAM holds only up to
// its last non-zero byte), in RAM and across the spill, checked against a
// reference file in what each commit stored.
func TestDirtySmallPages(t *testing.T) {
	mnt, st, m := mountTest(t)
	sid := sessionOf(t, m)
	rng := rand.New(rand.NewSource(2))
	ref := filepath.Join(t.TempDir(), "ref")
	stored := func(name string) []byte {
		in, err := st.Walk(sid, name, mvcc.Latest)
		if err != nil {
			t.Fatal(err)
		}
		data, err := st.ReadAll(in)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for round, span := range []int64{256 << 10, 32 << 20} { // RAM only, then spilled
		name := fmt.Sprintf("s%d", round)
		f, err := os.OpenFile(filepath.Join(mnt, name), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() }) // also on failure: unmount needs it
		g, err := os.OpenFile(ref, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		for op := 0; op < 400; op++ {
			switch k := rng.Intn(20); {
			case op%200 == 199: // commits drop the pages: not too often
				if err := m.Flush(); err != nil {
					t.Fatal(err)
				}
				want, _ := os.ReadFile(ref)
				if got := stored(name); !bytes.Equal(got, want) {
					t.Fatalf("round %d op %d: stored content differs (%d vs %d bytes)", round, op, len(got), len(want))
				}
			case k < 19:
				off := rng.Int63n(span)
				data := make([]byte, rng.Intn(6<<10)+1)
				rng.Read(data)
				f.WriteAt(data, off)
				g.WriteAt(data, off)
			default:
				sz := rng.Int63n(span)
				f.Truncate(sz)
				g.Truncate(sz)
			}
		}
		f.Close()
		g.Close()
		want, _ := os.ReadFile(ref)
		if got := stored(name); !bytes.Equal(got, want) {
			t.Fatalf("round %d: stored content differs after close (%d vs %d bytes)", round, len(got), len(want))
		}
	}
}
