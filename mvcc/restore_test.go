package mvcc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// treeImage is a tree as of some HLC, for comparing two states: one line
// per path with type, mode, owner, content, target, xattrs, and which
// paths share an inode.
func treeImage(t *testing.T, st *Store, sid SessionID, at HLC) (string, map[string]Ino) {
	t.Helper()
	var lines []string
	inos := map[string]Ino{}
	err := st.View(func(tx *ReadTx) error {
		h, err := tx.Header(sid)
		if err != nil {
			return err
		}
		root, err := tx.Inode(sid, h.Root, at)
		if err != nil {
			return err
		}
		xs, err := tx.Xattrs(sid, h.Root, at)
		if err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf(". %o %q", root.Mode, xs))
		return tx.WalkTree(sid, at, func(e TreeEntry) error {
			n := e.Node
			inos[e.Path] = n.Ino
			xs, err := tx.Xattrs(sid, n.Ino, at)
			if err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("%s %o %d:%d size=%d sha=%x target=%q xattrs=%q mtime=%d",
				e.Path, n.Mode, n.Uid, n.Gid, n.Size, n.ContentHash, n.Target, xs, n.Mtime))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n"), inos
}

// checkLinks verifies the latest tree's link counts and primary links.
func checkLinks(t *testing.T, st *Store, sid SessionID) {
	t.Helper()
	names := map[Ino][]rlink{}
	subdirs := map[Ino]uint32{}
	nodes := map[Ino]*Inode{}
	var root Ino
	err := st.View(func(tx *ReadTx) error {
		h, err := tx.Header(sid)
		if err != nil {
			return err
		}
		root = h.Root
		if nodes[root], err = tx.Inode(sid, root, Latest); err != nil {
			return err
		}
		return tx.WalkTree(sid, Latest, func(e TreeEntry) error {
			names[e.Node.Ino] = append(names[e.Node.Ino], rlink{e.Parent, e.Name})
			nodes[e.Node.Ino] = e.Node
			if e.Node.IsDir() {
				subdirs[e.Parent]++
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	for ino, n := range nodes {
		want := uint32(len(names[ino]))
		if n.IsDir() {
			want = 2 + subdirs[ino]
		}
		if n.Nlink != want {
			t.Errorf("inode %d (%s): nlink %d, want %d", ino, n.Name, n.Nlink, want)
		}
		if ino != root && !hasLink(names[ino], rlink{n.Parent, n.Name}) {
			t.Errorf("inode %d: primary link %d/%q is none of its names %v", ino, n.Parent, n.Name, names[ino])
		}
	}
}

func (e *lcEnv) ino(sid SessionID, path string) Ino {
	e.t.Helper()
	n, err := e.st.Walk(sid, path, Latest)
	if err != nil {
		e.t.Fatal(err)
	}
	return n.Ino
}

func (e *lcEnv) seq(sid SessionID) uint64 {
	e.t.Helper()
	var n uint64
	if err := e.st.View(func(tx *ReadTx) error {
		var err error
		n, _, err = tx.LastEvent(sid)
		return err
	}); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// messUp changes every kind of thing restore must put back.
func (e *lcEnv) messUp(sid SessionID) {
	t, st := e.t, e.st
	e.write(sid, "a.txt", []byte("changed\n"))
	_, err := st.SetAttr(sid, e.ino(sid, "a.txt"), SetAttr{Mode: ptrTo(uint32(0o600))})
	must(t, err)
	must(t, st.SetXattr(sid, e.ino(sid, "a.txt"), "user.tag", nil, 0))
	dir := e.ino(sid, "d/sub")
	must(t, st.Remove(sid, dir, "c", false))
	must(t, st.Remove(sid, e.ino(sid, "d"), "sub", true))
	root := e.ino(sid, ".")
	must(t, st.Rename(sid, root, "h1", root, "moved", 0))
	must(t, st.Remove(sid, root, "link", false))
	_, err = st.Create(sid, root, "link", Attr{Mode: sIFLNK | 0o777}, "elsewhere")
	must(t, err)
	e.write(sid, "new.txt", []byte("new\n"))
	e.write(sid, "newdir/x", []byte("x\n"))
}

func ptrTo[T any](v T) *T { return &v }

func (e *lcEnv) buildTree(sid SessionID) {
	t, st := e.t, e.st
	e.write(sid, "a.txt", []byte("one\n"))
	must(t, st.SetXattr(sid, e.ino(sid, "a.txt"), "user.tag", []byte("v1"), 0))
	e.write(sid, "d/b.txt", []byte("bee\n"))
	e.write(sid, "d/sub/c", []byte("sea\n"))
	root := e.ino(sid, ".")
	_, err := st.Create(sid, root, "link", Attr{Mode: sIFLNK | 0o777}, "a.txt")
	must(t, err)
	e.write(sid, "h1", []byte("hard\n"))
	_, err = st.Link(sid, e.ino(sid, "h1"), e.ino(sid, "d"), "h2")
	must(t, err)
	_, err = st.SetAttr(sid, e.ino(sid, "d/b.txt"), SetAttr{Mode: ptrTo(uint32(0o755))})
	must(t, err)
}

func TestRestoreWholeTree(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("r")
	e.buildTree(sid)
	at := e.now()
	want, wantInos := treeImage(t, e.st, sid, at)
	if !strings.Contains(want, `"user.tag":"v1"`) {
		t.Fatalf("the tree image misses the xattr:\n%s", want)
	}
	e.messUp(sid)
	messed := e.now()
	messedImg, _ := treeImage(t, e.st, sid, messed)

	// A dry run lists the changes and commits nothing.
	before := e.seq(sid)
	dry, err := e.st.Restore(context.Background(), sid, at, RestoreOptions{DryRun: true})
	must(t, err)
	var lines []string
	for _, c := range dry.Changes {
		lines = append(lines, fmt.Sprintf("%c %s %s", c.Status, c.From, c.Path))
	}
	got := strings.Join(lines, "\n")
	wantDry := "M  a.txt\nA  d/sub\nA  d/sub/c\nR moved h1\nM  link\nD  new.txt\nD  newdir\nD  newdir/x"
	if got != wantDry {
		t.Errorf("dry run changes:\n%s\nwant:\n%s", got, wantDry)
	}
	if e.seq(sid) != before || dry.HLC != 0 {
		t.Errorf("dry run committed: seq %d -> %d, HLC %s", before, e.seq(sid), dry.HLC)
	}

	res, err := e.st.Restore(context.Background(), sid, at, RestoreOptions{})
	must(t, err)
	if e.seq(sid) != before+1 || res.HLC == 0 || len(res.Changes) != len(dry.Changes) {
		t.Fatalf("restore: seq %d -> %d, HLC %s, %d changes; want one commit with the dry run's %d changes",
			before, e.seq(sid), res.HLC, len(res.Changes), len(dry.Changes))
	}
	img, inos := treeImage(t, e.st, sid, Latest)
	if img != want {
		t.Errorf("tree after restore:\n%s\nwant (as of %s):\n%s", img, at, want)
	}
	for p, ino := range wantInos {
		if inos[p] != ino {
			t.Errorf("%s: inode %d after restore, was %d as of T (a restored path keeps its inode)", p, inos[p], ino)
		}
	}
	if inos["h1"] != inos["d/h2"] {
		t.Errorf("hard links h1 and d/h2 are inodes %d and %d after restore", inos["h1"], inos["d/h2"])
	}
	checkLinks(t, e.st, sid)
	evs := e.events(sid, LogFilter{AfterSeq: before})
	if len(evs) != 1 || evs[0].Op != OpRestore || evs[0].Path != "." || !strings.Contains(evs[0].Detail, at.String()) {
		t.Errorf("restore event: %+v", evs)
	}
	// The restored file's history goes on in its own chain.
	if s := e.mustRead(sid, "a.txt", messed); s != "changed\n" {
		t.Errorf("a.txt as of before the restore: %q", s)
	}

	// Restoring the restore undoes it.
	_, err = e.st.Restore(context.Background(), sid, messed, RestoreOptions{})
	must(t, err)
	if img, _ := treeImage(t, e.st, sid, Latest); img != messedImg {
		t.Errorf("tree after undoing the restore:\n%s\nwant:\n%s", img, messedImg)
	}
	checkLinks(t, e.st, sid)

	// Nothing to restore: no commit.
	n := e.seq(sid)
	res, err = e.st.Restore(context.Background(), sid, messed, RestoreOptions{})
	must(t, err)
	if res.HLC != 0 || len(res.Changes) != 0 || e.seq(sid) != n {
		t.Errorf("restore to the current state: %+v, seq %d -> %d; want no commit", res, n, e.seq(sid))
	}

	// A change diff does not list (a time) is still restored, and a dry
	// run says so.
	mt := int64(12345)
	_, err = e.st.SetAttr(sid, e.ino(sid, "a.txt"), SetAttr{Mtime: &mt})
	must(t, err)
	n = e.seq(sid)
	dry, err = e.st.Restore(context.Background(), sid, messed, RestoreOptions{DryRun: true})
	must(t, err)
	if !dry.Changed || len(dry.Changes) != 0 || e.seq(sid) != n {
		t.Errorf("dry run of an mtime restore: %+v, seq %d -> %d", dry, n, e.seq(sid))
	}
	res, err = e.st.Restore(context.Background(), sid, messed, RestoreOptions{})
	must(t, err)
	if img, _ := treeImage(t, e.st, sid, Latest); !res.Changed || img != messedImg {
		t.Errorf("mtime restore: %+v\n%s\nwant:\n%s", res, img, messedImg)
	}
}

func TestRestorePaths(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("r")
	e.buildTree(sid)
	at := e.now()
	e.messUp(sid)
	// b.txt moves out of d after T: restoring d brings back a copy, and the
	// moved file stays where it went.
	root := e.ino(sid, ".")
	must(t, e.st.Rename(sid, e.ino(sid, "d"), "b.txt", root, "b-moved", 0))
	movedIno := e.ino(sid, "b-moved")

	res, err := e.st.Restore(context.Background(), sid, at, RestoreOptions{Paths: []string{"d", "newdir/x", "d/sub"}})
	must(t, err)
	var lines []string
	for _, c := range res.Changes {
		lines = append(lines, fmt.Sprintf("%c %s", c.Status, c.Path))
	}
	if got, want := strings.Join(lines, " "), "A d/b.txt A d/sub A d/sub/c D newdir/x"; got != want {
		t.Errorf("changes: %q, want %q", got, want)
	}
	for p, want := range map[string]string{"d/b.txt": "bee\n", "d/sub/c": "sea\n", "b-moved": "bee\n",
		"a.txt": "changed\n", "new.txt": "new\n", "d/h2": "hard\n", "moved": "hard\n"} {
		if s, err := e.read(sid, p, Latest); err != nil || s != want {
			t.Errorf("%s after restoring d: %q %v, want %q", p, s, err, want)
		}
	}
	if _, err := e.read(sid, "newdir/x", Latest); err == nil {
		t.Errorf("newdir/x survived its restore to before it existed")
	}
	if e.ino(sid, "b-moved") != movedIno || e.ino(sid, "d/b.txt") == movedIno {
		t.Errorf("d/b.txt is inode %d, b-moved %d (was %d): want a fresh inode for the restored name",
			e.ino(sid, "d/b.txt"), e.ino(sid, "b-moved"), movedIno)
	}
	n, err := e.st.Walk(sid, "d/b.txt", Latest)
	must(t, err)
	if n.Mode&0o777 != 0o755 {
		t.Errorf("d/b.txt mode %o, want 755", n.Mode)
	}
	checkLinks(t, e.st, sid)

	if _, err := e.st.Restore(context.Background(), sid, at, RestoreOptions{Paths: []string{"nowhere/x"}}); err == nil {
		t.Errorf("restore of a path whose directory does not exist: no error")
	}
	if _, err := e.st.Restore(context.Background(), sid, at, RestoreOptions{Paths: []string{"../x"}}); err == nil {
		t.Errorf("restore of ../x: no error")
	}
}

// TestRestoreRefusesPlans: a time before the session existed, a path
// whose directory is now a file, and a path that is neither in the tree
// now nor as of T are refused with the sentinel naming why, and nothing
// is committed.
func TestRestoreRefusesPlans(t *testing.T) {
	e := lcOpen(t)
	before := e.now()
	sid := e.session("r")
	e.buildTree(sid)
	at := e.now()
	seq := e.seq(sid)
	for _, c := range []struct {
		what  string
		at    HLC
		paths []string
		want  error
	}{
		{"before the session", before, nil, ErrNotFound},
		{"below a file", at, []string{"a.txt/x"}, ErrNotDir},
		{"never there", at, []string{"d/never"}, ErrNotFound},
	} {
		if _, err := e.st.Restore(context.Background(), sid, c.at, RestoreOptions{Paths: c.paths}); !errors.Is(err, c.want) {
			t.Errorf("restore %s: %v, want %v", c.what, err, c.want)
		}
	}
	if got := e.seq(sid); got != seq {
		t.Errorf("refused restores committed: last event %d, was %d", got, seq)
	}
}
