package fs

import (
	"bytes"
	"context"
	"log"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// mountPassthrough is mountCounting with passthrough asked for; it skips,
// saying why, where the kernel or the process cannot do it.
func mountPassthrough(t *testing.T, opts Options) (string, *mvcc.Store, *Server, *opCounter) {
	t.Helper()
	c := &opCounter{lookups: map[string]bool{}, counts: map[string]int{}}
	opts.Passthrough, opts.Debug, opts.debugLog = PassthroughAuto, true, log.New(c, "", 0)
	opts.stageSync = true
	mnt, st, m := mountTestOpts(t, opts)
	if on, why := m.Passthrough(); !on {
		t.Skip("FUSE passthrough unavailable:", why)
	}
	return mnt, st, m, c
}

// stored reads the latest committed content of the file at mnt-relative
// name, straight from the store.
func stored(t *testing.T, st *mvcc.Store, m *Server, p string) []byte {
	t.Helper()
	var sb syscall.Stat_t
	if err := syscall.Stat(p, &sb); err != nil {
		t.Fatal(err)
	}
	in, err := st.LatestInode(*m.opts.Session, mvcc.Ino(sb.Ino))
	if err != nil {
		t.Fatalf("store inode of %s: %v", p, err)
	}
	buf := make([]byte, in.Size)
	if n, err := st.ReadAt(in, buf, 0); n != len(buf) {
		t.Fatalf("store read of %s: %d of %d bytes: %v", p, n, len(buf), err)
	}
	return buf
}

// A file written whole goes to its staging file without a FUSE WRITE, is
// in the store once close returns, and reads back without a FUSE READ.
func TestPassthroughWriteReadBack(t *testing.T) {
	mnt, st, m, c := mountPassthrough(t, Options{})
	p := filepath.Join(mnt, "f")
	want := pattern(4<<20, 3)
	before := c.snapshot()["WRITE"]
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	if w := c.snapshot()["WRITE"] - before; w != 0 {
		t.Errorf("writing a fresh file: %d FUSE WRITEs, want 0 (passthrough)", w)
	}
	if got := stored(t, st, m, p); !bytes.Equal(got, want) {
		t.Fatalf("after close the store holds %d bytes, not what was written", len(got))
	}
	got, reads := readCounting(t, c, p)
	if !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes, not what was written", len(got))
	}
	if reads != 0 {
		t.Errorf("reading back a file just written: %d FUSE READs, want 0 (its stage)", reads)
	}
	// Rewritten (O_TRUNC): the idle stage serves the new bytes.
	want2 := pattern(1<<20, 4)
	if err := os.WriteFile(p, want2, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, _ := readCounting(t, c, p); !bytes.Equal(got, want2) {
		t.Fatalf("after a rewrite: read %d bytes, not the new content", len(got))
	}
	if got := stored(t, st, m, p); !bytes.Equal(got, want2) {
		t.Fatal("after a rewrite: the store holds other bytes")
	}
}

// While a passthrough writer is open, stat reports the stage's size, and a
// commit of the still open file (padfs now, the ticker) stores what was
// written: .asof/ shows it.
func TestPassthroughAttrsAndFlushWhileOpen(t *testing.T) {
	mnt, st, m, _ := mountPassthrough(t, Options{manualTicks: true})
	p := filepath.Join(mnt, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := pattern(300<<10, 5)
	if _, err := f.Write(want); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != int64(len(want)) {
		t.Fatalf("stat while open: size %d, want %d", fi.Size(), len(want))
	}
	// The mtime is the staging file's: a later write moves it, and the
	// commit stores what stat showed.
	if _, err := f.WriteAt(want[:10], 0); err != nil {
		t.Fatal(err)
	}
	fi2, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if !fi2.ModTime().After(fi.ModTime()) {
		t.Errorf("stat while open: mtime %v after a write, was %v", fi2.ModTime(), fi.ModTime())
	}
	if err := m.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, st, m, p); !bytes.Equal(got, want) {
		t.Fatalf("after Flush of the open file the store holds %d bytes, want %d", len(got), len(want))
	}
	in, err := st.LatestInode(*m.opts.Session, inoOf(t, p))
	if err != nil {
		t.Fatal(err)
	}
	if in.Mtime != fi2.ModTime().UnixNano() {
		t.Errorf("committed mtime %d, stat showed %d", in.Mtime, fi2.ModTime().UnixNano())
	}
	at := st.LastHLC().String()
	got, err := os.ReadFile(filepath.Join(mnt, ".asof", at, "f"))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf(".asof/%s/f: %d bytes, err %v; want the %d written", at, len(got), err, len(want))
	}
	// More writes, then the ticker's commit (the file quiet for long).
	if _, err := f.WriteAt([]byte("tail"), int64(len(want))); err != nil {
		t.Fatal(err)
	}
	want = append(want, "tail"...)
	fi, _ = os.Stat(p)
	m.tick(fi.ModTime().Add(2 * quietFor))
	if got := stored(t, st, m, p); !bytes.Equal(got, want) {
		t.Fatalf("after the ticker the store holds %d bytes, want %d", len(got), len(want))
	}
}

// The kernel refuses an inode open both cached and passthrough (EIO): a
// writer of a file held open cached stays on the buffered path, and a
// reader of a staged file is passthrough too.
func TestPassthroughMixedOpens(t *testing.T) {
	mnt, st, m, c := mountPassthrough(t, Options{})
	p := filepath.Join(mnt, "f")
	sh(t, mnt, "printf old > f")
	// Drop the idle stage (once the shell's RELEASE, which the kernel
	// sends after close returns, is in): the next opens are cached ones.
	waitReleased(t, m, p)
	m.evictAllStages()
	if m.file(*m.opts.Session, inoOf(t, p)) != nil {
		t.Fatal("idle stage not evicted")
	}
	r, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatalf("open for write while a cached reader holds it: %v", err)
	}
	defer w.Close()
	before := c.snapshot()["WRITE"]
	if _, err := w.WriteString("new bytes"); err != nil {
		t.Fatal(err)
	}
	if c.snapshot()["WRITE"] == before {
		t.Error("the writer of a file open cached went passthrough")
	}
	got := make([]byte, 20)
	n, _ := r.ReadAt(got, 0)
	if string(got[:n]) != "new bytes" {
		t.Errorf("cached reader reads %q, want %q", got[:n], "new bytes")
	}
	w.Close()
	r.Close()

	// A staged writer open: readers join it.
	q := filepath.Join(mnt, "g")
	w, err = os.Create(q)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.WriteString("staged"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		b, reads := readCounting(t, c, q)
		if string(b) != "staged" || reads != 0 {
			t.Fatalf("reader of a staged file: %q with %d FUSE READs, want %q with none", b, reads, "staged")
		}
	}
	w2, err := os.OpenFile(q, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatalf("second writer of a staged file: %v", err)
	}
	if _, err := w2.WriteString("+more"); err != nil {
		t.Fatal(err)
	}
	w2.Close()
	if got := stored(t, st, m, q); string(got) != "staged+more" {
		t.Errorf("store holds %q, want %q", got, "staged+more")
	}
}

// Shared writable mappings go to the stage; a write through the mapping
// after a commit, to a page already dirty, is committed by the next
// close.
func TestPassthroughMmap(t *testing.T) {
	mnt, st, m, _ := mountPassthrough(t, Options{})
	p := filepath.Join(mnt, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	const size = 64 << 10
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	copy(mem[100:], "first")
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := stored(t, st, m, p); string(got[100:105]) != "first" {
		t.Fatalf("after fsync the store holds %q at 100, want %q", got[100:105], "first")
	}
	copy(mem[200:], "second") // same page, still dirty and writable
	if err := unix.Munmap(mem); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got := stored(t, st, m, p)
	if len(got) != size || string(got[100:105]) != "first" || string(got[200:206]) != "second" {
		t.Fatalf("after close the store holds %d bytes, %q at 100, %q at 200", len(got), got[100:105], got[200:206])
	}
}

// Truncates, holes and O_APPEND on a staged file: holes stay metadata,
// SEEK_DATA sees them, a truncate by path acts on the stage.
func TestPassthroughTruncateHolesAppend(t *testing.T) {
	mnt, st, m, _ := mountPassthrough(t, Options{})
	p := filepath.Join(mnt, "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(pattern(128<<10, 6)); err != nil {
		t.Fatal(err)
	}
	const big = 1 << 40
	if err := f.Truncate(big); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 64<<10); err != nil {
		t.Fatal(err)
	}
	if d, err := unix.Seek(int(f.Fd()), 0, unix.SEEK_DATA); err != nil || d != 64<<10 {
		t.Errorf("SEEK_DATA after the punched hole: %d, %v; want %d", d, err, 64<<10)
	}
	if h, err := unix.Seek(int(f.Fd()), 64<<10, unix.SEEK_HOLE); err != nil || h != 128<<10 {
		t.Errorf("SEEK_HOLE after the data: %d, %v; want %d", h, err, 128<<10)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	var sb syscall.Stat_t
	if err := syscall.Stat(p, &sb); err != nil {
		t.Fatal(err)
	}
	in, err := st.LatestInode(*m.opts.Session, mvcc.Ino(sb.Ino))
	if err != nil {
		t.Fatal(err)
	}
	if in.Size != big || sb.Size != big {
		t.Fatalf("size: store %d, stat %d; want %d", in.Size, sb.Size, big)
	}
	if dr := in.DataRanges(big); len(dr) != 1 || dr[0].Off != 64<<10 || dr[0].Len != 64<<10 {
		t.Fatalf("stored data ranges %v, want the one 64 KiB run at 64 KiB", dr)
	}
	// Truncate by path, then appends through the idle stage.
	if err := os.Truncate(p, 10); err != nil {
		t.Fatal(err)
	}
	sh(t, mnt, "printf abc >> f && printf def >> f")
	want := append(make([]byte, 10), "abcdef"...)
	got, err := os.ReadFile(p)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after truncate and appends: %q, %v; want %q", got, err, want)
	}
	if got := stored(t, st, m, p); !bytes.Equal(got, want) {
		t.Fatalf("store holds %q, want %q", got, want)
	}
}

// A version from elsewhere (a restore, session.Wrap) replaces an idle
// stage: the next read shows it.
func TestPassthroughOutsideVersion(t *testing.T) {
	mnt, st, m, _ := mountPassthrough(t, Options{})
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, []byte("through the mount"), 0o644); err != nil {
		t.Fatal(err)
	}
	var sb syscall.Stat_t
	if err := syscall.Stat(p, &sb); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteContent(context.Background(), *m.opts.Session, mvcc.Ino(sb.Ino), strings.NewReader("from elsewhere"), time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	m.InvalidateSessionWait(*m.opts.Session)
	if got, err := os.ReadFile(p); err != nil || string(got) != "from elsewhere" {
		t.Fatalf("after an outside version: %q, %v; want %q", got, err, "from elsewhere")
	}
}

// With passthrough off, or where it is unavailable, writes go through
// padfs as before; --passthrough=on refuses to mount without it.
func TestPassthroughOff(t *testing.T) {
	c := &opCounter{lookups: map[string]bool{}, counts: map[string]int{}}
	mnt, st, m := mountTestOpts(t, Options{Passthrough: PassthroughOff, Debug: true, debugLog: log.New(c, "", 0)})
	if on, _ := m.Passthrough(); on {
		t.Fatal("passthrough on with PassthroughOff")
	}
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, pattern(1<<20, 7), 0o644); err != nil {
		t.Fatal(err)
	}
	if c.snapshot()["WRITE"] == 0 {
		t.Error("no FUSE WRITE with passthrough off")
	}
	if got := stored(t, st, m, p); !bytes.Equal(got, pattern(1<<20, 7)) {
		t.Fatal("store holds other bytes")
	}

}

// --passthrough=on mounts where auto finds passthrough, and fails,
// naming why and leaving nothing mounted, where it does not.
func TestPassthroughOn(t *testing.T) {
	_, _, probe := mountTestOpts(t, Options{Passthrough: PassthroughAuto})
	on, why := probe.Passthrough()
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := st.CreateSession("on", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := Mount(st, mnt, Options{Session: &h.ID, SpillDir: filepath.Join(data, "spill"), Passthrough: PassthroughOn})
	if err == nil {
		defer m.Unmount()
	}
	switch {
	case on && err != nil:
		t.Fatalf("PassthroughOn: %v, where auto found passthrough", err)
	case !on && err == nil:
		t.Fatalf("PassthroughOn mounted without passthrough (auto: %s)", why)
	case !on:
		if !strings.Contains(err.Error(), "passthrough") {
			t.Errorf("error %q does not say passthrough", err)
		}
		if mounted(mnt) {
			t.Errorf("%s left mounted after the failed mount", mnt)
			lazyUnmount(mnt)
		}
		t.Logf("unavailable here (%s): %v", why, err)
	}
}

// mounted reports whether dir is a mountpoint (in /proc/mounts).
func mounted(dir string) bool {
	b, _ := os.ReadFile("/proc/mounts")
	return strings.Contains(string(b), " "+dir+" ")
}

func inoOf(t *testing.T, p string) mvcc.Ino {
	t.Helper()
	var sb syscall.Stat_t
	if err := syscall.Stat(p, &sb); err != nil {
		t.Fatal(err)
	}
	return mvcc.Ino(sb.Ino)
}

// waitReleased waits until no handle holds the file at p (the kernel
// sends RELEASE after close(2) has returned).
func waitReleased(t *testing.T, m *Server, p string) {
	t.Helper()
	ino := inoOf(t, p)
	deadline := time.Now().Add(hangGuard)
	for {
		opens := 0
		if f := m.file(*m.opts.Session, ino); f != nil {
			m.filesMu.Lock()
			opens = f.opens
			m.filesMu.Unlock()
			f.mu.RLock()
			opens += f.ptOpens // counted down after go-fuse's RELEASE
			f.mu.RUnlock()
		}
		if opens == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still held by %d handles", p, opens)
		}
		time.Sleep(time.Millisecond)
	}
}

// evictAllStages drops every idle stage (a budget of one byte).
func (m *Server) evictAllStages() {
	m.opts.StageBudget = 1
	m.tickStages()
	m.opts.StageBudget = 0
}

// A hole punched inside one 64 KiB buffer page keeps the page's other
// unsaved bytes (found by fsx -c 4: the page was dropped whole, so bytes
// written since the last commit beyond the hole read as the old version).
// Run with passthrough off and on (after a stage is given up, the file is
// buffered).
func TestPunchHoleInsideOneBufferedPage(t *testing.T) {
	for _, pt := range []PassthroughMode{PassthroughOff, PassthroughAuto} {
		mnt, st, m := mountTestOpts(t, Options{Passthrough: pt})
		p := filepath.Join(mnt, "f")
		f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644) // no O_TRUNC: buffered
		if err != nil {
			t.Fatal(err)
		}
		want := pattern(64<<10, 9)
		if _, err := f.WriteAt(want, 0); err != nil {
			t.Fatal(err)
		}
		if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 1180, 9511); err != nil {
			t.Fatal(err)
		}
		clear(want[1180 : 1180+9511])
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if got := stored(t, st, m, p); !bytes.Equal(got, want) {
			i := 0
			for i < len(got) && i < len(want) && got[i] == want[i] {
				i++
			}
			t.Fatalf("passthrough %v: the store holds %d bytes, first difference at %d", pt, len(got), i)
		}
	}
}

// Where the kernel refuses the stage directory's files as backing files
// (here: a stage directory on another passthrough FUSE mount, which the
// kernel's stacking limit refuses), auto falls back with one log line and
// serves writes through padfs.
func TestPassthroughFallback(t *testing.T) {
	outer, _, _, _ := mountPassthrough(t, Options{})
	var logs bytes.Buffer
	c := &opCounter{lookups: map[string]bool{}, counts: map[string]int{}}
	mnt, st, m := mountTestOpts(t, Options{Passthrough: PassthroughAuto, StageDir: filepath.Join(outer, "stage"),
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Debug: true, debugLog: log.New(c, "", 0)})
	on, why := m.Passthrough()
	if on {
		t.Fatal("passthrough on with the stage directory on a passthrough FUSE mount")
	}
	if n := strings.Count(logs.String(), "passthrough unavailable"); n != 1 {
		t.Errorf("%d log lines about passthrough, want 1:\n%s", n, logs.String())
	}
	t.Logf("fell back: %s", why)
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, pattern(1<<20, 8), 0o644); err != nil {
		t.Fatal(err)
	}
	if c.snapshot()["WRITE"] == 0 {
		t.Error("no FUSE WRITE after the fallback")
	}
	if got := stored(t, st, m, p); !bytes.Equal(got, pattern(1<<20, 8)) {
		t.Fatal("store holds other bytes")
	}
	if ents, _ := os.ReadDir(filepath.Join(outer, "stage")); len(ents) != 0 {
		t.Errorf("the failed probe left %d entries in the stage directory", len(ents))
	}
}

// On a file system with little room (here a 16 MiB tmpfs) no stage
// starts: staging doubles the disk a file takes, and must not be what
// fills it.
func TestPassthroughNoRoom(t *testing.T) {
	small := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() {
		if err := exec.Command("umount", small).Run(); err != nil {
			t.Errorf("unmount tmpfs %s: %v", small, err)
		}
	})
	mnt, st, m, c := mountPassthrough(t, Options{StageDir: small})
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, pattern(1<<20, 10), 0o644); err != nil {
		t.Fatal(err)
	}
	if c.snapshot()["WRITE"] == 0 {
		t.Error("a stage started on a file system with 16 MiB")
	}
	if got := stored(t, st, m, p); !bytes.Equal(got, pattern(1<<20, 10)) {
		t.Fatal("store holds other bytes")
	}
}
