package mvcc

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/internal/kvcount"
	"github.com/padfs/padfs/internal/rawscan"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// openCounting opens dir's store (bolt behind the WAL) through a counting
// kv layer.
func openCounting(t *testing.T, dir string) (*Store, *kvcount.Store) {
	t.Helper()
	b, err := bolt.Open(filepath.Join(dir, StoreFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(filepath.Join(dir, WALDir), b, wal.Options{})
	if err != nil {
		b.Close()
		t.Fatal(err)
	}
	c := kvcount.New(w)
	st, err := New(c)
	if err != nil {
		w.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, c
}

func mkdirT(t *testing.T, st *Store, sid SessionID, parent Ino, name string) Ino {
	t.Helper()
	n, err := st.Create(sid, parent, name, Attr{Mode: sIFDIR | 0o755}, "")
	if err != nil {
		t.Fatal(err)
	}
	return n.Ino
}

func touchT(t *testing.T, st *Store, sid SessionID, parent Ino, name string) *Inode {
	t.Helper()
	n, err := st.Create(sid, parent, name, Attr{Mode: sIFREG | 0o644}, "")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// names lists dir's names as of at through ReadDir.
func names(t *testing.T, st *Store, sid SessionID, dir Ino, at HLC) []string {
	t.Helper()
	ds, err := st.ReadDir(sid, dir, at)
	if err != nil {
		t.Fatal(err)
	}
	out := []string{}
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}

// chainDentries lists dir's latest entries from the entry chains, the way
// listings read before the live-entry index.
func chainDentries(t *testing.T, st *Store, sid SessionID, dir Ino) []Dentry {
	t.Helper()
	var out []Dentry
	if err := st.View(func(tx *ReadTx) error {
		return tx.readDirChains(sid, dir, Latest, func(d Dentry) bool { out = append(out, d); return true })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantIndexAgrees checks, for every directory of sid's latest tree, that
// the listing (from the index) is what the chains say.
func wantIndexAgrees(t *testing.T, st *Store, sid SessionID) int {
	t.Helper()
	h, err := st.Header(sid)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	var walk func(dir Ino)
	walk = func(dir Ino) {
		got, err := st.ReadDir(sid, dir, Latest)
		if err != nil {
			t.Fatal(err)
		}
		want := chainDentries(t, st, sid, dir)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("directory %d of %s: the index lists %v, the chains %v", dir, sid, got, want)
		}
		for _, d := range got {
			n++
			if d.Type == sIFDIR {
				walk(d.Ino)
			}
		}
	}
	walk(h.Root)
	return n
}

// downgrade makes st look like a store of the previous padfs: no
// live-entry keys (nor index states), format 2.
func downgrade(t *testing.T, st *Store) {
	t.Helper()
	if err := st.kv.Update(func(tx kv.Txn) error {
		if err := scanKeys(tx, []byte{pLive}, func(k, _ []byte) error { return tx.Delete(k) }); err != nil {
			return err
		}
		return tx.Put(metaKey("format"), u64(formatXattrChains))
	}); err != nil {
		t.Fatal(err)
	}
}

func countKeys(t *testing.T, st *Store, prefix []byte) int {
	t.Helper()
	n := 0
	if err := st.View(func(tx *ReadTx) error {
		return scanKeys(tx.r, prefix, func(_, _ []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// A directory that once held many short-lived names lists by reading its
// live names only: as many keys as a directory that only ever held those.
// (On the code before the index the churned listing read one key per name
// it ever had, in a seek each: 10,020 keys in 10,021 scans against 20.)
func TestLiveListingReadsOnlyLiveKeys(t *testing.T) {
	const churn, live = 20000, 20
	st, c := openCounting(t, t.TempDir())
	h, err := st.CreateSession("churn", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sid, root := h.ID, h.Root
	busy, quiet, gone := mkdirT(t, st, sid, root, "busy"), mkdirT(t, st, sid, root, "quiet"), mkdirT(t, st, sid, root, "gone")
	for i := 0; i < live; i++ {
		touchT(t, st, sid, busy, fmt.Sprintf("keep%02d", i))
		touchT(t, st, sid, quiet, fmt.Sprintf("keep%02d", i))
	}
	for i := 0; i < churn; i++ {
		name := fmt.Sprintf("tmp%05d.o", i)
		dir := busy
		if i%2 == 1 {
			dir = gone
		}
		touchT(t, st, sid, dir, name)
		if err := st.Remove(sid, dir, name, false); err != nil {
			t.Fatal(err)
		}
	}
	visit := func(what string, fn func()) kvcount.Counts {
		t.Helper()
		before := c.Counts()
		fn()
		after := c.Counts()
		return kvcount.Counts{Keys: after.Keys - before.Keys, Scans: after.Scans - before.Scans, Gets: after.Gets - before.Gets}
	}
	var busyNames, quietNames []string
	b := visit("busy", func() { busyNames = names(t, st, sid, busy, Latest) })
	q := visit("quiet", func() { quietNames = names(t, st, sid, quiet, Latest) })
	if !reflect.DeepEqual(busyNames, quietNames) || len(busyNames) != live {
		t.Fatalf("busy lists %d names, quiet %d", len(busyNames), len(quietNames))
	}
	t.Logf("listing the churned directory: %+v; the quiet one: %+v", b, q)
	if b.Keys != q.Keys || b.Scans != q.Scans || b.Keys > live+4 {
		t.Fatalf("listing %d live names of a directory that had %d read %d keys in %d scans; one that only had them read %d in %d",
			live, live+churn/2, b.Keys, b.Scans, q.Keys, q.Scans)
	}
	// As of now (`padfs now`, past the last commit) lists the same way.
	now, err := st.Now()
	if err != nil {
		t.Fatal(err)
	}
	var nowNames []string
	n := visit("now", func() { nowNames = names(t, st, sid, busy, now) })
	if !reflect.DeepEqual(nowNames, busyNames) || n.Keys > live+4 {
		t.Fatalf("busy as of now lists %d names and read %d keys in %d scans", len(nowNames), n.Keys, n.Scans)
	}
	// rmdir of the emptied directory checks emptiness the same way.
	r := visit("rmdir", func() {
		if err := st.Remove(sid, root, "gone", true); err != nil {
			t.Fatal(err)
		}
	})
	if r.Keys > 200 {
		t.Fatalf("rmdir of a directory that had %d names read %d keys", churn/2, r.Keys)
	}
	// The past still lists from the chains: as of before the churn, and
	// in the middle of it.
	if got := names(t, st, sid, busy, HLC(uint64(h.Created)+1)); len(got) != 0 {
		t.Fatalf("busy as of its creation: %v", got)
	}
	wantIndexAgrees(t, st, sid)
}

// .asof listings of past states read the chains and stay what they were;
// the latest listing (index) agrees with the chains after every kind of
// entry change; forks and imports get an index of their own.
func TestLiveIndexAsOfForkImport(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("src", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sid, root := h.ID, h.Root
	type point struct {
		at      HLC
		listing map[Ino][]string
	}
	dirs := []Ino{root, mkdirT(t, st, sid, root, "a"), mkdirT(t, st, sid, root, "b")}
	var points []point
	snap := func() {
		t.Helper()
		at, err := st.Now()
		if err != nil {
			t.Fatal(err)
		}
		p := point{at, map[Ino][]string{}}
		for _, d := range dirs {
			p.listing[d] = names(t, st, sid, d, Latest)
		}
		points = append(points, p)
		wantIndexAgrees(t, st, sid)
	}
	a, b := dirs[1], dirs[2]
	for i := 0; i < 30; i++ {
		touchT(t, st, sid, a, fmt.Sprintf("f%02d", i))
	}
	snap()
	for i := 0; i < 30; i += 3 {
		if err := st.Remove(sid, a, fmt.Sprintf("f%02d", i), false); err != nil {
			t.Fatal(err)
		}
	}
	snap()
	n := touchT(t, st, sid, b, "x")
	if _, err := st.Link(sid, n.Ino, a, "x-link"); err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(sid, a, "f01", b, "f01-moved", 0); err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(sid, a, "f02", b, "x", 0); err != nil { // replaces x
		t.Fatal(err)
	}
	snap()
	if err := st.Rename(sid, a, "f04", b, "x", RenameExchange); err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(sid, a, "f05", a, "f05-new", RenameWhiteout); err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(sid, root, "b", a, "b-inside", 0); err != nil {
		t.Fatal(err)
	}
	snap()
	for _, p := range points {
		for _, d := range dirs {
			if got := names(t, st, sid, d, p.at); !reflect.DeepEqual(got, p.listing[d]) {
				t.Fatalf("directory %d as of %s lists %v, listed %v then", d, p.at, got, p.listing[d])
			}
		}
	}

	// A fork of a past point and of now: its own index, which lists what
	// the source listed then.
	for _, p := range []point{points[1], points[len(points)-1]} {
		fh, err := st.Fork(context.Background(), sid, p.at, ForkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := names(t, st, fh.ID, fh.Root, Latest); !reflect.DeepEqual(got, p.listing[root]) {
			t.Fatalf("fork as of %s lists %v at its root, want %v", p.at, got, p.listing[root])
		}
		fa, err := st.Lookup(fh.ID, fh.Root, "a", Latest)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(t, st, fh.ID, fa.Ino, Latest); !reflect.DeepEqual(got, p.listing[a]) {
			t.Fatalf("fork as of %s lists %v in a, want %v", p.at, got, p.listing[a])
		}
		if countKeys(t, st, key(pLive, fh.ID[:])) < 3 {
			t.Fatalf("fork %s has no live-entry keys", fh.ID)
		}
		wantIndexAgrees(t, st, fh.ID)
	}

	// Export leaves the index out; import derives it.
	var arch bytes.Buffer
	if _, err := st.ExportSession(context.Background(), sid, &arch); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(arch.Bytes(), liveStateKey(sid)) {
		t.Fatal("the archive holds live-entry keys")
	}
	st2, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	ih, err := st2.ImportSession(context.Background(), &arch)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := wantIndexAgrees(t, st2, ih.ID), wantIndexAgrees(t, st, sid); got != want {
		t.Fatalf("the import lists %d names, the source %d", got, want)
	}
	if r, err := st2.Fsck(FsckOptions{}); err != nil || len(r.Problems) != 0 {
		t.Fatalf("fsck of the import: %v %+v", err, r)
	}
}

// A store of the previous padfs (no index) gets one at open, in batches;
// until then and after, listings are the same.
func TestLiveIndexBuiltForOldStore(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sids []SessionID
	for s := 0; s < 2; s++ {
		h, err := st.CreateSession(fmt.Sprintf("old%d", s), 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		sids = append(sids, h.ID)
		d := mkdirT(t, st, h.ID, h.Root, "d")
		for i := 0; i < 100; i++ {
			touchT(t, st, h.ID, d, fmt.Sprintf("f%03d", i))
			if i%3 != 0 {
				if err := st.Remove(h.ID, d, fmt.Sprintf("f%03d", i), false); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	downgrade(t, st)
	st.Close()

	defer func(n int) { liveBatch = n }(liveBatch)
	liveBatch = 7
	batches := 0
	liveBatchDone = func(SessionID, liveState) { batches++ }
	defer func() { liveBatchDone = nil }()
	st, err = OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if batches < 2*(102/7) {
		t.Fatalf("the build took %d batches of %d chains", batches, liveBatch)
	}
	if f := storeFormat(t, st); f != FormatVersion { // this build's bolt raises it to 4
		t.Fatalf("format %d after the build", f)
	}
	for _, sid := range sids {
		var ls liveState
		if err := st.View(func(tx *ReadTx) error { var err error; ls, err = readLiveState(tx.r, sid); return err }); err != nil {
			t.Fatal(err)
		}
		if !ls.Complete || ls.Entries != 1+34 {
			t.Fatalf("index state of %s: %+v", sid, ls)
		}
		if n := wantIndexAgrees(t, st, sid); n != 1+34 {
			t.Fatalf("%s lists %d names", sid, n)
		}
	}
	if r, err := st.Fsck(FsckOptions{}); err != nil || len(r.Problems) != 0 {
		t.Fatalf("fsck after the build: %v %+v", err, r)
	}
}

// The index build is crash safe: killed (SIGKILL) between batches, the
// store reopens, the build resumes where it stopped and ends complete and
// right.
func TestLiveIndexBuildSurvivesKill(t *testing.T) {
	if dir := os.Getenv("PADFS_LIVEIDX_CHILD"); dir != "" {
		// Each batch waits for the parent's go-ahead, so that the kill
		// lands between two batches of the parent's choosing.
		in := bufio.NewReader(os.Stdin)
		liveBatch = 20
		liveBatchDone = func(sid SessionID, ls liveState) {
			fmt.Printf("batch %s %d\n", sid, ls.Entries)
			in.ReadString('\n')
		}
		if _, err := OpenDir(dir); err != nil {
			fmt.Println("error", err)
		}
		fmt.Println("done")
		os.Exit(0)
	}
	dir := t.TempDir()
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.CreateSession("old", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sid := h.ID
	ds := []Ino{mkdirT(t, st, sid, h.Root, "x"), mkdirT(t, st, sid, h.Root, "y")}
	for i := 0; i < 3000; i++ {
		d := ds[i%2]
		touchT(t, st, sid, d, fmt.Sprintf("n%04d", i))
		if i%10 != 0 {
			if err := st.Remove(sid, d, fmt.Sprintf("n%04d", i), false); err != nil {
				t.Fatal(err)
			}
		}
	}
	downgrade(t, st)
	st.Close()

	cmd := exec.Command(os.Args[0], "-test.run=^TestLiveIndexBuildSurvivesKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), "PADFS_LIVEIDX_CHILD="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	goAhead, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	seen := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "batch ") {
			if seen++; seen == 30 {
				cmd.Process.Signal(syscall.SIGKILL)
				break
			}
			fmt.Fprintln(goAhead, "go")
		}
		if sc.Text() == "done" || strings.HasPrefix(sc.Text(), "error") {
			t.Fatalf("the child finished before it was killed: %s", sc.Text())
		}
	}
	cmd.Wait()
	if seen != 30 {
		t.Fatalf("the child reported %d batches", seen)
	}

	// Mid-build on disk: the state says how far, not complete.
	b, err := bolt.Open(filepath.Join(dir, StoreFile), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wal.Open(filepath.Join(dir, WALDir), b, wal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var mid liveState
	if err := w.View(func(r kv.Reader) error { var err error; mid, err = readLiveState(r, sid); return err }); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if mid.Complete || len(mid.Next) == 0 || mid.Entries == 0 {
		t.Fatalf("index state after the kill: %+v", mid)
	}
	t.Logf("killed after %d batches: %d entries, next %q", seen, mid.Entries, mid.Next)

	st, err = OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var ls liveState
	if err := st.View(func(tx *ReadTx) error { var err error; ls, err = readLiveState(tx.r, sid); return err }); err != nil {
		t.Fatal(err)
	}
	if !ls.Complete || ls.Entries != 2+300 {
		t.Fatalf("index state after the reopen: %+v", ls)
	}
	if n := wantIndexAgrees(t, st, sid); n != 2+300 {
		t.Fatalf("lists %d names, want 302", n)
	}
	if r, err := st.Fsck(FsckOptions{}); err != nil || len(r.Problems) != 0 {
		t.Fatalf("fsck after the resumed build: %v %+v", err, r)
	}
}

// fsck compares the index with the chains; --repair rebuilds it.
func TestFsckChecksAndRebuildsLiveIndex(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	sid := h.ID
	for i := 0; i < 10; i++ {
		touchT(t, st, sid, h.Root, fmt.Sprintf("f%d", i))
	}
	if err := st.Remove(sid, h.Root, "f9", false); err != nil {
		t.Fatal(err)
	}
	if r, err := st.Fsck(FsckOptions{}); err != nil || len(r.Problems) != 0 {
		t.Fatalf("fsck of a sound store: %v %+v", err, r)
	}
	// Lose one key, keep a stale one, change a third.
	if err := st.kv.Update(func(tx kv.Txn) error {
		if err := tx.Delete(liveKey(sid, h.Root, "f1")); err != nil {
			return err
		}
		b, _ := encode(&liveEntry{Ino: 12345, HLC: 1})
		if err := tx.Put(liveKey(sid, h.Root, "f9"), b); err != nil {
			return err
		}
		return tx.Put(liveKey(sid, h.Root, "f2"), b)
	}); err != nil {
		t.Fatal(err)
	}
	r, err := st.Fsck(FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 1 || r.Problems[0].Kind != ProblemLive ||
		!strings.Contains(r.Problems[0].Detail, "1 live names missing, 1 names not live, 1 differ") {
		t.Fatalf("fsck of a damaged index: %+v", r.Problems)
	}
	r, err = st.Fsck(FsckOptions{Repair: true, QuarantineDir: filepath.Join(dir, QuarantineDir)})
	if err != nil {
		t.Fatal(err)
	}
	if r.Problems[0].Repaired != "live-entry index rebuilt from the entries: 9 live names" {
		t.Fatalf("repair: %+v", r.Problems)
	}
	if r, err := st.Fsck(FsckOptions{}); err != nil || len(r.Problems) != 0 {
		t.Fatalf("fsck after the repair: %v %+v", err, r)
	}
	if n := wantIndexAgrees(t, st, sid); n != 9 {
		t.Fatalf("%d names after the repair", n)
	}
}

// A hard forget deletes the session's index keys with the rest: no key
// under "L" sid and no byte of a name left on disk.
func TestHardForgetDeletesLiveKeys(t *testing.T) {
	e := lcOpen(t)
	const marker = "MARKER-live-name-4b1d"
	keep := e.session("keep")
	e.write(keep, "kept.txt", []byte("x"))
	sid := e.session("gone")
	e.write(sid, "d/"+marker, []byte("x"))
	if countKeys(t, e.st, key(pLive, sid[:])) < 3 {
		t.Fatal("no live-entry keys before the purge: the test proves nothing")
	}
	r, err := e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Purge(context.Background(), sid, r.Token, nil); err != nil {
		t.Fatal(err)
	}
	if n := countKeys(t, e.st, key(pLive, sid[:])); n != 0 {
		t.Fatalf("%d live-entry keys left after the purge", n)
	}
	if hits := rawscan.Hits(t, e.dir, marker); len(hits) > 0 {
		t.Fatalf("the name is still on disk in %v", hits)
	}
	if got := e.mustRead(keep, "kept.txt", Latest); got != "x" {
		t.Fatalf("the other session reads %q", got)
	}
	if countKeys(t, e.st, key(pLive, keep[:])) == 0 {
		t.Fatal("the other session's index went too")
	}
	_, err = e.st.Lookup(sid, 1, "d", Latest)
	if !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrNoSession) {
		t.Fatalf("lookup in the purged session: %v", err)
	}
}

// A store the previous padfs wrote (testdata/prev-build-v1.db.gz: format 1,
// no index; session "prev" with build outputs removed, a rename, a hard
// link, a directory made and removed, a directory renamed) opens, gets its
// index, and lists now and in the past as that build did.
func TestOpenStoreOfPreviousBuild(t *testing.T) {
	dir := t.TempDir()
	gz, err := os.Open("testdata/prev-build-v1.db.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	db, err := os.Create(filepath.Join(dir, StoreFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(db, zr); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if f := storeFormat(t, st); f != FormatVersion { // this build's bolt raises it to 4
		t.Fatalf("format %d after the open", f)
	}
	infos, err := st.Sessions()
	if err != nil || len(infos) != 1 || infos[0].Name != "prev" {
		t.Fatalf("sessions %+v %v", infos, err)
	}
	sid, root := infos[0].ID, infos[0].Root
	var out []string
	for i := 2; i <= 40; i += 2 {
		out = append(out, fmt.Sprintf("o%d.o", i))
	}
	sort.Strings(out)
	for path, want := range map[string][]string{
		".":   {"out", "src"},
		"src": {"f2-link.c", "f2.c", "f3.c", "f4.c", "f5.c", "main.c"},
		"out": out,
	} {
		n, err := st.Walk(sid, path, Latest)
		if err != nil {
			t.Fatal(err)
		}
		if got := names(t, st, sid, n.Ino, Latest); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s lists %v, want %v", path, got, want)
		}
	}
	if n := wantIndexAgrees(t, st, sid); n != 2+6+20 {
		t.Fatalf("%d names in the tree", n)
	}
	// As of the commit before "unlink tmp/a": the past from the chains.
	evs, err := st.Log(sid, LogFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var at HLC
	for _, ev := range evs {
		if ev.Op == "unlink" && ev.Path == "tmp/a" {
			at = ev.HLC - 1
		}
	}
	if got := names(t, st, sid, root, at); !reflect.DeepEqual(got, []string{"build", "src", "tmp"}) {
		t.Fatalf("the root as of before unlink tmp/a lists %v", got)
	}
	tmp, err := st.Walk(sid, "tmp", at)
	if err != nil {
		t.Fatal(err)
	}
	if got := names(t, st, sid, tmp.Ino, at); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("tmp as of before unlink tmp/a lists %v", got)
	}
	if r, err := st.Fsck(FsckOptions{}); err != nil || len(r.Problems) != 0 {
		t.Fatalf("fsck: %v %+v", err, r)
	}
}
