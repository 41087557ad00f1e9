package mvcc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Names, event paths and symlink targets are bytes: Linux allows any byte
// but '/' and NUL in a name. A name that is not valid UTF-8 used to be
// committed (CBOR text) and then refused by the decoder, which made every
// reader of the session fail for good.
func TestNonUTF8Names(t *testing.T) {
	st, sid, root := openTest(t)
	writeFile(t, st, sid, root, "\xff", []byte("x\n"))
	d, err := st.Create(sid, root, "a\xfeb", Attr{Mode: sIFDIR | 0o755}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(sid, d.Ino, "l", Attr{Mode: sIFLNK | 0o777}, "\xfd"); err != nil {
		t.Fatal(err)
	}
	if err := st.Rename(sid, root, "\xff", d.Ino, "\xfc", 0); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, st, sid, "a\xfeb/\xfc", Latest); got != "x\n" {
		t.Fatalf("read a\\xfeb/\\xfc = %q", got)
	}
	l, err := st.Walk(sid, "a\xfeb/l", Latest)
	if err != nil {
		t.Fatal(err)
	}
	if l.Target != "\xfd" {
		t.Fatalf("symlink target %q, want \\xfd", l.Target)
	}
	ents, err := st.ReadDir(sid, d.Ino, Latest)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "l,\xfc" {
		t.Fatalf("readdir = %q", names)
	}
	evs, err := st.Log(sid, LogFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, ev := range evs {
		paths = append(paths, string(ev.Op)+" "+ev.Path+" "+ev.Path2)
	}
	want := []string{"create \xff ", "write \xff ", "mkdir a\xfeb ", "symlink a\xfeb/l \xfd", "rename \xff a\xfeb/\xfc"}
	if got := strings.Join(paths[len(paths)-len(want):], "|"); got != strings.Join(want, "|") {
		t.Fatalf("events:\n%q\nwant\n%q", got, strings.Join(want, "|"))
	}
	if _, err := st.Sessions(); err != nil {
		t.Fatal(err)
	}
	if err := st.Remove(sid, d.Ino, "\xfc", false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Walk(sid, "a\xfeb/\xfc", Latest); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after remove: %v", err)
	}
	if _, err := st.CreateSession("bad\xffname", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Sessions(); err != nil {
		t.Fatal(err)
	}
}

// A data directory written by a build whose decoder refused invalid UTF-8
// (testdata/bricked-v1.wal: its write-ahead log, replayed at open into a
// fresh padfs.db): session "bricked" with ok.txt, a file \xff, a directory
// a\xfeb and a symlink l -> \xfd in its root. That build could not list it.
func TestOpenBrickedStore(t *testing.T) {
	dir := t.TempDir()
	wal, err := os.ReadFile("testdata/bricked-v1.wal")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "wal"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "wal", "0000000000000001.wal"), wal, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	infos, err := st.Sessions()
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 1 || infos[0].Name != "bricked" {
		t.Fatalf("sessions = %+v", infos)
	}
	sid, root := infos[0].ID, infos[0].Root
	ents, err := st.ReadDir(sid, root, Latest)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if got := strings.Join(names, ","); got != "a\xfeb,l,ok.txt,\xff" {
		t.Fatalf("readdir = %q", got)
	}
	if l, err := st.Walk(sid, "l", Latest); err != nil || l.Target != "\xfd" {
		t.Fatalf("symlink: %v %+v", err, l)
	}
	evs, err := st.Log(sid, LogFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if last := evs[len(evs)-1]; last.Path != "l" || last.Path2 != "\xfd" {
		t.Fatalf("last event %+v", last)
	}
	// The store is writable again, under the bad names too.
	d, err := st.Walk(sid, "a\xfeb", Latest)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, st, sid, d.Ino, "\xff", []byte("again\n"))
	if got := readFile(t, st, sid, "a\xfeb/\xff", Latest); got != "again\n" {
		t.Fatalf("read back %q", got)
	}
}

// A record the decoder would refuse (here: nested past its depth limit)
// fails its commit before anything is written: no key, no event.
func TestUndecodableRecordCommitsNothing(t *testing.T) {
	st, sid, _ := openTest(t)
	before, err := st.Log(sid, LogFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var deep any = "leaf"
	for range 40 {
		deep = []any{deep}
	}
	key := metaKey("test-deep")
	_, err = st.Update(sid, func(t *WriteTx) error {
		t.SetEvent(Event{Op: "test"})
		return t.put(key, deep)
	})
	if err == nil || !strings.Contains(err.Error(), "would not decode") {
		t.Fatalf("Update = %v, want a refusal to encode", err)
	}
	after, err := st.Log(sid, LogFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("events %d -> %d: the failed commit left one", len(before), len(after))
	}
	if err := st.View(func(t *ReadTx) error {
		v, err := t.r.Get(key)
		if v != nil {
			return fmt.Errorf("key %q was written", key)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
