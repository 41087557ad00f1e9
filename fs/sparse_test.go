package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// Sparse files: extending a file (truncate, ftruncate, fallocate, a write
// far beyond the end) stores holes as metadata, not zeros. Commands run
// under `timeout 60` only as a hang guard: before holes, truncate -s
// 999999999999999 never returned.

// sparseMount mounts a fresh store and returns the mount, the store's data
// directory and a remount function (unmount, mount again on the same store).
func sparseMount(t *testing.T) (mnt, data string, st *mvcc.Store, remount func()) {
	t.Helper()
	data = t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("sparse", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	mnt = filepath.Join(t.TempDir(), "mnt")
	opts := Options{Session: &h.ID, SpillDir: filepath.Join(data, "spill")}
	m := mountAt(t, st, mnt, opts)
	remount = func() {
		t.Helper()
		if err := m.Unmount(); err != nil {
			t.Fatal(err)
		}
		m = mountAt(t, st, mnt, opts)
	}
	return mnt, data, st, remount
}

func statT(t *testing.T, p string) syscall.Stat_t {
	t.Helper()
	var fi syscall.Stat_t
	if err := syscall.Stat(p, &fi); err != nil {
		t.Fatal(err)
	}
	return fi
}

// readAtT reads n bytes of p at off.
func readAtT(t *testing.T, p string, off int64, n int) []byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	c, err := f.ReadAt(buf, off)
	if c != n {
		t.Fatalf("read %s at %d: %d bytes, %v", p, off, c, err)
	}
	return buf
}

// storeBytes is the disk usage of a store's data directory (du -sb).
func storeBytes(t *testing.T, data string) int64 {
	t.Helper()
	out := sh(t, data, "du -sb . | cut -f1")
	n, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
	if err != nil {
		t.Fatal(out, err)
	}
	return n
}

// checkStoredSmall fails if the store of data holds anything like the
// zeros of a huge file: the store of a handful of small files stays far
// below 64 MiB.
func checkStoredSmall(t *testing.T, data string) {
	t.Helper()
	if n := storeBytes(t, data); n > 64<<20 {
		t.Errorf("the store takes %d bytes on disk: it stored zeros", n)
	}
}

// checkZeros reads at a few offsets inside [0, size) of p and wants zeros.
func checkZeros(t *testing.T, p string, size int64, offs ...int64) {
	t.Helper()
	for _, off := range offs {
		n := int(min(4096, size-off))
		if got := readAtT(t, p, off, n); !bytes.Equal(got, make([]byte, n)) {
			t.Errorf("%s at %d: not zeros", p, off)
		}
	}
}

// pjdfstest truncate/12.t and ftruncate/12.t: a 999999999999999-byte
// file either is made or is refused with EFBIG; padfs makes it, at once,
// storing nothing.
func TestSparseTruncateHuge(t *testing.T) {
	mnt, data, st, remount := sparseMount(t)
	const size = 999999999999999
	p := filepath.Join(mnt, "f")
	sh(t, mnt, "touch f && timeout 60 truncate -s 999999999999999 f")
	fi := statT(t, p)
	if fi.Size != size {
		t.Fatalf("size %d, want %d", fi.Size, int64(size))
	}
	if fi.Blocks != 0 {
		t.Errorf("st_blocks %d of a hole, want 0", fi.Blocks)
	}
	checkZeros(t, p, size, 0, 1<<40, size/2, size-4096)
	// A byte at the end, through a descriptor (the dirty buffer).
	sh(t, mnt, "printf x | timeout 60 dd of=f bs=1 seek=999999999999999 conv=notrunc status=none")
	if fi := statT(t, p); fi.Size != size+1 {
		t.Fatalf("after a write at the end: size %d, want %d", fi.Size, int64(size+1))
	}
	if got := readAtT(t, p, size-3, 4); !bytes.Equal(got, []byte("\x00\x00\x00x")) {
		t.Errorf("the last bytes read %q", got)
	}
	// ftruncate (pjdfstest ftruncate/12.t) of an open file.
	f, err := os.OpenFile(filepath.Join(mnt, "g"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatalf("ftruncate: %v", err)
	}
	if _, err := f.WriteAt([]byte("y"), 1<<40); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	checkStoredSmall(t, data)
	in, err := st.Walk(sessionOfStore(t, st), "f", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if in.Size != size+1 || in.Blocks() > 512 {
		t.Errorf("stored inode: size %d, %d blocks", in.Size, in.Blocks())
	}
	if in.ContentHash != nil {
		t.Errorf("a sparse petabyte has a whole-file hash %x", in.ContentHash)
	}
	remount()
	if fi := statT(t, p); fi.Size != size+1 {
		t.Fatalf("after remount: size %d", fi.Size)
	}
	if got := readAtT(t, p, size-3, 4); !bytes.Equal(got, []byte("\x00\x00\x00x")) {
		t.Errorf("after remount the last bytes read %q", got)
	}
	g := filepath.Join(mnt, "g")
	if fi := statT(t, g); fi.Size != size {
		t.Errorf("after remount: ftruncated size %d", fi.Size)
	}
	if got := readAtT(t, g, 1<<40-1, 3); !bytes.Equal(got, []byte("\x00y\x00")) {
		t.Errorf("after remount g reads %q around 1 TiB", got)
	}
	checkZeros(t, g, size, 0, 1<<39, size-4096)
}

// sessionOfStore returns the one session of a test store.
func sessionOfStore(t *testing.T, st *mvcc.Store) mvcc.SessionID {
	t.Helper()
	hs, err := st.Sessions()
	if err != nil || len(hs) != 1 {
		t.Fatalf("sessions: %v %v", hs, err)
	}
	return hs[0].ID
}

// truncate -s 10G and fallocate -l 10G: holes, whatever the tool.
func TestSparseTruncateFallocate10G(t *testing.T) {
	mnt, data, _, remount := sparseMount(t)
	const size = 10 << 30
	sh(t, mnt, "timeout 60 truncate -s 10G t && timeout 60 fallocate -l 10G a && echo data > d && timeout 60 truncate -s 10G d")
	for _, name := range []string{"t", "a", "d"} {
		p := filepath.Join(mnt, name)
		fi := statT(t, p)
		if fi.Size != size || fi.Blocks > 8 {
			t.Errorf("%s: size %d, %d blocks", name, fi.Size, fi.Blocks)
		}
		checkZeros(t, p, size, 1<<20, size-4096)
	}
	if got := readAtT(t, filepath.Join(mnt, "d"), 0, 6); string(got) != "data\n\x00" {
		t.Errorf("d begins %q", got)
	}
	checkStoredSmall(t, data)
	remount()
	for _, name := range []string{"t", "a", "d"} {
		if fi := statT(t, filepath.Join(mnt, name)); fi.Size != size {
			t.Errorf("after remount %s: size %d", name, fi.Size)
		}
	}
	// du counts stored data, not the apparent size.
	if out := sh(t, mnt, "du -k t a | cut -f1 | tr '\\n' ' '"); out != "0 0 " {
		t.Errorf("du -k of two 10 GiB holes: %q", out)
	}
}

// dd seek=1T writes one byte a terabyte in: one page buffered, a hole
// stored.
func TestSparseDdSeek(t *testing.T) {
	mnt, data, _, _ := sparseMount(t)
	sh(t, mnt, "timeout 60 dd if=/dev/zero of=f bs=1 count=1 seek=1T status=none && printf z | timeout 60 dd of=f bs=1 seek=1T conv=notrunc status=none")
	p := filepath.Join(mnt, "f")
	fi := statT(t, p)
	if fi.Size != 1<<40+1 || fi.Blocks > 8 {
		t.Errorf("size %d, %d blocks", fi.Size, fi.Blocks)
	}
	if got := readAtT(t, p, 1<<40-1, 2); !bytes.Equal(got, []byte("\x00z")) {
		t.Errorf("at 1 TiB: %q", got)
	}
	checkStoredSmall(t, data)
}

// Beyond mvcc.MaxFileSize: EFBIG from truncate, ftruncate, fallocate and
// a write.
func TestSparseTooBig(t *testing.T) {
	mnt, _, _, _ := sparseMount(t)
	p := filepath.Join(mnt, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Truncate(p, mvcc.MaxFileSize+1); err != syscall.EFBIG {
		t.Errorf("truncate beyond the maximum: %v, want EFBIG", err)
	}
	if err := syscall.Truncate(p, mvcc.MaxFileSize); err != nil {
		t.Errorf("truncate to the maximum: %v", err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Ftruncate(int(f.Fd()), mvcc.MaxFileSize+1); err != syscall.EFBIG {
		t.Errorf("ftruncate beyond the maximum: %v, want EFBIG", err)
	}
	// A write across the maximum is short (POSIX; the kernel may cut it
	// itself), one at the maximum fails.
	if n, err := syscall.Pwrite(int(f.Fd()), []byte("ab"), mvcc.MaxFileSize-1); n > 1 || (err != nil && err != syscall.EFBIG) {
		t.Errorf("write across the maximum: %d bytes, %v", n, err)
	}
	if _, err := syscall.Pwrite(int(f.Fd()), []byte("a"), mvcc.MaxFileSize); err != syscall.EFBIG {
		t.Errorf("write at the maximum: %v, want EFBIG", err)
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, mvcc.MaxFileSize, 1); err != syscall.EFBIG {
		t.Errorf("fallocate beyond the maximum: %v, want EFBIG", err)
	}
	if fi := statT(t, p); fi.Size != mvcc.MaxFileSize {
		t.Errorf("size %d after refused growth, want %d", fi.Size, int64(mvcc.MaxFileSize))
	}
}

// lseek SEEK_DATA/SEEK_HOLE find the data of a sparse file from its
// extents (committed) and from its buffered pages (dirty).
func TestSparseSeekDataHole(t *testing.T) {
	mnt, _, _, _ := sparseMount(t)
	const size, at = 10 << 30, 5 << 30
	p := filepath.Join(mnt, "f")
	sh(t, mnt, "timeout 60 truncate -s 10G f && printf x | timeout 60 dd of=f bs=1 seek=5G conv=notrunc status=none")
	check := func(what string, fd int) {
		t.Helper()
		if off, err := unix.Seek(fd, 0, unix.SEEK_HOLE); err != nil || off != 0 {
			t.Errorf("%s: SEEK_HOLE from 0: %d, %v; want 0", what, off, err)
		}
		data, err := unix.Seek(fd, 0, unix.SEEK_DATA)
		if err != nil || data > at || data < at-256<<10 {
			t.Errorf("%s: SEEK_DATA from 0: %d, %v; want the extent holding %d", what, data, err, int64(at))
		}
		hole, err := unix.Seek(fd, at, unix.SEEK_HOLE)
		if err != nil || hole <= at || hole > at+256<<10 {
			t.Errorf("%s: SEEK_HOLE from %d: %d, %v", what, int64(at), hole, err)
		}
		if off, err := unix.Seek(fd, at+1<<20, unix.SEEK_DATA); err != syscall.ENXIO {
			t.Errorf("%s: SEEK_DATA after the last data: %d, %v; want ENXIO", what, off, err)
		}
		if off, err := unix.Seek(fd, size, unix.SEEK_HOLE); err != syscall.ENXIO {
			t.Errorf("%s: SEEK_HOLE at EOF: %d, %v; want ENXIO", what, off, err)
		}
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	check("committed", int(f.Fd()))
	// Dirty: one more byte 1 GiB further, not yet committed.
	if _, err := f.WriteAt([]byte("y"), at+1<<30); err != nil {
		t.Fatal(err)
	}
	if off, err := unix.Seek(int(f.Fd()), at+1<<20, unix.SEEK_DATA); err != nil || off > at+1<<30 || off < at+1<<30-pageSize {
		t.Errorf("dirty: SEEK_DATA finds %d, %v; want the page of %d", off, err, int64(at+1<<30))
	}
}
