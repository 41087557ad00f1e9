package fs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// Real tools against the mount, driven through bash -c.

// makeTree writes a small source tree (files, subdirectories, a symlink, an
// executable, an empty file) under dir.
func makeTree(t *testing.T, dir string) {
	t.Helper()
	for i := 0; i < 20; i++ {
		p := filepath.Join(dir, fmt.Sprintf("pkg%d", i%4), fmt.Sprintf("file%02d.go", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		body := strings.Repeat(fmt.Sprintf("// line of file %d\n", i), 50*(i+1))
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB: chunked, not inline
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "empty"), nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("pkg0/file00.go", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "emptydir"), 0o700); err != nil {
		t.Fatal(err)
	}
}

func TestToolsCpTar(t *testing.T) {
	mnt, _, _ := mountTest(t)
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	sh(t, filepath.Dir(src), "tar -cf src.tar src")

	sh(t, mnt, "cp -a "+src+" copy && diff -r --no-dereference "+src+" copy")
	sh(t, mnt, "mkdir x && tar -C x -xf "+src+".tar && diff -r --no-dereference "+src+" x/src")
	// Modes, sizes and link targets survive both.
	const list = "find . -printf '%y %m %l %p\\n' | sort; find . -type f -printf '%s %p\\n' | sort"
	want := sh(t, src, list)
	for _, d := range []string{"copy", "x/src"} {
		if got := sh(t, filepath.Join(mnt, d), list); got != want {
			t.Errorf("%s: tree differs:\n got %s\nwant %s", d, got, want)
		}
	}
	// cp -a keeps mtimes.
	if got, want := sh(t, filepath.Join(mnt, "copy"), "stat -c '%Y %n' big.bin pkg1/file01.go"),
		sh(t, src, "stat -c '%Y %n' big.bin pkg1/file01.go"); got != want {
		t.Errorf("mtimes: got %q want %q", got, want)
	}
	// tar of the mount back out, and du, never see .asof.
	out := sh(t, mnt, "tar -cf - . | tar -tf - | grep -c asof || true")
	if strings.TrimSpace(out) != "0" {
		t.Errorf("tar of the mount saw .asof: %s", out)
	}
}

func TestToolsEditing(t *testing.T) {
	t.Parallel() // its own store and mount; no package state
	mnt, _, _ := mountTest(t)
	sh(t, mnt, `printf 'alpha\nbeta\ngamma\n' > f.txt && sed -i 's/beta/BETA/' f.txt`)
	if got := sh(t, mnt, "cat f.txt"); got != "alpha\nBETA\ngamma\n" {
		t.Errorf("sed -i: %q", got)
	}
	sh(t, mnt, `for i in 1 2 3; do echo "line $i" >> log.txt; done`)
	if got := sh(t, mnt, "cat log.txt"); got != "line 1\nline 2\nline 3\n" {
		t.Errorf(">> appends: %q", got)
	}
	sh(t, mnt, `python3 -c '
import os
os.makedirs("py/out", exist_ok=True)
for i in range(50):
    with open(f"py/out/{i}.txt", "w") as f:
        f.write(str(i) * i)
with open("py/out/7.txt") as f:
    assert f.read() == "7" * 7
with open("py/rw.bin", "w+b") as f:
    f.write(b"x" * 10000)
    f.seek(5000)
    f.write(b"y")
    f.seek(0)
    d = f.read()
    assert len(d) == 10000 and d[5000:5001] == b"y", len(d)
'`)
	if got := sh(t, mnt, "ls py/out | wc -l; cat py/out/12.txt"); got != "50\n121212121212121212121212" {
		t.Errorf("python files: %q", got)
	}
}

func TestToolsGit(t *testing.T) {
	t.Parallel() // its own store and mount; no package state
	mnt, _, _ := mountTest(t)
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	// gc.autoDetach=false: a commit's automatic gc must not run on in the
	// background, in the mount, while the test unmounts (EBUSY).
	git := "git -c user.name=t -c user.email=t@example.com -c init.defaultBranch=main -c gc.autoDetach=false "
	sh(t, mnt, "cp -a "+src+" repo && cd repo && "+git+"init -q && "+git+"add -A && "+git+"commit -qm first")
	sh(t, mnt, "cd repo && echo more >> pkg0/file00.go && "+git+"commit -qam second && "+git+"gc -q")
	out := sh(t, mnt, "cd repo && "+git+"status --porcelain && "+git+"log --oneline | wc -l && "+git+"fsck --full --strict 2>&1")
	if !strings.HasPrefix(out, "2\n") {
		t.Errorf("git status/log/fsck: %q", out)
	}
	// A clone from the mount and a checkout on the mount.
	sh(t, mnt, git+"clone -q repo clone && cd clone && "+git+"checkout -q HEAD~1 && "+git+"status --porcelain")
	if got := sh(t, mnt, "diff -r "+src+"/pkg0 clone/pkg0 && echo same"); got != "same\n" {
		t.Errorf("checkout of the first commit differs: %q", got)
	}
}

func TestToolsMvRmLinks(t *testing.T) {
	t.Parallel() // its own store and mount; no package state
	mnt, _, _ := mountTest(t)
	sh(t, mnt, `mkdir -p a/b/c && echo hi > a/b/c/f && mv a/b z && test -f z/c/f && test ! -e a/b`)
	sh(t, mnt, `mkdir many && cd many && for d in $(seq 1 20); do mkdir d$d; for f in $(seq 1 100); do echo $f > d$d/f$f; done; done`)
	if got := sh(t, mnt, "find many -type f | wc -l"); got != "2000\n" {
		t.Fatalf("created %q files, want 2000", got)
	}
	sh(t, mnt, "rm -rf many && test ! -e many")
	sh(t, mnt, `echo target > tgt && ln -s tgt sym && ln tgt hard && test "$(readlink sym)" = tgt && test "$(cat sym)" = target`)
	if got := sh(t, mnt, "stat -c '%h %i' tgt hard"); !strings.HasPrefix(got, "2 ") || strings.Split(got, "\n")[0] != strings.Split(got, "\n")[1] {
		t.Errorf("hard link: %q", got)
	}
	sh(t, mnt, `rm tgt && test "$(stat -c %h hard)" = 1 && test "$(cat hard)" = target`)
	sh(t, mnt, `printf '#!/bin/bash\necho "script ran $1"\n' > s.sh && chmod +x s.sh && test "$(./s.sh ok)" = "script ran ok"`)
	// A binary executed from the mount.
	sh(t, mnt, `cp /bin/echo ./echo && test "$(./echo binary)" = binary`)
	// rmdir of a non-empty directory.
	if out, err := shErr(mnt, "mkdir full && touch full/x && rmdir full"); err == nil || !strings.Contains(out, "not empty") {
		t.Errorf("rmdir non-empty: %v %q", err, out)
	}
}

func TestToolsTruncateSparse(t *testing.T) {
	mnt, _, _ := mountTest(t)
	sh(t, mnt, "echo hello > t && truncate -s 3 t && truncate -s 10 t")
	if got := sh(t, mnt, "od -An -c t | tr -s ' '"); got != " h e l \\0 \\0 \\0 \\0 \\0 \\0 \\0\n" {
		t.Errorf("truncate: %q", got)
	}
	sh(t, mnt, "dd if=/dev/zero of=s bs=1 count=0 seek=10M status=none && printf XY | dd of=s bs=1 seek=5M conv=notrunc status=none && printf END | dd of=s bs=1 seek=9M conv=notrunc status=none")
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(mnt, "s"), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != 10<<20 {
		t.Errorf("sparse size %d", st.Size)
	}
	if st.Blocks*512 > 2<<20 {
		t.Errorf("sparse file takes %d blocks", st.Blocks)
	}
	data, err := os.ReadFile(filepath.Join(mnt, "s"))
	if err != nil {
		t.Fatal(err)
	}
	if string(data[5<<20:5<<20+2]) != "XY" || string(data[9<<20:9<<20+3]) != "END" ||
		bytes.Count(data, []byte{0}) != len(data)-5 {
		t.Errorf("sparse content wrong")
	}
	// ftruncate through an open descriptor, while dirty.
	f, err := os.OpenFile(filepath.Join(mnt, "ft"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("0123456789"))
	f.Truncate(4)
	f.WriteAt([]byte("Z"), 6)
	f.Close()
	if got, _ := os.ReadFile(filepath.Join(mnt, "ft")); string(got) != "0123\x00\x00Z" {
		t.Errorf("ftruncate: %q", got)
	}
}

func TestToolsMmap(t *testing.T) {
	mnt, _, _ := mountTest(t)
	sh(t, mnt, `python3 -c '
import mmap
with open("m.bin", "wb") as f:
    f.write(b"." * 8192)
with open("m.bin", "r+b") as f:
    mm = mmap.mmap(f.fileno(), 0)
    mm[0:5] = b"HELLO"
    mm[8000:8003] = b"END"
    mm.flush()
    mm.close()
with open("m.bin", "rb") as f:
    d = f.read()
assert d[:5] == b"HELLO" and d[8000:8003] == b"END" and len(d) == 8192, d[:10]
'`)
	got, err := os.ReadFile(filepath.Join(mnt, "m.bin"))
	if err != nil || string(got[:5]) != "HELLO" || string(got[8000:8003]) != "END" {
		t.Errorf("mmap write: %q %v", got[:8], err)
	}
}

func TestUnlinkOpenFile(t *testing.T) {
	mnt, _, _ := mountTest(t)
	p := filepath.Join(mnt, "u")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write([]byte("before")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(" after")); err != nil {
		t.Fatalf("write after unlink: %v", err)
	}
	buf := make([]byte, 100)
	n, err := f.ReadAt(buf, 0)
	if string(buf[:n]) != "before after" {
		t.Errorf("read after unlink: %q %v", buf[:n], err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil || st.Nlink != 0 || st.Size != 12 {
		t.Errorf("fstat after unlink: nlink %d size %d %v", st.Nlink, st.Size, err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("stat of the unlinked name: %v", err)
	}
}

func TestRenameFlags(t *testing.T) {
	mnt, _, _ := mountTest(t)
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	os.WriteFile(a, []byte("A"), 0o644)
	os.WriteFile(b, []byte("B"), 0o644)
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_NOREPLACE); err != unix.EEXIST {
		t.Errorf("RENAME_NOREPLACE onto an existing file: %v", err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		t.Fatalf("RENAME_EXCHANGE: %v", err)
	}
	ga, _ := os.ReadFile(a)
	gb, _ := os.ReadFile(b)
	if string(ga) != "B" || string(gb) != "A" {
		t.Errorf("after exchange a=%q b=%q", ga, gb)
	}
	os.Mkdir(filepath.Join(mnt, "d"), 0o755)
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, filepath.Join(mnt, "d", "c"), unix.RENAME_NOREPLACE); err != nil {
		t.Errorf("RENAME_NOREPLACE to a new name: %v", err)
	}
	os.Mkdir(filepath.Join(mnt, "e"), 0o755)
	os.WriteFile(filepath.Join(mnt, "e", "x"), nil, 0o644)
	if err := os.Rename(filepath.Join(mnt, "d"), filepath.Join(mnt, "e")); !isErrno(err, syscall.ENOTEMPTY) && !isErrno(err, syscall.EEXIST) {
		t.Errorf("rename onto a non-empty directory: %v", err)
	}
	if err := os.Rename(filepath.Join(mnt, "e"), filepath.Join(mnt, "e", "sub")); !isErrno(err, syscall.EINVAL) {
		t.Errorf("rename into itself: %v", err)
	}
}

func isErrno(err error, want syscall.Errno) bool {
	var e syscall.Errno
	for err != nil {
		if x, ok := err.(syscall.Errno); ok {
			e = x
			break
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			break
		}
		err = u.Unwrap()
	}
	return e == want
}

func TestXattrs(t *testing.T) {
	mnt, _, _ := mountTest(t)
	p := filepath.Join(mnt, "x")
	os.WriteFile(p, []byte("x"), 0o644)
	if err := unix.Setxattr(p, "user.k", []byte("v"), 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 10)
	if n, err := unix.Getxattr(p, "user.k", buf); err != nil || string(buf[:n]) != "v" {
		t.Errorf("getxattr: %q %v", buf[:n], err)
	}
	if err := unix.Setxattr(p, "user.k", []byte("w"), unix.XATTR_CREATE); err != unix.EEXIST {
		t.Errorf("XATTR_CREATE of an existing attribute: %v", err)
	}
	if _, err := unix.Getxattr(p, "security.selinux", buf); err != unix.ENODATA {
		t.Errorf("security.* probe: %v", err)
	}
	if err := unix.Setxattr(p, "trusted.x", []byte("v"), 0); err != unix.EOPNOTSUPP {
		t.Errorf("trusted.* set: %v", err)
	}
	if out, err := shErr(mnt, "ls -l x 2>&1"); err != nil || strings.Contains(out, "ls:") {
		t.Errorf("ls -l: %v %s", err, out)
	}
	// Writes keep xattrs.
	os.WriteFile(p, []byte("new content"), 0o644)
	if n, err := unix.Getxattr(p, "user.k", buf); err != nil || string(buf[:n]) != "v" {
		t.Errorf("getxattr after a write: %q %v", buf[:n], err)
	}
}

func TestChmodChownUtimens(t *testing.T) {
	mnt, _, _ := mountTest(t)
	p := filepath.Join(mnt, "f")
	os.WriteFile(p, []byte("x"), 0o644)
	sh(t, mnt, "chmod 0 f && test \"$(stat -c %a f)\" = 0 && chmod 4755 f && test \"$(stat -c %a f)\" = 4755")
	sh(t, mnt, "chown 1234:5678 f && test \"$(stat -c %u:%g f)\" = 1234:5678")
	sh(t, mnt, "touch -d '2001-02-03 04:05:06.123456789 UTC' f && test \"$(stat -c %Y f)\" = 981173106")
	// UTIME_OMIT keeps mtime; UTIME_NOW sets it.
	ts := []unix.Timespec{{Sec: 1000, Nsec: 0}, {Nsec: unix.UTIME_OMIT}}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	syscall.Stat(p, &st)
	if st.Atim.Sec != 1000 || st.Mtim.Sec != 981173106 || st.Mtim.Nsec != 123456789 {
		t.Errorf("UTIME_OMIT: atime %v mtime %v", st.Atim, st.Mtim)
	}
	ts = []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_NOW}}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0); err != nil {
		t.Fatal(err)
	}
	syscall.Stat(p, &st)
	if st.Atim.Sec != 1000 || st.Mtim.Sec < 1700000000 {
		t.Errorf("UTIME_NOW: atime %v mtime %v", st.Atim, st.Mtim)
	}
	// utimens on a dirty file wins over the write time at commit.
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_TRUNC, 0)
	f.Write([]byte("dirty"))
	ts = []unix.Timespec{{Sec: 5}, {Sec: 6}}
	if err := unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	syscall.Stat(p, &st)
	if st.Mtim.Sec != 6 || st.Size != 5 {
		t.Errorf("utimens while dirty: mtime %v size %d", st.Mtim, st.Size)
	}
}

func TestStatfs(t *testing.T) {
	mnt, _, _ := mountTest(t)
	var s syscall.Statfs_t
	if err := syscall.Statfs(mnt, &s); err != nil {
		t.Fatal(err)
	}
	if s.Bsize == 0 || s.Blocks == 0 || s.Namelen != 255 {
		t.Errorf("statfs: %+v", s)
	}
	sh(t, mnt, "df . >/dev/null")
}

// tar sets mode, owner and times on each file before closing it: those
// join the file's one write version.
func TestTarOneVersionPerFile(t *testing.T) {
	mnt, st, m := mountTest(t)
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	sh(t, filepath.Dir(src), "tar -cf src.tar src")
	sh(t, mnt, "tar -xf "+src+".tar")
	files := map[uint64]string{}
	for _, line := range strings.Split(strings.TrimSpace(sh(t, mnt, "find src -type f -printf '%i %p\\n'")), "\n") {
		var ino uint64
		var p string
		fmt.Sscan(line, &ino, &p)
		files[ino] = p
	}
	ops := map[mvcc.Op]int{}
	st.View(func(tx *mvcc.ReadTx) error {
		return tx.Events(sessionOf(t, m), 0, func(ev mvcc.Event) bool {
			if _, ok := files[uint64(ev.Ino)]; ok {
				ops[ev.Op]++
			}
			return true
		})
	})
	// A created file's first content and attributes join its create
	// (mvcc/held.go). "empty" has no write, so its chmod, chown and
	// utimens are commits of their own.
	if ops["create"] != len(files) || ops["write"] != 0 || ops["chmod"]+ops["chown"]+ops["utimens"] > 3 {
		t.Errorf("commits of %d extracted files: %v, want one create each", len(files), ops)
	}
	// And the attributes are right.
	if got, want := sh(t, mnt, "cd src && find . -printf '%m %Ts %p\\n' | sort"), sh(t, src, "find . -printf '%m %Ts %p\\n' | sort"); got != want {
		t.Errorf("modes and mtimes after tar -x:\n got %s\nwant %s", got, want)
	}
}

// renameat2(RENAME_WHITEOUT) moves the entry and leaves a whiteout (a
// character device 0/0, mode 0, the caller's) at the old name, in one
// commit; overlayfs needs it of its upper layer.
func TestRenameWhiteout(t *testing.T) {
	mnt, st, m := mountTest(t)
	sid := *m.opts.Session
	a, b := filepath.Join(mnt, "a"), filepath.Join(mnt, "b")
	os.WriteFile(a, []byte("A"), 0o644)
	os.WriteFile(b, []byte("B"), 0o644)
	os.MkdirAll(filepath.Join(mnt, "d", "sub"), 0o755)
	checkWhiteout := func(p string) {
		t.Helper()
		var s unix.Stat_t
		if err := unix.Lstat(p, &s); err != nil {
			t.Fatalf("whiteout %s: %v", p, err)
		}
		if s.Mode != syscall.S_IFCHR || s.Rdev != 0 || s.Uid != uint32(os.Getuid()) || s.Gid != uint32(os.Getgid()) {
			t.Errorf("whiteout %s: mode %#o rdev %d owner %d:%d, want a 0/0 character device with mode 0 owned by %d:%d",
				p, s.Mode, s.Rdev, s.Uid, s.Gid, os.Getuid(), os.Getgid())
		}
	}
	events := func() int {
		evs, err := st.Log(sid, mvcc.LogFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}

	// Onto an existing file: b is replaced, a becomes a whiteout.
	before := events()
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_WHITEOUT); err != nil {
		t.Fatalf("RENAME_WHITEOUT: %v", err)
	}
	if got := events() - before; got != 1 {
		t.Errorf("RENAME_WHITEOUT took %d commits, want 1", got)
	}
	if got, err := os.ReadFile(b); err != nil || string(got) != "A" {
		t.Errorf("target after RENAME_WHITEOUT: %q %v", got, err)
	}
	checkWhiteout(a)
	evs, _ := st.Log(sid, mvcc.LogFilter{})
	if ev := evs[len(evs)-1]; ev.Op != "rename" || ev.Path != "a" || ev.Path2 != "b" || ev.Detail != "whiteout" {
		t.Errorf("event of RENAME_WHITEOUT: %+v", ev)
	}

	// A directory to a new name in another directory, with NOREPLACE.
	if err := unix.Renameat2(unix.AT_FDCWD, filepath.Join(mnt, "d", "sub"), unix.AT_FDCWD, filepath.Join(mnt, "sub2"),
		unix.RENAME_WHITEOUT|unix.RENAME_NOREPLACE); err != nil {
		t.Fatalf("RENAME_WHITEOUT of a directory: %v", err)
	}
	checkWhiteout(filepath.Join(mnt, "d", "sub"))
	if fi, err := os.Stat(filepath.Join(mnt, "sub2")); err != nil || !fi.IsDir() {
		t.Errorf("moved directory: %v", err)
	}
	var s unix.Stat_t
	if err := unix.Stat(filepath.Join(mnt, "d"), &s); err != nil || s.Nlink != 2 {
		t.Errorf("link count of the directory left with a whiteout: %d %v", s.Nlink, err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, b, unix.AT_FDCWD, filepath.Join(mnt, "sub2"), unix.RENAME_WHITEOUT|unix.RENAME_NOREPLACE); err != unix.EEXIST {
		t.Errorf("RENAME_WHITEOUT|RENAME_NOREPLACE onto an existing name: %v", err)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, b, unix.AT_FDCWD, filepath.Join(mnt, "sub2"), unix.RENAME_WHITEOUT|unix.RENAME_EXCHANGE); err != unix.EINVAL {
		t.Errorf("RENAME_WHITEOUT|RENAME_EXCHANGE: %v", err)
	}
	// A whiteout is an ordinary node: it can be removed.
	if err := os.Remove(a); err != nil {
		t.Errorf("remove a whiteout: %v", err)
	}
}

// overlayfs with its upper and work directories on padfs: deleting a
// lower file leaves a whiteout in upper, and the merged view hides it.
func TestOverlayUpperOnPadfs(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("mounting overlayfs needs root")
	}
	mnt, _, _ := mountTest(t)
	lower, merged := filepath.Join(t.TempDir(), "lower"), filepath.Join(t.TempDir(), "merged")
	os.MkdirAll(filepath.Join(lower, "dir"), 0o755)
	os.WriteFile(filepath.Join(lower, "gone"), []byte("lower\n"), 0o644)
	os.WriteFile(filepath.Join(lower, "dir", "moved"), []byte("moved\n"), 0o644)
	os.Mkdir(merged, 0o755)
	sh(t, mnt, "mkdir upper work")
	// padfs stores user.* xattrs only: userxattr keeps overlayfs there.
	opts := fmt.Sprintf("userxattr,lowerdir=%s,upperdir=%s,workdir=%s", lower, filepath.Join(mnt, "upper"), filepath.Join(mnt, "work"))
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		if err == unix.ENODEV || err == unix.EPERM {
			t.Skipf("overlayfs unavailable: %v", err)
		}
		t.Fatalf("mount overlay %s: %v", opts, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(merged, 0); err != nil {
			t.Errorf("unmount overlay: %v", err)
			unix.Unmount(merged, unix.MNT_DETACH)
		}
	})
	sh(t, merged, "rm gone && mv dir/moved moved && echo new > dir/new")
	if out := sh(t, merged, "ls -A; ls -A dir; cat moved dir/new"); out != "dir\nmoved\nnew\nmoved\nnew\n" {
		t.Errorf("merged view after rm and mv: %q", out)
	}
	for _, p := range []string{"upper/gone", "upper/dir/moved"} {
		var s unix.Stat_t
		if err := unix.Lstat(filepath.Join(mnt, p), &s); err != nil || s.Mode&syscall.S_IFMT != syscall.S_IFCHR || s.Rdev != 0 {
			t.Errorf("%s on padfs: mode %#o rdev %d %v, want a whiteout", p, s.Mode, s.Rdev, err)
		}
	}
	if got, err := os.ReadFile(filepath.Join(lower, "gone")); err != nil || string(got) != "lower\n" {
		t.Errorf("lower file after rm in the overlay: %q %v", got, err)
	}
}
