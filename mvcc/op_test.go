package mvcc

import (
	"context"
	"errors"
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
	if _, err := e.st.Restore(context.Background(), sid, at, RestoreOptions{Paths: []string{"d", "newdir/x"}}); err != nil {
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

// A cancelled context ends Fork (nothing committed) and Diff with its
// error.
func TestForkDiffCancelled(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("src")
	e.buildTree(sid)
	before, err := e.st.Sessions()
	must(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := e.st.Fork(ctx, sid, Latest, ForkOptions{Name: "copy"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Fork with a cancelled context: %v, want context.Canceled", err)
	}
	if after, err := e.st.Sessions(); err != nil || len(after) != len(before) {
		t.Errorf("a cancelled Fork left %d sessions (was %d), %v", len(after), len(before), err)
	}
	if _, err := e.st.Diff(ctx, sid, 0, Latest); !errors.Is(err, context.Canceled) {
		t.Errorf("Diff with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := e.st.Fork(t.Context(), sid, Latest, ForkOptions{Name: "copy"}); err != nil {
		t.Errorf("Fork after the cancelled one: %v", err)
	}
}

// PutContent of a large file stops when its context ends: the reader is
// not read to its end.
func TestPutContentCancelled(t *testing.T) {
	e := lcOpen(t)
	ctx, cancel := context.WithCancel(t.Context())
	r := &cancelAfter{n: 4 << 20, cancel: cancel}
	if _, err := e.st.PutContent(ctx, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("PutContent cancelled at 4 MiB: %v, want context.Canceled", err)
	}
	if r.read >= 64<<20 {
		t.Errorf("read %d bytes of an endless reader after the cancel", r.read)
	}
}

// cancelAfter is an endless reader of pseudo-random bytes that calls
// cancel once n bytes were read.
type cancelAfter struct {
	n, read int
	cancel  func()
	x       uint64
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	for i := range p {
		c.x = c.x*6364136223846793005 + 1442695040888963407
		p[i] = byte(c.x >> 56)
	}
	c.read += len(p)
	if c.read >= c.n {
		c.cancel()
	}
	return len(p), nil
}
