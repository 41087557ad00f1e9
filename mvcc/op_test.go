package mvcc

import (
	"slices"
	"testing"
)

// The ops' text is the on-disk format: a renamed constant must not change
// what old logs decode to.
func TestOpText(t *testing.T) {
	want := map[Op]string{OpCreate: "create", OpMkdir: "mkdir", OpSymlink: "symlink", OpLink: "link",
		OpUnlink: "unlink", OpRmdir: "rmdir", OpRename: "rename", OpExchange: "exchange", OpWrite: "write",
		OpTruncate: "truncate", OpSetattr: "setattr", OpChmod: "chmod", OpChown: "chown", OpUtimens: "utimens",
		OpSetxattr: "setxattr", OpRemovexattr: "removexattr", OpRestore: "restore",
		OpSessionCreate: "session.create", OpFork: "session.fork", OpCheckpoint: "session.checkpoint",
		OpForget: "session.forget", OpRedact: "session.redact", OpSessionRename: "session.rename",
		OpImport: "session.import"}
	if len(want) != len(knownOps) {
		t.Errorf("%d known ops, the test names %d", len(knownOps), len(want))
	}
	for op, text := range want {
		if string(op) != text || !op.Known() {
			t.Errorf("op %q: want text %q, known", op, text)
		}
	}
	if Op("session.frobnicate").Known() || Op("").Known() {
		t.Errorf("an unknown op is Known")
	}
}

// A restore of several paths records them in Also; an event written before
// Also existed (roots only in Detail) says it cannot name them.
func TestRestoreEventRoots(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("r")
	e.buildTree(sid)
	at := e.now()
	e.messUp(sid)
	if _, err := e.st.Restore(sid, at, RestoreOptions{Paths: []string{"d", "newdir/x"}}); err != nil {
		t.Fatal(err)
	}
	evs, err := e.st.Log(sid, LogFilter{})
	must(t, err)
	ev := evs[len(evs)-1]
	if roots, ok := ev.RestoredRoots(); ev.Op != OpRestore || !ok || !slices.Equal(roots, []string{"d", "newdir/x"}) {
		t.Errorf("restore event %+v: roots %q %v", ev, roots, ok)
	}
	old := Event{Op: OpRestore, Path: "d", Detail: "as of " + at.String() + "; also newdir/x"}
	if roots, ok := old.RestoredRoots(); ok {
		t.Errorf("old multi-root event: roots %q, want not ok", roots)
	}
	one := Event{Op: OpRestore, Path: ".", Detail: "as of " + at.String()}
	if roots, ok := one.RestoredRoots(); !ok || !slices.Equal(roots, []string{"."}) {
		t.Errorf("single-root event: roots %q %v", roots, ok)
	}
}

// Watch's cancel unregisters its function only: later commits call the
// others, not it.
func TestWatchCancel(t *testing.T) {
	e := lcOpen(t)
	var a, b []Op
	cancelA := e.st.Watch(func(_ SessionID, ev Event) { a = append(a, ev.Op) })
	e.st.Watch(func(_ SessionID, ev Event) { b = append(b, ev.Op) })
	e.session("one")
	cancelA()
	cancelA() // idempotent
	e.session("two")
	if !slices.Equal(a, []Op{OpSessionCreate}) || !slices.Equal(b, []Op{OpSessionCreate, OpSessionCreate}) {
		t.Errorf("after cancelling the first watcher: it heard %q, the other %q", a, b)
	}
}
