package mvcc

import (
	"bytes"
	"context"
	"testing"
)

// events lists sid's events without committing a held create first.
func heldEvents(t *testing.T, st *Store, sid SessionID) []Event {
	t.Helper()
	var out []Event
	if err := st.view(func(tx *ReadTx) error {
		return tx.Events(sid, 0, func(ev Event) bool { out = append(out, ev); return true })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCreateHeld: a held create is read at once by this Store, costs no
// commit until its first content, which commits both as one "create"; any
// other read or commit commits it first; inode numbers stay unique.
func TestCreateHeld(t *testing.T) {
	st, sid, root := openTest(t)
	a, held, err := st.CreateHeld(sid, root, "a", Attr{Mode: 0o644})
	if err != nil || held {
		t.Fatalf("first CreateHeld: held %v, %v; want a commit (it reserves inode numbers)", held, err)
	}
	n0 := len(heldEvents(t, st, sid))
	b, held, err := st.CreateHeld(sid, root, "b", Attr{Mode: 0o644})
	if err != nil || !held {
		t.Fatalf("second CreateHeld: held %v, %v", held, err)
	}
	if b.Ino == a.Ino {
		t.Fatalf("same inode number %d", b.Ino)
	}
	if n, err := st.LatestInode(sid, b.Ino); err != nil || n.Name != "b" || !n.IsRegular() {
		t.Fatalf("LatestInode of a held create: %+v %v", n, err)
	}
	if n, err := st.Lookup(sid, root, "b", Latest); err != nil || n.Ino != b.Ino {
		t.Fatalf("Lookup of a held create: %+v %v", n, err)
	}
	if len(heldEvents(t, st, sid)) != n0 {
		t.Fatal("a held create committed before its content")
	}
	n, err := st.WriteContent(context.Background(), sid, b.Ino, bytes.NewReader([]byte("bee\n")), nowNs())
	if err != nil {
		t.Fatal(err)
	}
	evs := heldEvents(t, st, sid)
	if len(evs) != n0+1 || evs[len(evs)-1].Op != OpCreate || evs[len(evs)-1].Size != 4 || evs[len(evs)-1].Path != "b" {
		t.Fatalf("events after the first content: %+v", evs[n0:])
	}
	if got, err := st.ReadAll(n); err != nil || string(got) != "bee\n" {
		t.Fatalf("content: %q %v", got, err)
	}
	// Held, then a listing: committed on its own first.
	c, held, err := st.CreateHeld(sid, root, "c", Attr{Mode: 0o600})
	if err != nil || !held {
		t.Fatalf("CreateHeld c: held %v, %v", held, err)
	}
	ds, err := st.ReadDir(sid, root, Latest)
	if err != nil || len(ds) != 3 {
		t.Fatalf("ReadDir: %v %v, want a, b, c", ds, err)
	}
	if err := st.Remove(sid, root, "c", false); err != nil {
		t.Fatalf("Remove of a create committed by a listing: %v", err)
	}
	if _, _, err := st.CreateHeld(sid, root, "a", Attr{Mode: 0o644}); err == nil {
		t.Fatal("CreateHeld over an existing name succeeded")
	}
	d, err := st.Create(sid, root, "d", Attr{Mode: sIFDIR | 0o755}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range []*Inode{a, b, c} {
		if x.Ino == d.Ino {
			t.Fatalf("mkdir reused inode number %d", d.Ino)
		}
	}
}

// TestCreateHeldClose: Close commits a held create.
func TestCreateHeldClose(t *testing.T) {
	dir := t.TempDir()
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.CreateSession("test", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, _, err := st.CreateHeld(h.ID, h.Root, name, Attr{Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	for _, name := range []string{"a", "b"} {
		if _, err := st2.Walk(h.ID, name, Latest); err != nil {
			t.Errorf("%s after Close and reopen: %v", name, err)
		}
	}
}
