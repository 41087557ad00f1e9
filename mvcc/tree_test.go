package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

func openTest(t *testing.T) (*Store, SessionID, Ino) {
	t.Helper()
	st, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("test", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return st, h.ID, h.Root
}

func writeFile(t *testing.T, st *Store, sid SessionID, dir Ino, name string, data []byte) *Inode {
	t.Helper()
	n, err := st.Lookup(sid, dir, name, Latest)
	if errors.Is(err, ErrNotFound) {
		n, err = st.Create(sid, dir, name, Attr{Mode: sIFREG | 0o644}, "")
	}
	if err != nil {
		t.Fatal(err)
	}
	n, err = st.WriteContent(context.Background(), sid, n.Ino, bytes.NewReader(data), nowNs())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readFile(t *testing.T, st *Store, sid SessionID, path string, at HLC) string {
	t.Helper()
	n, err := st.Walk(sid, path, at)
	if err != nil {
		t.Fatal(err)
	}
	b, err := st.ReadAll(n)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func countPrefix(t *testing.T, st *Store, prefix byte) int {
	t.Helper()
	n := 0
	err := st.View(func(tx *ReadTx) error {
		return tx.r.Scan([]byte{prefix}, kv.PrefixEnd([]byte{prefix}), func(k, v []byte) (bool, error) {
			n++
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestVersionsAndAsOf(t *testing.T) {
	st, sid, root := openTest(t)
	writeFile(t, st, sid, root, "plan.md", []byte("Plan v1: go left"))
	t1, _ := st.Now()
	writeFile(t, st, sid, root, "plan.md", []byte("Plan v2: go right"))
	if got := readFile(t, st, sid, "plan.md", Latest); got != "Plan v2: go right" {
		t.Fatalf("latest = %q", got)
	}
	if got := readFile(t, st, sid, "plan.md", t1); got != "Plan v1: go left" {
		t.Fatalf("as of t1 = %q", got)
	}
	if err := st.Remove(sid, root, "plan.md", false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Walk(sid, "plan.md", Latest); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after unlink: %v", err)
	}
	if got := readFile(t, st, sid, "plan.md", t1); got != "Plan v1: go left" {
		t.Fatalf("as of t1 after unlink = %q", got)
	}
}

func TestRenameOfBigDirectoryIsOneSmallCommit(t *testing.T) {
	st, sid, root := openTest(t)
	d, err := st.Create(sid, root, "src", Attr{Mode: sIFDIR | 0o755}, "")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		writeFile(t, st, sid, d.Ino, fmt.Sprintf("f%03d.go", i), []byte(fmt.Sprintf("package f%d\n", i)))
	}
	before, _ := st.Now()
	inodes, dentries := countPrefix(t, st, pInode), countPrefix(t, st, pDentry)
	if err := st.Rename(sid, root, "src", root, "lib", 0); err != nil {
		t.Fatal(err)
	}
	// Two entry versions (old name gone, new name), the moved dir's inode and
	// the parent's: independent of the 200 files below.
	if got := countPrefix(t, st, pDentry) - dentries; got != 2 {
		t.Fatalf("rename wrote %d entry versions, want 2", got)
	}
	if got := countPrefix(t, st, pInode) - inodes; got > 2 {
		t.Fatalf("rename wrote %d inode versions, want <= 2", got)
	}
	if got := readFile(t, st, sid, "lib/f123.go", Latest); got != "package f123\n" {
		t.Fatalf("after rename: %q", got)
	}
	if got := readFile(t, st, sid, "src/f123.go", before); got != "package f123\n" {
		t.Fatalf("as of before rename: %q", got)
	}
	var last Event
	st.View(func(tx *ReadTx) error {
		return tx.Events(sid, 0, func(ev Event) bool { last = ev; return true })
	})
	if last.Op != "rename" || last.Path != "src" || last.Path2 != "lib" {
		t.Fatalf("last event = %+v", last)
	}
}

func TestPOSIXRulesOfTreeOps(t *testing.T) {
	st, sid, root := openTest(t)
	d, _ := st.Create(sid, root, "d", Attr{Mode: sIFDIR | 0o755}, "")
	f := writeFile(t, st, sid, d.Ino, "f", []byte("x"))
	if _, err := st.Create(sid, d.Ino, "f", Attr{Mode: sIFREG}, ""); !errors.Is(err, ErrExist) {
		t.Errorf("create existing: %v", err)
	}
	if err := st.Remove(sid, root, "d", true); !errors.Is(err, ErrNotEmpty) {
		t.Errorf("rmdir non-empty: %v", err)
	}
	if err := st.Remove(sid, root, "d", false); !errors.Is(err, ErrIsDir) {
		t.Errorf("unlink dir: %v", err)
	}
	if err := st.Rename(sid, root, "d", d.Ino, "inside", 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("rename dir into itself: %v", err)
	}
	if _, err := st.Create(sid, root, strings.Repeat("n", 256), Attr{Mode: sIFREG}, ""); !errors.Is(err, ErrNameTooLong) {
		t.Errorf("long name: %v", err)
	}
	// Hard links count.
	if _, err := st.Link(sid, f.Ino, root, "g"); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.LatestInode(sid, f.Ino); n.Nlink != 2 {
		t.Errorf("nlink after link = %d", n.Nlink)
	}
	if err := st.Remove(sid, d.Ino, "f", false); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, st, sid, "g", Latest); got != "x" {
		t.Errorf("other link lost content: %q", got)
	}
	// NOREPLACE and EXCHANGE.
	writeFile(t, st, sid, root, "a", []byte("A"))
	writeFile(t, st, sid, root, "b", []byte("B"))
	if err := st.Rename(sid, root, "a", root, "b", RenameNoReplace); !errors.Is(err, ErrExist) {
		t.Errorf("noreplace: %v", err)
	}
	if err := st.Rename(sid, root, "a", root, "b", RenameExchange); err != nil {
		t.Fatal(err)
	}
	if readFile(t, st, sid, "a", Latest) != "B" || readFile(t, st, sid, "b", Latest) != "A" {
		t.Error("exchange did not swap")
	}
	// Directory link counts follow subdirectories.
	if _, err := st.Create(sid, d.Ino, "sub", Attr{Mode: sIFDIR | 0o755}, ""); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.LatestInode(sid, d.Ino); n.Nlink != 3 {
		t.Errorf("dir nlink = %d, want 3", n.Nlink)
	}
	if err := st.Rename(sid, d.Ino, "sub", root, "sub", 0); err != nil {
		t.Fatal(err)
	}
	if n, _ := st.LatestInode(sid, d.Ino); n.Nlink != 2 {
		t.Errorf("old parent nlink after move = %d, want 2", n.Nlink)
	}
}

func TestContentIsChunkedAndDeduplicated(t *testing.T) {
	t.Parallel() // its own store; no package state
	st, sid, root := openTest(t)
	data := make([]byte, 10<<20)
	rand.New(rand.NewSource(1)).Read(data)
	writeFile(t, st, sid, root, "big", data)
	chunks := countPrefix(t, st, pChunk)
	writeFile(t, st, sid, root, "copy", data) // same bytes: nothing new
	if got := countPrefix(t, st, pChunk); got != chunks {
		t.Fatalf("identical content added %d chunks", got-chunks)
	}
	edited := append([]byte(nil), data...)
	copy(edited[5<<20:], "one changed line\n")
	writeFile(t, st, sid, root, "big", edited)
	if added := countPrefix(t, st, pChunk) - chunks; added < 1 || added > 3 {
		t.Fatalf("a one-line edit of 10 MB added %d chunks, want about 1", added)
	}
	if got := readFile(t, st, sid, "big", Latest); got != string(edited) {
		t.Fatal("edited content differs")
	}
	// A sparse file stores no chunks for its hole.
	sparse := make([]byte, 8<<20)
	copy(sparse[7<<20:], "tail")
	n := writeFile(t, st, sid, root, "sparse", sparse)
	if n.Blocks() > 1024 {
		t.Fatalf("sparse 8 MiB file uses %d blocks", n.Blocks())
	}
	var buf [4]byte
	if _, err := st.ReadAt(n, buf[:], 7<<20); err != nil && err != io.EOF || string(buf[:]) != "tail" {
		t.Fatalf("read after hole: %q %v", buf, err)
	}
}

func TestTruncateAndXattrs(t *testing.T) {
	st, sid, root := openTest(t)
	f := writeFile(t, st, sid, root, "f", []byte("hello world"))
	size := uint64(5)
	if _, err := st.SetAttr(sid, f.Ino, SetAttr{Size: &size}); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, st, sid, "f", Latest); got != "hello" {
		t.Fatalf("after truncate: %q", got)
	}
	size = 1 << 20
	n, err := st.SetAttr(sid, f.Ino, SetAttr{Size: &size})
	if err != nil || n.Size != 1<<20 {
		t.Fatal(err)
	}
	if got := readFile(t, st, sid, "f", Latest); got[:5] != "hello" || strings.Trim(got[5:], "\x00") != "" {
		t.Fatal("grown file must read as hello + zeros")
	}
	if err := st.SetXattr(sid, f.Ino, "user.k", []byte("v"), XattrCreate); err != nil {
		t.Fatal(err)
	}
	if err := st.SetXattr(sid, f.Ino, "user.k", []byte("v"), XattrCreate); !errors.Is(err, ErrExist) {
		t.Errorf("xattr create twice: %v", err)
	}
	if err := st.SetXattr(sid, f.Ino, "user.none", nil, 0); !errors.Is(err, ErrNoAttr) {
		t.Errorf("remove missing xattr: %v", err)
	}
}

func TestNewerFormatIsRefused(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.kv.Update(func(tx kv.Txn) error { return tx.Put(metaKey("format"), u64(FormatVersion+1)) }); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := OpenDir(dir); !errors.Is(err, ErrFormat) {
		t.Fatalf("open of a newer format: %v", err)
	}
}

func TestCorruptRecordIsReportedNotDecoded(t *testing.T) {
	st, sid, root := openTest(t)
	f := writeFile(t, st, sid, root, "f", []byte("data"))
	k := append(inodeChain(sid, f.Ino), inv(f.HLC)...)
	if err := st.kv.Update(func(tx kv.Txn) error {
		v, _ := tx.Get(k)
		v = append([]byte(nil), v...)
		v[len(v)-1] ^= 1
		return tx.Put(k, v)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.LatestInode(sid, f.Ino); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a corrupt inode: %v", err)
	}
}

func TestEventPathsFollowDirectoryRenames(t *testing.T) {
	st, sid, root := openTest(t)
	a, _ := st.Create(sid, root, "a", Attr{Mode: sIFDIR | 0o755}, "")
	b, _ := st.Create(sid, a.Ino, "b", Attr{Mode: sIFDIR | 0o755}, "")
	writeFile(t, st, sid, b.Ino, "f", []byte("1")) // caches the path of a/b
	if err := st.Rename(sid, root, "a", root, "z", 0); err != nil {
		t.Fatal(err)
	}
	writeFile(t, st, sid, b.Ino, "f", []byte("2"))
	if err := st.Remove(sid, b.Ino, "f", false); err != nil {
		t.Fatal(err)
	}
	var paths []string
	st.View(func(tx *ReadTx) error {
		return tx.Events(sid, 0, func(ev Event) bool { paths = append(paths, string(ev.Op)+" "+ev.Path+" "+ev.Path2); return true })
	})
	want := []string{"session.create . ", "mkdir a ", "mkdir a/b ", "create a/b/f ", "write a/b/f ",
		"rename a z", "write z/b/f ", "unlink z/b/f "}
	if fmt.Sprint(paths) != fmt.Sprint(want) {
		t.Fatalf("event paths:\n got %q\nwant %q", paths, want)
	}
}

func TestUnlinkOfPrimaryHardLinkRepointsToTheOtherDirectory(t *testing.T) {
	st, sid, root := openTest(t)
	p, _ := st.Create(sid, root, "p", Attr{Mode: sIFDIR | 0o755}, "")
	q, _ := st.Create(sid, root, "q", Attr{Mode: sIFDIR | 0o755}, "")
	x := writeFile(t, st, sid, p.Ino, "x", []byte("1"))
	if _, err := st.Link(sid, x.Ino, q.Ino, "y"); err != nil { // primary link is now q/y
		t.Fatal(err)
	}
	if err := st.Remove(sid, q.Ino, "y", false); err != nil {
		t.Fatal(err)
	}
	n := writeFile(t, st, sid, p.Ino, "x", []byte("2"))
	if n.Parent != p.Ino || n.Name != "x" {
		t.Fatalf("primary link = %d/%q, want p/x", n.Parent, n.Name)
	}
	var last Event
	st.View(func(tx *ReadTx) error { return tx.Events(sid, 0, func(ev Event) bool { last = ev; return true }) })
	if last.Path != "p/x" {
		t.Fatalf("write logged at %q, want p/x", last.Path)
	}
}

// RenameWhiteout moves the entry and names a whiteout (character device
// 0/0, mode 0, the given owner) at the old name in the same commit: as of
// the commit before, the old name holds the file and the new one nothing.
func TestRenameWhiteoutIsOneCommit(t *testing.T) {
	st, sid, root := openTest(t)
	writeFile(t, st, sid, root, "a", []byte("A"))
	before, _ := st.Now()
	if err := st.RenameAs(sid, root, "a", root, "b", RenameWhiteout, Attr{Uid: 7, Gid: 8}); err != nil {
		t.Fatal(err)
	}
	w, err := st.Lookup(sid, root, "a", Latest)
	if err != nil {
		t.Fatal(err)
	}
	if w.Mode != syscall.S_IFCHR || w.Rdev != 0 || w.Uid != 7 || w.Gid != 8 || w.Nlink != 1 {
		t.Errorf("whiteout: mode %#o rdev %d owner %d:%d nlink %d", w.Mode, w.Rdev, w.Uid, w.Gid, w.Nlink)
	}
	b, err := st.Lookup(sid, root, "b", Latest)
	if err != nil || readFile(t, st, sid, "b", Latest) != "A" {
		t.Fatalf("moved file: %v", err)
	}
	// Both names changed at one HLC: no state shows the file twice or
	// the whiteout beside the old file.
	if b.HLC != w.HLC {
		t.Errorf("moved inode at %v, whiteout at %v: two commits", b.HLC, w.HLC)
	}
	if got := readFile(t, st, sid, "a", before); got != "A" {
		t.Errorf("a as of before: %q", got)
	}
	if _, err := st.Lookup(sid, root, "b", before); !errors.Is(err, ErrNotFound) {
		t.Errorf("b as of before: %v", err)
	}
	if err := st.Rename(sid, root, "b", root, "a", RenameWhiteout|RenameExchange); !errors.Is(err, ErrInvalid) {
		t.Errorf("RenameWhiteout|RenameExchange: %v", err)
	}
}
