package fs

import (
	"bytes"
	"context"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// mountCounting is mountTest with go-fuse's trace counted by opcode.
func mountCounting(t *testing.T) (string, *mvcc.Store, *Server, *opCounter) {
	t.Helper()
	c := &opCounter{lookups: map[string]bool{}, counts: map[string]int{}}
	mnt, st, m := mountTestOpts(t, Options{Debug: true, debugLog: log.New(c, "", 0)})
	return mnt, st, m, c
}

// readCounting reads p whole and returns its bytes and the FUSE READs it
// caused.
func readCounting(t *testing.T, c *opCounter, p string) ([]byte, int) {
	t.Helper()
	before := c.snapshot()["READ"]
	got, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return got, c.snapshot()["READ"] - before
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7+i/4096)
	}
	return b
}

// Pages written through the mount stay in the kernel's page cache: reading
// the file back after close (a new version) costs no FUSE READ.
func TestPageCacheKeptAfterWrite(t *testing.T) {
	mnt, _, _, c := mountCounting(t)
	p := filepath.Join(mnt, "f")
	want := pattern(4<<20, 1)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	got, reads := readCounting(t, c, p)
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, not what was written", len(got))
	}
	if reads != 0 {
		t.Errorf("reading back a file just written: %d FUSE READs, want 0 (pages kept)", reads)
	}
	// Rewritten in place through the mount: still cached, new bytes.
	want2 := pattern(4<<20, 2)
	if err := os.WriteFile(p, want2, 0o644); err != nil {
		t.Fatal(err)
	}
	got, reads = readCounting(t, c, p)
	if !bytes.Equal(got, want2) {
		t.Fatal("after a rewrite: stale bytes")
	}
	if reads != 0 {
		t.Errorf("reading back a rewritten file: %d FUSE READs, want 0", reads)
	}
	// A second read of the same version: cached too.
	if _, reads = readCounting(t, c, p); reads != 0 {
		t.Errorf("second read: %d FUSE READs, want 0", reads)
	}
}

// Truncates and appends through the mount keep what the kernel caches
// right.
func TestPageCacheTruncateAppend(t *testing.T) {
	mnt, _, _, _ := mountCounting(t)
	p := filepath.Join(mnt, "f")
	want := pattern(1<<20+123, 3)
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	os.ReadFile(p)
	if err := os.Truncate(p, 5000); err != nil {
		t.Fatal(err)
	}
	want = want[:5000]
	if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
		t.Fatalf("after truncate to 5000: %d bytes, wrong", len(got))
	}
	// Grown back by truncate: zeros, not the old bytes.
	if err := os.Truncate(p, 9000); err != nil {
		t.Fatal(err)
	}
	want = append(want, make([]byte, 4000)...)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
		t.Fatal("after truncate up to 9000: wrong bytes")
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	tail := pattern(70000, 4)
	f.Write(tail)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	want = append(want, tail...)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, want) {
		t.Fatal("after append: wrong bytes")
	}
	// O_TRUNC then a short write.
	if err := os.WriteFile(p, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); string(got) != "short" {
		t.Fatalf("after O_TRUNC rewrite: %q", got)
	}
}

// A change made outside FUSE shows at the next open after
// InvalidateSessionWait, though the kernel held the old pages.
func TestPageCacheChangedOutsideFUSE(t *testing.T) {
	mnt, st, m, _ := mountCounting(t)
	p := filepath.Join(mnt, "f")
	old := pattern(1<<20, 5)
	if err := os.WriteFile(p, old, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, old) {
		t.Fatal("read back: wrong bytes")
	}
	sid := sessionOf(t, m)
	in, err := st.Walk(sid, "f", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	// Same size and mtime: only the content tells the versions apart.
	now := pattern(1<<20, 6)
	if _, err := st.WriteContent(context.Background(), sid, in.Ino, bytes.NewReader(now), in.Mtime); err != nil {
		t.Fatal(err)
	}
	m.InvalidateSessionWait(sid)
	if got, _ := os.ReadFile(p); !bytes.Equal(got, now) {
		t.Fatal("after a write outside FUSE and InvalidateSessionWait: stale bytes")
	}
	// A descriptor open across the change sees it too.
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	third := pattern(1<<20, 7)
	if _, err := st.WriteContent(context.Background(), sid, in.Ino, bytes.NewReader(third), in.Mtime); err != nil {
		t.Fatal(err)
	}
	m.InvalidateSessionWait(sid)
	buf := make([]byte, len(third))
	if _, err := f.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, third) {
		t.Fatal("open descriptor after InvalidateSessionWait: stale bytes")
	}
}

// Writes through a shared mapping reach the store and read back right.
func TestPageCacheMmap(t *testing.T) {
	mnt, st, m, _ := mountCounting(t)
	p := filepath.Join(mnt, "f")
	base := pattern(64<<10, 8)
	if err := os.WriteFile(p, base, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, len(base), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	copy(mem[100:], "written through mmap")
	copy(base[100:], "written through mmap")
	if err := syscall.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, base) {
		t.Fatal("after an mmap write: wrong bytes")
	}
	in, err := st.Walk(sessionOf(t, m), "f", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	stored := make([]byte, len(base))
	if n, err := st.ReadAt(in, stored, 0); n != len(base) || !bytes.Equal(stored, base) {
		t.Fatalf("store after an mmap write: %d bytes (%v), wrong", n, err)
	}
}

// A second mount of the same session sees what the first one wrote at its
// next open, though it holds pages of the old version.
func TestPageCacheSecondMount(t *testing.T) {
	mntA, st, m, _ := mountCounting(t)
	sid := sessionOf(t, m)
	mntB := filepath.Join(t.TempDir(), "b")
	mountAt(t, st, mntB, Options{Session: &sid, SpillDir: t.TempDir()})
	old := pattern(1<<20, 9)
	if err := os.WriteFile(filepath.Join(mntA, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(mntB, "f")); !bytes.Equal(got, old) {
		t.Fatal("second mount: wrong bytes")
	}
	// Same size: only the content differs.
	now := pattern(1<<20, 10)
	if err := os.WriteFile(filepath.Join(mntA, "f"), now, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(mntB, "f")); !bytes.Equal(got, now) {
		t.Fatal("second mount after a write through the first: stale bytes")
	}
}

// A truncate by path through a mount whose pages are of an older version
// (the file changed through another mount) must not vouch for those pages
// (the kernel drops them at its own truncate; this keeps it so).
func TestPageCacheTruncateStalePages(t *testing.T) {
	mntA, st, m, _ := mountCounting(t)
	sid := sessionOf(t, m)
	mntB := filepath.Join(t.TempDir(), "b")
	mountAt(t, st, mntB, Options{Session: &sid, SpillDir: t.TempDir()})
	old := pattern(1<<20, 11)
	if err := os.WriteFile(filepath.Join(mntA, "f"), old, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(mntB, "f")); !bytes.Equal(got, old) {
		t.Fatal("second mount: wrong bytes")
	}
	now := pattern(1<<20, 12)
	if err := os.WriteFile(filepath.Join(mntA, "f"), now, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(mntB, "f"), 300000); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(mntB, "f")); !bytes.Equal(got, now[:300000]) {
		t.Fatal("truncated through the second mount: stale bytes of the old version")
	}
}

// listCounting lists dir and returns its names and the FUSE READDIR(PLUS)
// requests it caused.
func listCounting(t *testing.T, c *opCounter, dir string) ([]string, int) {
	t.Helper()
	s := c.snapshot()
	before := s["READDIR"] + s["READDIRPLUS"]
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	s = c.snapshot()
	return names, s["READDIR"] + s["READDIRPLUS"] - before
}

// A live directory's listing is cached by the kernel while the directory
// is unchanged, and never shown stale: changes through the mount, through
// another mount of the session and outside FUSE (with
// InvalidateSessionWait) show at the next listing.
func TestDirCache(t *testing.T) {
	mnt, st, m, c := mountCounting(t)
	sid := sessionOf(t, m)
	d := filepath.Join(mnt, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if err := os.WriteFile(filepath.Join(d, n), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want := func(got []string, ws ...string) {
		t.Helper()
		if !slices.Equal(got, ws) {
			t.Fatalf("listing %v, want %v", got, ws)
		}
	}
	got, _ := listCounting(t, c, d)
	want(got, "a", "b")
	got, reqs := listCounting(t, c, d)
	want(got, "a", "b")
	if reqs != 0 {
		t.Errorf("second listing of an unchanged directory: %d READDIRs, want 0 (cached)", reqs)
	}
	// Through this mount.
	if err := os.WriteFile(filepath.Join(d, "c"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ = listCounting(t, c, d)
	want(got, "a", "b", "c")
	if err := os.Remove(filepath.Join(d, "a")); err != nil {
		t.Fatal(err)
	}
	got, _ = listCounting(t, c, d)
	want(got, "b", "c")
	// Through a second mount of the session.
	mntB := filepath.Join(t.TempDir(), "b")
	mountAt(t, st, mntB, Options{Session: &sid, SpillDir: t.TempDir()})
	if err := os.WriteFile(filepath.Join(mntB, "d", "e"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	got, _ = listCounting(t, c, d)
	want(got, "b", "c", "e")
	// Outside FUSE, announced.
	din, err := st.Walk(sid, "d", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(sid, din.Ino, "f", mvcc.Attr{Mode: 0o644}, ""); err != nil {
		t.Fatal(err)
	}
	m.InvalidateSessionWait(sid)
	got, _ = listCounting(t, c, d)
	want(got, "b", "c", "e", "f")
	// rm -r empties it (listing while unlinking, then rewinding).
	if out, err := shErr(mnt, "rm -r d && ls -a"); err != nil || strings.Contains(out, "d\n") {
		t.Fatalf("rm -r d: %v: %s", err, out)
	}
}

// Symlink targets are cached by the kernel (a symlink's target never
// changes; a new target is a new inode).
func TestSymlinkCache(t *testing.T) {
	mnt, _, _, c := mountCounting(t)
	l := filepath.Join(mnt, "l")
	if err := os.Symlink("target-one", l); err != nil {
		t.Fatal(err)
	}
	readlink := func(want string) int {
		t.Helper()
		before := c.snapshot()["READLINK"]
		got, err := os.Readlink(l)
		if err != nil || got != want {
			t.Fatalf("readlink %s: %q, %v; want %q", l, got, err, want)
		}
		return c.snapshot()["READLINK"] - before
	}
	readlink("target-one")
	if n := readlink("target-one"); n != 0 {
		t.Errorf("second readlink: %d READLINKs, want 0 (cached)", n)
	}
	if err := os.Remove(l); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("target-two", l); err != nil {
		t.Fatal(err)
	}
	readlink("target-two")
}

// writeChunks writes b to a new file p in writes of n bytes.
func writeChunks(t *testing.T, p string, b []byte, n int) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off < len(b); off += n {
		if _, err := f.Write(b[off:min(off+n, len(b))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// Pages filled by writes not aligned to pages (tar's 10 KiB records, a
// small file's only page) read back from the kernel's cache too: the
// kernel marks such a page up to date only when padfs hands it over at
// the last release (pagefill.go); before, each cost a FUSE READ.
func TestPageCacheUnalignedWrites(t *testing.T) {
	mnt, st, m, c := mountCounting(t)
	sid := sessionOf(t, m)
	cases := []struct {
		name        string
		size, chunk int
	}{
		{"small", 14, 14},
		{"tar", 100000, 10240},
		{"odd", 3*4096 + 1, 1000},
		{"bytes", 5000, 1},
	}
	for i, tc := range cases {
		p := filepath.Join(mnt, tc.name)
		want := pattern(tc.size, byte(20+i))
		writeChunks(t, p, want, tc.chunk)
		waitReleased(t, m, p)
		got, reads := readCounting(t, c, p)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: read back %d bytes, not what was written", tc.name, len(got))
		}
		if reads != 0 {
			t.Errorf("%s: reading back %d bytes written in %d-byte writes: %d FUSE READs, want 0", tc.name, tc.size, tc.chunk, reads)
		}
		in, err := st.Walk(sid, tc.name, mvcc.Latest)
		if err != nil {
			t.Fatal(err)
		}
		stored := make([]byte, tc.size)
		if n, _ := st.ReadAt(in, stored, 0); n != tc.size || !bytes.Equal(stored, want) {
			t.Fatalf("%s: the store holds other bytes", tc.name)
		}
	}
}

// The pages handed over never hold bytes other than the file's: writes
// through two descriptors, overwrites, truncates and O_TRUNC between the
// writes, a second mount's write, a change outside FUSE.
func TestPageCacheUnalignedWritesStay(t *testing.T) {
	mnt, st, m, _ := mountCounting(t)
	sid := sessionOf(t, m)
	p := filepath.Join(mnt, "f")
	check := func(what string, want []byte) {
		t.Helper()
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: read %d bytes (%v), want %d: wrong", what, len(got), err, len(want))
		}
	}
	// Two descriptors, the second overwriting part of the first's pages
	// and closing last.
	a, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	want := pattern(10000, 1)
	a.WriteAt(want[:3000], 0)
	b, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	a.WriteAt(want[3000:], 3000)
	copy(want[100:], "overwritten by b")
	b.WriteAt([]byte("overwritten by b"), 100)
	a.Close()
	b.Close()
	check("two descriptors", want)
	// Truncated down and written again past the old end, in pieces.
	a, _ = os.OpenFile(p, os.O_RDWR, 0)
	a.WriteAt([]byte("head"), 0)
	copy(want, "head")
	if err := a.Truncate(5000); err != nil {
		t.Fatal(err)
	}
	want = want[:5000]
	tail := pattern(3000, 2)
	a.WriteAt(tail, 6000)
	want = append(append(want, make([]byte, 1000)...), tail...)
	a.Close()
	check("truncate and write past the end", want)
	// O_TRUNC through a second descriptor while the first is open.
	a, _ = os.OpenFile(p, os.O_RDWR, 0)
	a.WriteAt([]byte("first"), 9000)
	b, _ = os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	b.Write([]byte("after O_TRUNC"))
	b.Close()
	a.Close()
	check("O_TRUNC between", []byte("after O_TRUNC"))
	// A second mount rewrites it (same size) after this one wrote it.
	mntB := filepath.Join(t.TempDir(), "b")
	mountAt(t, st, mntB, Options{Session: &sid, SpillDir: t.TempDir()})
	writeChunks(t, p, pattern(7000, 3), 1000)
	// This mount's buffer of f lives until its RELEASE, which the
	// kernel sends after close(2): until then a commit of another
	// mount is not seen here.
	waitReleased(t, m, p)
	now := pattern(7000, 4)
	writeChunks(t, filepath.Join(mntB, "f"), now, 1500)
	check("after a second mount's write", now)
	// Outside FUSE, announced.
	writeChunks(t, p, pattern(7000, 5), 700)
	in, err := st.Walk(sid, "f", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	third := pattern(7000, 6)
	if _, err := st.WriteContent(context.Background(), sid, in.Ino, bytes.NewReader(third), in.Mtime); err != nil {
		t.Fatal(err)
	}
	m.InvalidateSessionWait(sid)
	check("after a write outside FUSE", third)
}
