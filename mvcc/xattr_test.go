package mvcc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/padfs/padfs/internal/rawscan"
	"github.com/padfs/padfs/mvcc/kv"
)

// storedBytes sums the keys and values of the whole store.
func storedBytes(t *testing.T, st *Store) int {
	t.Helper()
	n := 0
	if err := st.View(func(tx *ReadTx) error {
		return tx.r.Scan([]byte{0}, nil, func(k, v []byte) (bool, error) {
			n += len(k) + len(v)
			return true, nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// Issue 8 item 13: a setxattr on a file with ~70 KB of attributes stored the
// whole set again (200 calls grew the store by ~15 MB). Now each call is a
// small record, an inode version without the set and an event. (This test
// fails on the inline layout.)
func TestSetxattrWritesOnlyTheChange(t *testing.T) {
	st, sid, root := openTest(t)
	f := writeFile(t, st, sid, root, "f", []byte("x"))
	for i := 0; i < 70; i++ {
		if err := st.SetXattr(sid, f.Ino, fmt.Sprintf("user.big%02d", i), bytes.Repeat([]byte{'a' + byte(i%26)}, 1000), 0); err != nil {
			t.Fatal(err)
		}
	}
	before := storedBytes(t, st)
	const calls = 200
	for i := 0; i < calls; i++ {
		if err := st.SetXattr(sid, f.Ino, fmt.Sprintf("user.small%04d", i), bytes.Repeat([]byte{'v'}, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	grown := storedBytes(t, st) - before
	if per := grown / calls; per > 1024 {
		t.Fatalf("each 100-byte setxattr stored %d bytes (%d in all for %d calls)", per, grown, calls)
	}
	t.Logf("%d setxattr of 100 bytes on a 70 KB set: %d bytes (%d per call)", calls, grown, grown/calls)
}

func mustXattrs(t *testing.T, st *Store, sid SessionID, ino Ino, at HLC) map[string]string {
	t.Helper()
	m, err := st.Xattrs(sid, ino, at)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	names, err := st.XattrNames(sid, ino, at)
	if err != nil || len(names) != len(out) {
		t.Fatalf("XattrNames %v %v for %v", names, err, out)
	}
	for _, n := range names {
		v, ok, err := st.Xattr(sid, ino, n, at)
		if err != nil || !ok || string(v) != out[n] {
			t.Fatalf("Xattr %q: %q %v %v; the set says %q", n, v, ok, err, out[n])
		}
	}
	return out
}

func wantXattrs(t *testing.T, what string, got map[string]string, pairs ...string) {
	t.Helper()
	want := map[string]string{}
	for i := 0; i < len(pairs); i += 2 {
		want[pairs[i]] = pairs[i+1]
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
}

func storeFormat(t *testing.T, st *Store) uint64 {
	t.Helper()
	var f uint64
	if err := st.View(func(tx *ReadTx) error {
		v, err := tx.r.Get(metaKey("format"))
		if len(v) == 8 {
			f = binary.BigEndian.Uint64(v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return f
}

// setStoreFormat writes the store's format record: a session's live-entry
// index raised it to 3, and these tests follow the xattr formats below.
func setStoreFormat(t *testing.T, st *Store, f uint64) {
	t.Helper()
	if err := st.kv.Update(func(tx kv.Txn) error { return tx.Put(metaKey("format"), u64(f)) }); err != nil {
		t.Fatal(err)
	}
}

func TestXattrVersionsAsOfAndRemove(t *testing.T) {
	st, sid, root := openTest(t)
	setStoreFormat(t, st, formatInline)
	f := writeFile(t, st, sid, root, "f", []byte("x"))
	if got := storeFormat(t, st); got != formatInline {
		t.Fatalf("a new store is format %d, want %d until its first keyed xattr", got, formatInline)
	}
	set := func(name, val string) HLC {
		t.Helper()
		var v []byte
		if val != "<rm>" {
			v = []byte(val)
		}
		if err := st.SetXattr(sid, f.Ino, name, v, 0); err != nil {
			t.Fatal(err)
		}
		return st.LastHLC()
	}
	t0 := st.LastHLC()
	t1 := set("user.a", "1")
	if got := storeFormat(t, st); got != formatXattrChains {
		t.Fatalf("format after the first keyed xattr: %d", got)
	}
	t2 := set("user.b", "")
	inodes, xattrs := countPrefix(t, st, pInode), countPrefix(t, st, pXattr)
	t3 := set("user.a", "3")
	if di, dx := countPrefix(t, st, pInode)-inodes, countPrefix(t, st, pXattr)-xattrs; di != 1 || dx != 1 {
		t.Fatalf("one setxattr wrote %d inode and %d xattr versions, want 1 and 1", di, dx)
	}
	t4 := set("user.b", "<rm>")
	wantXattrs(t, "as of t0", mustXattrs(t, st, sid, f.Ino, t0))
	wantXattrs(t, "as of t1", mustXattrs(t, st, sid, f.Ino, t1), "user.a", "1")
	wantXattrs(t, "as of t2", mustXattrs(t, st, sid, f.Ino, t2), "user.a", "1", "user.b", "")
	wantXattrs(t, "as of t3", mustXattrs(t, st, sid, f.Ino, t3), "user.a", "3", "user.b", "")
	wantXattrs(t, "as of t4", mustXattrs(t, st, sid, f.Ino, t4), "user.a", "3")
	wantXattrs(t, "latest", mustXattrs(t, st, sid, f.Ino, Latest), "user.a", "3")
	if _, ok, err := st.Xattr(sid, f.Ino, "user.b", Latest); ok || err != nil {
		t.Fatalf("removed user.b: %v %v", ok, err)
	}
	// ctime moves with every change; the inode versions carry no set.
	n2, _ := st.InodeAt(sid, f.Ino, t2)
	n3, _ := st.InodeAt(sid, f.Ino, t3)
	if n3.Ctime < n2.Ctime || n3.HLC != t3 || len(n3.Xattrs) != 0 {
		t.Fatalf("inode at t3: ctime %d (t2 %d), hlc %s (want %s), inline %v", n3.Ctime, n2.Ctime, n3.HLC, t3, n3.Xattrs)
	}
	// setxattr(2) flags and errors.
	if err := st.SetXattr(sid, f.Ino, "user.a", []byte("x"), XattrCreate); !errors.Is(err, ErrExist) {
		t.Errorf("XATTR_CREATE of an existing attribute: %v", err)
	}
	if err := st.SetXattr(sid, f.Ino, "user.b", []byte("x"), XattrReplace); !errors.Is(err, ErrNoAttr) {
		t.Errorf("XATTR_REPLACE of a removed attribute: %v", err)
	}
	if err := st.SetXattr(sid, f.Ino, "user.b", nil, 0); !errors.Is(err, ErrNoAttr) {
		t.Errorf("remove of a removed attribute: %v", err)
	}
	if _, _, err := st.Xattr(sid, 999999, "user.a", Latest); !errors.Is(err, ErrNotFound) {
		t.Errorf("xattr of a missing inode: %v", err)
	}
	// Writes keep the set; a name that sorts as a prefix of another stays apart.
	writeFile(t, st, sid, root, "f", []byte("new content"))
	set("user.a.b", "ab")
	wantXattrs(t, "after a write", mustXattrs(t, st, sid, f.Ino, Latest), "user.a", "3", "user.a.b", "ab")
}

// putInlineXattrs writes what the format 1 code wrote for a setxattr: a new
// inode version carrying the whole set inline.
func putInlineXattrs(t *testing.T, st *Store, sid SessionID, ino Ino, set map[string][]byte) HLC {
	t.Helper()
	at, err := st.Update(sid, func(tx *WriteTx) error {
		n, err := tx.Latest(ino)
		if err != nil {
			return err
		}
		n.Xattrs, n.Ctime = set, nowNs()
		if err := tx.PutInode(n); err != nil {
			return err
		}
		tx.SetEvent(Event{Op: "setxattr", Ino: ino, Detail: "inline"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestInlineXattrsOfOldStoresReadAndMove(t *testing.T) {
	dir := t.TempDir()
	st, err := openDirFlat(dir) // bolt keeping the format the store has
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.CreateSession("old", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	setStoreFormat(t, st, formatInline)
	sid := h.ID
	f := writeFile(t, st, sid, h.Root, "f", []byte("x"))
	t1 := putInlineXattrs(t, st, sid, f.Ino, map[string][]byte{"user.a": []byte("1"), "user.b": []byte("2"), "user.e": {}})
	t2 := putInlineXattrs(t, st, sid, f.Ino, map[string][]byte{"user.a": []byte("1"), "user.b": []byte("22"), "user.c": []byte("3"), "user.e": {}})
	writeFile(t, st, sid, h.Root, "f", []byte("a write keeps the inline set")) // as the old code did
	st.Close()

	// Reopened by this build: the inline sets read, the format stays 1.
	if st, err = openDirFlat(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if got := storeFormat(t, st); got != formatInline {
		t.Fatalf("format %d after reading an old store", got)
	}
	wantXattrs(t, "inline as of t1", mustXattrs(t, st, sid, f.Ino, t1), "user.a", "1", "user.b", "2", "user.e", "")
	wantXattrs(t, "inline latest", mustXattrs(t, st, sid, f.Ino, Latest), "user.a", "1", "user.b", "22", "user.c", "3", "user.e", "")
	if err := st.SetXattr(sid, f.Ino, "user.a", []byte("x"), XattrCreate); !errors.Is(err, ErrExist) {
		t.Fatalf("XATTR_CREATE of an inline attribute: %v", err)
	}
	if got := storeFormat(t, st); got != formatInline {
		t.Fatalf("a refused setxattr raised the format to %d", got)
	}

	// The first change moves the set into chains and raises the format.
	if err := st.SetXattr(sid, f.Ino, "user.b", nil, 0); err != nil {
		t.Fatal(err)
	}
	t3 := st.LastHLC()
	if got := storeFormat(t, st); got != formatXattrChains {
		t.Fatalf("format %d after the first keyed xattr", got)
	}
	if n, _ := st.LatestInode(sid, f.Ino); len(n.Xattrs) != 0 {
		t.Fatalf("the new inode version still carries the set inline: %v", n.Xattrs)
	}
	if err := st.SetXattr(sid, f.Ino, "user.d", []byte("4"), 0); err != nil {
		t.Fatal(err)
	}
	wantXattrs(t, "moved, as of t3", mustXattrs(t, st, sid, f.Ino, t3), "user.a", "1", "user.c", "3", "user.e", "")
	wantXattrs(t, "moved, latest", mustXattrs(t, st, sid, f.Ino, Latest), "user.a", "1", "user.c", "3", "user.d", "4", "user.e", "")
	wantXattrs(t, "history as of t2", mustXattrs(t, st, sid, f.Ino, t2), "user.a", "1", "user.b", "22", "user.c", "3", "user.e", "")

	// And after a reopen.
	st.Close()
	if st, err = openDirFlat(dir); err != nil {
		t.Fatal(err)
	}
	wantXattrs(t, "reopened, as of t3", mustXattrs(t, st, sid, f.Ino, t3), "user.a", "1", "user.c", "3", "user.e", "")
}

func TestXattrsForkAndRedact(t *testing.T) {
	e := lcOpen(t)
	const needle = "xattr-SECRET-9931"
	src := e.session("src")
	e.write(src, "a.txt", []byte("a\n"))
	old := e.write(src, "old.txt", []byte("old\n"))
	a, _ := e.st.Walk(src, "a.txt", Latest)
	if err := e.st.SetXattr(src, a.Ino, "user.k", []byte("v1 "+needle), 0); err != nil {
		t.Fatal(err)
	}
	putInlineXattrs(t, e.st, src, old.Ino, map[string][]byte{"user.inline": []byte("in " + needle)})
	t1 := e.now()
	if err := e.st.SetXattr(src, a.Ino, "user.k", []byte("v2"), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetXattr(src, a.Ino, "user.more", []byte("m"), 0); err != nil {
		t.Fatal(err)
	}

	// A fork copies the set as of its time, keyed, for the new inode.
	for _, c := range []struct {
		at   HLC
		want []string
	}{{t1, []string{"user.k", "v1 " + needle}}, {Latest, []string{"user.k", "v2", "user.more", "m"}}} {
		f, err := e.st.Fork(t.Context(), src, c.at, ForkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fa, _ := e.st.Walk(f.ID, "a.txt", Latest)
		wantXattrs(t, "fork as of "+c.at.String(), mustXattrs(t, e.st, f.ID, fa.Ino, Latest), c.want...)
		fo, _ := e.st.Walk(f.ID, "old.txt", Latest)
		wantXattrs(t, "fork of an inline set", mustXattrs(t, e.st, f.ID, fo.Ino, Latest), "user.inline", "in "+needle)
		if fo.Xattrs != nil {
			t.Fatalf("fork wrote the set inline: %v", fo.Xattrs)
		}
		if err := e.st.SetXattr(f.ID, fa.Ino, "user.k", []byte("fork only"), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := e.st.Purge(t.Context(), f.ID, mustPlanPurge(t, e.st, f.ID), nil); err != nil {
			t.Fatal(err)
		}
	}
	wantXattrs(t, "source after fork edits", mustXattrs(t, e.st, src, a.Ino, Latest), "user.k", "v2", "user.more", "m")

	// Redaction rewrites keyed and inline values in every version.
	r, err := e.st.PlanRedact(src, needle, DefaultRedaction)
	if err != nil {
		t.Fatal(err)
	}
	if r.Files != 2 || r.Versions != 2 || r.Occurrences != 2 {
		t.Fatalf("receipt %+v", r)
	}
	if _, err := e.st.Redact(t.Context(), src, needle, nil, r.Token, nil); err != nil {
		t.Fatal(err)
	}
	wantXattrs(t, "redacted as of t1", mustXattrs(t, e.st, src, a.Ino, t1), "user.k", "v1 "+DefaultRedaction)
	wantXattrs(t, "redacted inline", mustXattrs(t, e.st, src, old.Ino, Latest), "user.inline", "in "+DefaultRedaction)
	if hits := rawscan.Hits(t, e.dir, needle); len(hits) > 0 {
		t.Fatalf("needle still on disk in %v", hits)
	}
	if _, err := e.st.PlanRedact(src, "user.mo", DefaultRedaction); !errors.Is(err, ErrInvalid) {
		t.Fatalf("needle in an xattr name: %v", err)
	}
}

func mustPlanPurge(t *testing.T, st *Store, sid SessionID) string {
	t.Helper()
	r, err := st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	return r.Token
}
