package mvcc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// archiveSession builds a session with history: files (one chunked),
// an xattr, a removal, a rename, two checkpoints; it returns the session
// and the HLCs of the checkpoints.
func archiveSession(e *lcEnv) (SessionID, []HLC) {
	e.t.Helper()
	sid := e.session("arch")
	e.write(sid, "d/f", []byte("one"))
	big := e.write(sid, "big", bigText(1, 300_000, "needle", 1000))
	if err := e.st.SetXattr(sid, big.Ino, "user.k", []byte{0, 0xff}, 0); err != nil {
		e.t.Fatal(err)
	}
	c1, err := e.st.CreateCheckpoint(sid, "first")
	if err != nil {
		e.t.Fatal(err)
	}
	e.write(sid, "d/f", []byte("two"))
	h, _ := e.st.Header(sid)
	if err := e.st.Remove(sid, h.Root, "big", false); err != nil {
		e.t.Fatal(err)
	}
	d, _ := e.st.Walk(sid, "d", Latest)
	if err := e.st.Rename(sid, d.Ino, "f", h.Root, "g\xff", 0); err != nil {
		e.t.Fatal(err)
	}
	c2, err := e.st.CreateCheckpoint(sid, "second")
	if err != nil {
		e.t.Fatal(err)
	}
	return sid, []HLC{c1, c2}
}

// treeAt describes a session's tree as of at: paths, modes, content, xattrs.
func treeAt(e *lcEnv, sid SessionID, at HLC) string {
	e.t.Helper()
	var b strings.Builder
	err := e.st.ExportTree(context.Background(), sid, at, func(x ExportEntry) error {
		fmt.Fprintf(&b, "%q %o %d link=%q x=%q", x.Path, x.Node.Mode, x.Node.Nlink, x.LinkTo, x.Xattrs)
		if x.Node.IsRegular() {
			data, err := e.st.ReadAll(x.Node)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %d:%x", len(data), data[:min(len(data), 16)])
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		e.t.Fatalf("tree as of %s: %v", at, err)
	}
	return b.String()
}

func exportArchive(e *lcEnv, sid SessionID) []byte {
	e.t.Helper()
	var buf bytes.Buffer
	if _, err := e.st.ExportSession(context.Background(), sid, &buf); err != nil {
		e.t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSessionArchiveRoundTrip: export then import into a store that already
// has sessions (so inodes are renumbered) keeps the log, the checkpoints and
// every past state; the clock moves past the imported HLCs; a second import
// is refused naming the id.
func TestSessionArchiveRoundTrip(t *testing.T) {
	a := lcOpen(t)
	sid, cks := archiveSession(a)
	arch := exportArchive(a, sid)

	b := lcOpen(t)
	other := b.session("other")
	b.write(other, "x/y", []byte("in the way"))
	h, err := b.st.ImportSession(context.Background(), bytes.NewReader(arch))
	if err != nil {
		t.Fatal(err)
	}
	if h.ID != sid || h.Name != "arch" {
		t.Fatalf("imported header %+v", h)
	}
	strip := func(evs []Event) string {
		var s strings.Builder
		for _, ev := range evs {
			ev.Ino = 0
			fmt.Fprintf(&s, "%+v\n", ev)
		}
		return s.String()
	}
	if want, got := strip(a.events(sid, LogFilter{})), strip(b.events(sid, LogFilter{})); want != got {
		t.Errorf("log after import:\n%s\nwant:\n%s", got, want)
	}
	wantCk, _ := a.st.ListCheckpoints(sid)
	gotCk, _ := b.st.ListCheckpoints(sid)
	if fmt.Sprint(wantCk) != fmt.Sprint(gotCk) {
		t.Errorf("checkpoints %v, want %v", gotCk, wantCk)
	}
	for _, at := range append(cks, Latest) {
		if want, got := treeAt(a, sid, at), treeAt(b, sid, at); want != got {
			t.Errorf("tree as of %s:\n%s\nwant:\n%s", at, got, want)
		}
	}
	if !strings.Contains(treeAt(b, sid, cks[0]), "x=map[\"user.k\":\"\\x00\\xff\"]") {
		t.Errorf("the xattr is missing as of the first checkpoint:\n%s", treeAt(b, sid, cks[0]))
	}
	// Inode numbers do not collide with the other session's.
	seen := map[Ino]SessionID{}
	for _, s := range []SessionID{other, sid} {
		b.st.View(func(tx *ReadTx) error {
			return tx.WalkTree(s, Latest, func(e TreeEntry) error {
				if o, ok := seen[e.Node.Ino]; ok && o != s {
					t.Errorf("inode %d is in both sessions", e.Node.Ino)
				}
				seen[e.Node.Ino] = s
				return nil
			})
		})
	}
	// Later commits come after the imported ones.
	n := b.write(sid, "later", []byte("x"))
	if _, last, _ := lastEventOf(a, sid); n.HLC <= last {
		t.Errorf("a commit after the import has HLC %s, not after the imported %s", n.HLC, last)
	}
	if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(arch)); !errors.Is(err, ErrExist) || !strings.Contains(err.Error(), sid.String()) {
		t.Errorf("second import: %v", err)
	}
	if got := treeAt(b, other, Latest); !strings.Contains(got, "in the way") && !strings.Contains(got, "696e2074") {
		t.Errorf("the other session changed:\n%s", got)
	}
}

func lastEventOf(e *lcEnv, sid SessionID) (uint64, HLC, error) {
	var seq uint64
	var h HLC
	err := e.st.View(func(t *ReadTx) error {
		var err error
		seq, h, err = t.LastEvent(sid)
		return err
	})
	return seq, h, err
}

// TestSessionArchiveRefusesDamage: a flipped bit at any offset, a
// truncation at any length, or bytes after the trailer, are refused as
// ErrArchive and nothing of the session is imported.
func TestSessionArchiveRefusesDamage(t *testing.T) {
	t.Parallel() // its own store; no package state
	a := lcOpen(t)
	sid, _ := archiveSession(a)
	arch := exportArchive(a, sid)
	b := lcOpen(t)
	check := func(what string, data []byte) {
		t.Helper()
		if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(data)); !errors.Is(err, ErrArchive) {
			t.Fatalf("%s: import returned %v, want ErrArchive", what, err)
		}
	}
	step := max(1, len(arch)/700)
	for off := 0; off < len(arch); off += step {
		bad := bytes.Clone(arch)
		bad[off] ^= 1 << (off % 8)
		check(fmt.Sprintf("bit %d of byte %d flipped", off%8, off), bad)
	}
	for l := 0; l < len(arch); l += step {
		check(fmt.Sprintf("truncated to %d bytes", l), arch[:l])
	}
	check("a byte after the trailer", append(bytes.Clone(arch), 0))
	if ss, err := b.st.Sessions(); err != nil || len(ss) != 0 {
		t.Fatalf("sessions after refused imports: %v %v", ss, err)
	}
	if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(arch)); err != nil {
		t.Fatalf("the intact archive after the refusals: %v", err)
	}
}

// TestImportForkWithoutParent: a fork's archive imports into a store
// without the parent and holds the whole tree; the header keeps the parent.
func TestImportForkWithoutParent(t *testing.T) {
	a := lcOpen(t)
	sid, _ := archiveSession(a)
	fh, err := a.st.Fork(t.Context(), sid, Latest, ForkOptions{Name: "child"})
	if err != nil {
		t.Fatal(err)
	}
	arch := exportArchive(a, fh.ID)
	b := lcOpen(t)
	h, err := b.st.ImportSession(context.Background(), bytes.NewReader(arch))
	if err != nil {
		t.Fatal(err)
	}
	if h.Parent == nil || *h.Parent != sid {
		t.Errorf("imported fork's parent %v, want %s", h.Parent, sid)
	}
	if want, got := treeAt(a, fh.ID, Latest), treeAt(b, fh.ID, Latest); want != got {
		t.Errorf("fork tree:\n%s\nwant:\n%s", got, want)
	}
}

// TestImportTreeCopiesHostTree: ImportTree keeps names (bytes), modes,
// symlinks, hard links, xattrs, times, empty directories and content, in
// one commit.
func TestImportTreeCopiesHostTree(t *testing.T) {
	t.Parallel() // its own store; no package state
	src := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(src, "a", "empty"), 0o750))
	must(os.WriteFile(filepath.Join(src, "a", "f"), []byte("small"), 0o640))
	big := bigText(2, 5<<20, "x")
	must(os.WriteFile(filepath.Join(src, "big"), big, 0o644))
	must(os.WriteFile(filepath.Join(src, "big2"), big, 0o644))
	must(os.WriteFile(filepath.Join(src, "n\xff"), nil, 0o600))
	must(os.Link(filepath.Join(src, "a", "f"), filepath.Join(src, "hard")))
	must(os.Symlink("a/f", filepath.Join(src, "sym")))
	must(syscall.Setxattr(filepath.Join(src, "a", "f"), "user.t", []byte("v"), 0))
	must(os.Chtimes(filepath.Join(src, "a", "empty"), time0, time0))
	// A sparse file: data, a 20 MiB hole, data, a hole to the end.
	sparse := make([]byte, 40<<20)
	copy(sparse, big[:70000])
	copy(sparse[20<<20+70000:], big[1<<20:2<<20])
	sf, err := os.Create(filepath.Join(src, "sparse"))
	must(err)
	_, err = sf.WriteAt(sparse[:70000], 0)
	must(err)
	_, err = sf.WriteAt(sparse[20<<20+70000:21<<20+70000], 20<<20+70000)
	must(err)
	must(sf.Truncate(int64(len(sparse))))
	must(sf.Close())

	e := lcOpen(t)
	h, st, err := e.st.ImportTree(context.Background(), src, ImportOptions{Name: "imp", Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 5 || st.Links != 1 || st.Symlinks != 1 || st.Dirs != 2 || st.Xattrs != 1 || st.Stored > int64(len(big))+2<<20 { // big2 stores nothing
		t.Errorf("stats %+v", st)
	}
	got := treeAt(e, h.ID, Latest)
	for _, want := range []string{
		`"a" 40750 3`, `"a/empty" 40750 2`, `"a/f" 100640 2 link="" x=map["user.t":"v"] 5:736d616c6c`,
		`"hard" 100640 2 link="a/f"`, `"n\xff" 100600 1`, `"sym" 120777 1`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("tree lacks %s:\n%s", want, got)
		}
	}
	for _, p := range []string{"big", "big2"} {
		n, err := e.st.Walk(h.ID, p, Latest)
		if err != nil {
			t.Fatal(err)
		}
		data, err := e.st.ReadAll(n)
		if err != nil || !bytes.Equal(data, big) {
			t.Fatalf("%s: %d bytes, %v", p, len(data), err)
		}
	}
	sn, err := e.st.Walk(h.ID, "sparse", Latest)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := e.st.ReadAll(sn); err != nil || !bytes.Equal(data, sparse) {
		t.Fatalf("sparse: %d bytes, %v", len(data), err)
	}
	// Like a file written through the mount, one with more than
	// hashHolesMax of holes has no whole-file hash.
	if sn.ContentHash != nil {
		t.Errorf("sparse: content hash %x, want none (%d bytes of holes)", sn.ContentHash, sn.HoleBytes())
	}
	if holes := sn.HoleBytes(); holes < 35<<20 {
		t.Errorf("sparse: %d bytes of holes, want about 38 MiB", holes)
	}
	if n, _ := e.st.Walk(h.ID, "a/empty", Latest); n == nil || n.Mtime != time0.UnixNano() {
		t.Errorf("a/empty mtime %v", n)
	}
	if evs := e.events(h.ID, LogFilter{}); len(evs) != 1 || evs[0].Op != OpImport {
		t.Errorf("events %+v, want one %s", evs, OpImport)
	}
	// A name taken by a live session is refused, before anything is read.
	if _, _, err := e.st.ImportTree(context.Background(), src, ImportOptions{Name: "imp"}); !errors.Is(err, ErrExist) {
		t.Errorf("second import named imp: %v", err)
	}
}

// FuzzReadSessionArchive: the archive decoder never panics on any input,
// and what it accepts it accepted whole: the records it reported are as
// many as the trailer counts.
func FuzzReadSessionArchive(f *testing.F) {
	f.Add([]byte(archiveMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		var seen uint64
		info, err := ReadSessionArchive(bytes.NewReader(data), func(kind byte, k, v []byte) error {
			seen++
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrArchive) && !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is neither ErrArchive nor ErrFormat", err)
			}
			return
		}
		if info.Count != seen {
			t.Fatalf("accepted with count %d after %d records", info.Count, seen)
		}
	})
}

var time0 = time.Date(2001, 2, 3, 4, 5, 6, 123456789, time.UTC)

// TestImportSessionNames: a live session's name must be free in the
// target store (refused naming the holder, nothing imported); a forgotten
// session's need not be.
func TestImportSessionNames(t *testing.T) {
	a := lcOpen(t)
	sid, _ := archiveSession(a)
	live := exportArchive(a, sid)
	if _, err := a.st.Forget(sid); err != nil {
		t.Fatal(err)
	}
	gone := exportArchive(a, sid)

	b := lcOpen(t)
	holder := b.session("arch")
	if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(live)); !errors.Is(err, ErrExist) || !strings.Contains(err.Error(), holder.String()) {
		t.Fatalf("import of a live session whose name is taken: %v", err)
	}
	if _, err := b.st.Header(sid); !errors.Is(err, ErrNoSession) {
		t.Fatalf("a refused import left the header: %v", err)
	}
	if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(gone)); err != nil {
		t.Fatalf("import of a forgotten session named like a live one: %v", err)
	}
	if _, err := b.st.LiveHeader(sid); !errors.Is(err, ErrForgotten) {
		t.Errorf("the imported session is not forgotten: %v", err)
	}
}

// TestRefusedImportsLeaveNoChunks: an archive damaged after more than one
// batch of chunks, and a host tree with a file that cannot be read after
// another was stored, leave no chunk behind.
func TestRefusedImportsLeaveNoChunks(t *testing.T) {
	t.Parallel() // its own store; no package state
	a := lcOpen(t)
	sid := a.session("big")
	a.write(sid, "f", bigText(5, 12<<20, ""))
	arch := exportArchive(a, sid)
	bad := bytes.Clone(arch)
	bad[len(bad)-5] ^= 1 // the trailer: every chunk was read and stored
	b := lcOpen(t)
	if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(bad)); !errors.Is(err, ErrArchive) {
		t.Fatalf("damaged trailer: %v", err)
	}
	if n := chunkCount(t, b.st); n != 0 {
		t.Errorf("a refused session import left %d chunks", n)
	}

	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "a"), bigText(6, 9<<20, ""), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("nowhere", filepath.Join(src, "b")); err != nil {
		t.Fatal(err)
	}
	// A file that vanishes between the scan and the read.
	nodes, err := scanHostTree(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	nodes = append(nodes, &hostNode{path: filepath.Join(src, "gone"), parent: 0, name: "gone", first: len(nodes)})
	nodes[len(nodes)-1].st.Mode = syscall.S_IFREG
	if _, err := b.st.importContent(context.Background(), nodes, ImportOptions{Workers: 1}, &ImportStats{}); err == nil || !strings.Contains(err.Error(), "gone") {
		t.Fatalf("import of a vanished file: %v", err)
	}
	if n := chunkCount(t, b.st); n != 0 {
		t.Errorf("a failed tree import left %d chunks", n)
	}
}

// rewriteArchive re-frames arch's records, through keep (which may change
// or drop them), as a new intact archive: damage no checksum can see.
func rewriteArchive(t *testing.T, arch []byte, keep func(k, v []byte) ([]byte, bool)) []byte {
	t.Helper()
	var out bytes.Buffer
	aw := &archiveWriter{w: bufio.NewWriter(&out), sum: sha256.New()}
	aw.write(arch[:len(archiveMagic)+5+28+4]) // magic and version frame
	_, err := ReadSessionArchive(bytes.NewReader(arch), func(kind byte, k, v []byte) error {
		if kind == 'C' {
			aw.frame('C', k, v)
		} else if v, ok := keep(k, v); ok {
			aw.frame('K', binary.BigEndian.AppendUint32(nil, uint32(len(k))), k, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	aw.frame('T', u64(aw.count), aw.sum.Sum(nil))
	if err := aw.w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestImportChecksRecords: an archive whose checksums are intact but whose
// records are not a whole session (no counters, a record of another
// session, an undecodable inode, an inode whose chunk is missing) is
// refused, naming the problem, and imports nothing.
func TestImportChecksRecords(t *testing.T) {
	a := lcOpen(t)
	sid, _ := archiveSession(a)
	arch := exportArchive(a, sid)
	b := lcOpen(t)
	if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(rewriteArchive(t, arch, func(k, v []byte) ([]byte, bool) { return v, true }))); err != nil {
		t.Fatalf("the re-framed archive: %v", err)
	}
	if _, err := b.st.Purge(t.Context(), sid, mustToken(t, b.st, sid), nil); err != nil {
		t.Fatal(err)
	}
	other := testID()
	for what, keep := range map[string]func(k, v []byte) ([]byte, bool){
		"no counters": func(k, v []byte) ([]byte, bool) { return v, k[0] != pCounters },
		"no header":   func(k, v []byte) ([]byte, bool) { return v, k[0] != pHeader },
		"another session's key": func(k, v []byte) ([]byte, bool) {
			if k[0] == pCheckpoint {
				copy(k[1:17], other[:])
			}
			return v, true
		},
		"an undecodable inode": func(k, v []byte) ([]byte, bool) {
			if k[0] == pInode {
				v = frame([]byte{0xff, 0xff})
			}
			return v, true
		},
		"an event under the wrong key": func(k, v []byte) ([]byte, bool) {
			if k[0] == pEvent && k[len(k)-1] == 2 {
				k[len(k)-1] = 9
			}
			return v, true
		},
	} {
		bad := rewriteArchive(t, arch, keep)
		if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(bad)); !errors.Is(err, ErrArchive) {
			t.Errorf("%s: import returned %v, want ErrArchive", what, err)
		}
		if ss, _ := b.st.Sessions(); len(ss) != 0 {
			t.Fatalf("%s: a refused import left %v", what, ss)
		}
	}
	// An inode whose chunk the archive lacks (and the store too).
	stripped := stripChunks(t, arch)
	if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(stripped)); !errors.Is(err, ErrArchive) || !strings.Contains(err.Error(), "lacks a chunk") {
		t.Errorf("an archive without its chunks: %v", err)
	}
	if ss, _ := b.st.Sessions(); len(ss) != 0 {
		t.Fatalf("a refused import left %v", ss)
	}
}

// stripChunks is arch without its chunk records.
func stripChunks(t *testing.T, arch []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	aw := &archiveWriter{w: bufio.NewWriter(&out), sum: sha256.New()}
	aw.write(arch[:len(archiveMagic)+5+28+4])
	if _, err := ReadSessionArchive(bytes.NewReader(arch), func(kind byte, k, v []byte) error {
		if kind == 'K' {
			aw.frame('K', binary.BigEndian.AppendUint32(nil, uint32(len(k))), k, v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	aw.frame('T', u64(aw.count), aw.sum.Sum(nil))
	aw.w.Flush()
	return out.Bytes()
}

func mustToken(t *testing.T, st *Store, sid SessionID) string {
	t.Helper()
	r, err := st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	return r.Token
}

// TestImportTreeFileBecameFifo: a file replaced by a fifo between the scan
// and the read is refused; opening it must not wait for a writer.
func TestImportTreeFileBecameFifo(t *testing.T) {
	src := t.TempDir()
	p := filepath.Join(src, "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	nodes, err := scanHostTree(src, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatal(err)
	}
	e := lcOpen(t)
	if _, err := e.st.importContent(context.Background(), nodes, ImportOptions{}, &ImportStats{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("import of a file that became a fifo: %v", err)
	}
}

// rewriteKeys is arch with each K record passed through edit, which may
// change the key as well as the value, or drop the record.
func rewriteKeys(t *testing.T, arch []byte, edit func(k, v []byte) ([]byte, []byte, bool)) []byte {
	t.Helper()
	var out bytes.Buffer
	aw := &archiveWriter{w: bufio.NewWriter(&out), sum: sha256.New()}
	aw.write(arch[:len(archiveMagic)+5+28+4]) // magic and version frame
	if _, err := ReadSessionArchive(bytes.NewReader(arch), func(kind byte, k, v []byte) error {
		if kind == 'C' {
			aw.frame('C', k, v)
		} else if k, v, ok := edit(bytes.Clone(k), bytes.Clone(v)); ok {
			aw.frame('K', binary.BigEndian.AppendUint32(nil, uint32(len(k))), k, v)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	aw.frame('T', u64(aw.count), aw.sum.Sum(nil))
	if err := aw.w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestImportChecksRecordKeys: every kind of record with a malformed key
// (or a value that belongs under another key) is refused as ErrArchive
// naming what is wrong, and the refused import leaves no session.
func TestImportChecksRecordKeys(t *testing.T) {
	a := lcOpen(t)
	sid, _ := archiveSession(a)
	arch := exportArchive(a, sid)
	b := lcOpen(t)
	other := testID()
	longer := func(kind byte) func(k, v []byte) ([]byte, []byte, bool) {
		return func(k, v []byte) ([]byte, []byte, bool) {
			if k[0] == kind {
				k = append(k, 0)
			}
			return k, v, true
		}
	}
	for _, c := range []struct {
		what, want string
		edit       func(k, v []byte) ([]byte, []byte, bool)
	}{
		{"a long header key", "bad header key", longer(pHeader)},
		{"a long state key", "bad state key", longer(pState)},
		{"a long counters key", "bad counters key", longer(pCounters)},
		{"a long event key", "bad event key", longer(pEvent)},
		{"a long inode key", "bad inode key", longer(pInode)},
		{"a long prune key", "bad prune state key", longer(pPrune)},
		{"a short entry key", "short key", func(k, v []byte) ([]byte, []byte, bool) {
			if k[0] == pDentry {
				k = k[:20]
			}
			return k, v, true
		}},
		{"a short xattr key", "short key", func(k, v []byte) ([]byte, []byte, bool) {
			if k[0] == pXattr {
				k = k[:20]
			}
			return k, v, true
		}},
		{"an entry key without its separator", "bad entry key", func(k, v []byte) ([]byte, []byte, bool) {
			if k[0] == pDentry {
				k[len(k)-9] = 1
			}
			return k, v, true
		}},
		{"a short checkpoint value", "checkpoint value of 7 bytes", func(k, v []byte) ([]byte, []byte, bool) {
			if k[0] == pCheckpoint {
				v = v[:7]
			}
			return k, v, true
		}},
		{"an unknown kind", "unknown key kind", func(k, v []byte) ([]byte, []byte, bool) {
			if k[0] == pCheckpoint {
				k[0] = '~'
			}
			return k, v, true
		}},
		{"another session's header", "header of session " + other.String(), func(k, v []byte) ([]byte, []byte, bool) {
			if k[0] == pHeader {
				var h SessionHeader
				if err := decode(k, v, &h); err != nil {
					t.Fatal(err)
				}
				h.ID = other
				var err error
				if v, err = encode(&h); err != nil {
					t.Fatal(err)
				}
			}
			return k, v, true
		}},
		{"an inode under another inode's key", "inode record of inode", func(k, v []byte) ([]byte, []byte, bool) {
			if k[0] == pInode {
				binary.BigEndian.PutUint64(k[17:], binary.BigEndian.Uint64(k[17:])+1000)
			}
			return k, v, true
		}},
	} {
		_, err := b.st.ImportSession(context.Background(), bytes.NewReader(rewriteKeys(t, arch, c.edit)))
		if !errors.Is(err, ErrArchive) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: import returned %v, want ErrArchive with %q", c.what, err, c.want)
		}
		if ss, _ := b.st.Sessions(); len(ss) != 0 {
			t.Fatalf("%s: a refused import left %v", c.what, ss)
		}
	}
	if _, err := b.st.ImportSession(context.Background(), bytes.NewReader(rewriteKeys(t, arch, func(k, v []byte) ([]byte, []byte, bool) { return k, v, true }))); err != nil {
		t.Fatalf("the re-framed archive: %v", err)
	}
}

// failWriter fails every write.
type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestExportSessionRefuses: an unknown session, a chunk the session uses
// that is missing or damaged, and a writer that fails make ExportSession
// fail naming the cause, never a short archive reported as written.
func TestExportSessionRefuses(t *testing.T) {
	e := lcOpen(t)
	sid, _ := archiveSession(e)
	if _, err := e.st.ExportSession(context.Background(), testID(), &bytes.Buffer{}); !errors.Is(err, ErrNoSession) {
		t.Errorf("export of an unknown session: %v, want ErrNoSession", err)
	}
	if _, err := e.st.ExportSession(context.Background(), sid, failWriter{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("export to a failing writer: %v", err)
	}
	var h Hash
	if err := e.st.View(func(t *ReadTx) error {
		cs, err := t.sessionChunks(sid)
		h = sortedHashes(cs)[0]
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := e.st.kv.Update(func(tx kv.Txn) error {
		v, err := tx.Get(chunkKey(h))
		stored = bytes.Clone(v)
		bad := bytes.Clone(v)
		bad[0] ^= 1
		if err == nil {
			err = tx.Put(chunkKey(h), bad)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.ExportSession(context.Background(), sid, &bytes.Buffer{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("export with a damaged chunk: %v, want ErrCorrupt", err)
	}
	if err := e.st.kv.Update(func(tx kv.Txn) error { return tx.Delete(chunkKey(h)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.ExportSession(context.Background(), sid, &bytes.Buffer{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing chunk") {
		t.Errorf("export with a missing chunk: %v, want ErrCorrupt naming the missing chunk", err)
	}
	if len(stored) == 0 {
		t.Fatal("the chunk was not stored before the test damaged it")
	}
}
