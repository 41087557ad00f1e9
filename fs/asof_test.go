package fs

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
)

// treeListing describes a tree: type, mode, link target and path of every
// entry, sizes and checksums of files.
const treeListing = "find . -printf '%y %m %l %p\\n' | sort; find . -type f -exec md5sum {} + | sort -k2"

func TestAsof(t *testing.T) {
	mnt, st, _ := mountTest(t)
	type point struct {
		at      mvcc.HLC
		listing string
	}
	var points []point
	record := func() {
		t.Helper()
		at, err := st.Now()
		if err != nil {
			t.Fatal(err)
		}
		points = append(points, point{at, sh(t, mnt, treeListing)})
	}
	record() // empty
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	sh(t, mnt, "cp -a "+src+" tree")
	record()
	sh(t, mnt, "sed -i 's/line/LINE/' tree/pkg0/file00.go && echo appended >> tree/big.bin && chmod 600 tree/run.sh")
	record()
	sh(t, mnt, "mv tree/pkg1 tree/moved && rm -rf tree/pkg2 && ln -s moved tree/ml && ln tree/empty tree/hard && truncate -s 100 tree/empty")
	record()
	sh(t, mnt, "rm -rf tree")
	record()

	for i, p := range points {
		dir := filepath.Join(mnt, ".asof", p.at.String())
		if got := sh(t, dir, treeListing); got != p.listing {
			t.Errorf("point %d (%s): .asof differs:\n got %s\nwant %s", i, p.at, got, p.listing)
		}
	}
	// An RFC 3339 time with an offset names the same state.
	p := points[2]
	rfc := p.at.Time().In(time.FixedZone("X", 3600)).Format(time.RFC3339Nano)
	if got := sh(t, filepath.Join(mnt, ".asof", rfc), treeListing); got != p.listing {
		t.Errorf("RFC 3339 name %s differs", rfc)
	}

	// .asof is hidden from readdir, but lists points (timetravel.Listed):
	// the session's first commit and, since every commit here came
	// within a minute, the last one, which shows the live tree.
	if out := sh(t, mnt, "ls -a"); strings.Contains(out, ".asof") {
		t.Errorf(".asof listed at the root: %q", out)
	}
	names := strings.Fields(sh(t, mnt, "ls .asof"))
	if len(names) != 2 || names[0] >= names[1] {
		t.Fatalf("ls .asof: %q; want the first and the last commit, in order", names)
	}
	if got, want := sh(t, filepath.Join(mnt, ".asof", names[1]), treeListing), points[len(points)-1].listing; got != want {
		t.Errorf(".asof/%s (the last point listed) is not the live tree:\n%s\nwant\n%s", names[1], got, want)
	}

	// Read-only, and malformed names do not exist.
	past := filepath.Join(mnt, ".asof", points[3].at.String())
	for _, script := range []string{
		"echo x > tree/new", "echo x >> tree/big.bin", "rm tree/big.bin", "mkdir tree/d",
		"mv tree/big.bin tree/b2", "chmod 777 tree/big.bin", "touch tree/big.bin",
		"ln -s a tree/s", "ln tree/big.bin tree/h", "truncate -s 0 tree/big.bin",
		"if command -v setfattr >/dev/null; then setfattr -n user.a -v b tree/big.bin; else python3 -c 'import os; os.setxattr(\"tree/big.bin\", \"user.a\", b\"b\")'; fi",
	} {
		out, err := shErr(past, script)
		if err == nil || !strings.Contains(out, "Read-only file system") {
			t.Errorf("%q in .asof: err %v, output %q (want EROFS)", script, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(past, "tree", "new"), nil, 0o644); !isErrno(err, syscall.EROFS) {
		t.Errorf("create in .asof: %v", err)
	}
	for _, bad := range []string{"yesterday", "2026-13-45T00:00:00Z", "1234", "1969-01-01T00:00:00Z"} {
		if _, err := os.Stat(filepath.Join(mnt, ".asof", bad)); !os.IsNotExist(err) {
			t.Errorf(".asof/%s: %v, want ENOENT", bad, err)
		}
	}
	if err := os.Mkdir(filepath.Join(mnt, ".asof", "x"), 0o755); !isErrno(err, syscall.EROFS) {
		t.Errorf("mkdir in .asof: %v", err)
	}
	// A time before the session existed is ENOENT too.
	if _, err := os.Stat(filepath.Join(mnt, ".asof", "2000-01-01T00:00:00Z")); !os.IsNotExist(err) {
		t.Errorf(".asof before the session: %v", err)
	}
	// Hard links in a view share an inode number; views never share one
	// with the live tree.
	v := filepath.Join(mnt, ".asof", points[3].at.String(), "tree")
	var a, b, live syscall.Stat_t
	syscall.Stat(filepath.Join(v, "empty"), &a)
	syscall.Stat(filepath.Join(v, "hard"), &b)
	syscall.Stat(filepath.Join(mnt), &live)
	if a.Ino != b.Ino || a.Nlink != 2 || a.Ino == live.Ino || a.Ino < 1<<62 {
		t.Errorf("view inode numbers: %d %d (nlink %d), live root %d", a.Ino, b.Ino, a.Nlink, live.Ino)
	}
}

func TestReservedNames(t *testing.T) {
	mnt, _, _ := mountTest(t)
	for _, c := range []struct {
		script, want string
	}{
		{"mkdir .asof", "File exists"},
		{"touch .asof", ""}, // touch of an existing dir: utimens, EROFS
		{"mkdir .grep", "not permitted"},
		{"echo x > .log", "not permitted"},
		{"ln -s x .grep", "not permitted"},
		{"mkdir d && mv d .log", "not permitted"},
		{"rmdir .asof", "not permitted"},
	} {
		out, err := shErr(mnt, c.script)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%q: err %v, output %q, want %q", c.script, err, out, c.want)
		}
	}
	// Below the root the names are ordinary.
	sh(t, mnt, "mkdir -p sub/.asof sub/.grep && echo x > sub/.log && ls -a sub | grep -c '^\\.' ")
	// Names too long.
	long := strings.Repeat("n", 256)
	if err := os.WriteFile(filepath.Join(mnt, long), nil, 0o644); !isErrno(err, syscall.ENAMETOOLONG) {
		t.Errorf("256-byte name: %v", err)
	}
	if err := os.WriteFile(filepath.Join(mnt, long[:255]), nil, 0o644); err != nil {
		t.Errorf("255-byte name: %v", err)
	}
}

func TestRemount(t *testing.T) {
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("remount", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	opts := Options{Session: &h.ID, SpillDir: filepath.Join(data, "spill")}
	m := mountAt(t, st, mnt, opts)
	src := filepath.Join(t.TempDir(), "src")
	makeTree(t, src)
	sh(t, mnt, "cp -a "+src+" tree && echo tail >> tree/big.bin")
	// A file still open and dirty at unmount time... is committed by
	// Unmount's flush (the descriptor is closed first: an open file
	// keeps the mount busy).
	f, err := os.OpenFile(filepath.Join(mnt, "late"), os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("late write"))
	f.Close()
	want := sh(t, mnt, treeListing)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	mountAt(t, st, mnt, opts)
	if got := sh(t, mnt, treeListing); got != want {
		t.Errorf("after remount:\n got %s\nwant %s", got, want)
	}
}

func TestReopenStore(t *testing.T) {
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.CreateSession("reopen", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	m := mountAt(t, st, mnt, Options{Session: &h.ID})
	sh(t, mnt, "mkdir -p a/b && echo content > a/b/f && ln -s b/f a/l")
	want := sh(t, mnt, treeListing)
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	mountAt(t, st2, mnt, Options{Session: &h.ID})
	if got := sh(t, mnt, treeListing); got != want {
		t.Errorf("after reopening the store:\n got %s\nwant %s", got, want)
	}
}

// A read-only mount of a session as of an HLC, after it was forgotten.
func TestMountAsOf(t *testing.T) {
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("old", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(t.TempDir(), "live")
	m := mountAt(t, st, live, Options{Session: &h.ID})
	sh(t, live, "mkdir d && echo then > d/f")
	at, _ := st.Now()
	sh(t, live, "echo later > d/f && touch d/g")
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Forget(h.ID); err != nil {
		t.Fatal(err)
	}
	past := filepath.Join(t.TempDir(), "past")
	mountAt(t, st, past, Options{Session: &h.ID, AsOf: &at})
	if got := sh(t, past, "ls d; cat d/f"); got != "f\nthen\n" {
		t.Errorf("as-of mount shows %q", got)
	}
	if out, err := shErr(past, "echo x > d/f"); err == nil || !strings.Contains(out, "Read-only") {
		t.Errorf("write to an as-of mount: %v %q", err, out)
	}
	if _, err := os.Stat(filepath.Join(past, ".asof")); !os.IsNotExist(err) {
		t.Errorf(".asof in an as-of mount: %v", err)
	}
	// The live session is gone.
	if _, err := Mount(st, filepath.Join(t.TempDir()), Options{Session: &h.ID}); err == nil {
		t.Errorf("mounting a forgotten session read-write succeeded")
	}
}
