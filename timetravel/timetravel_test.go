package timetravel_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/timetravel"
)

// history is a session on a real store with a few commits, each bracketed
// by st.Now() marks: commit i of the session's log lies strictly between
// marks[i] and marks[i+1].
type history struct {
	st     *mvcc.Store
	h      *mvcc.SessionHeader
	marks  []mvcc.HLC
	commit []string // what each commit was, for messages
}

func newHistory(t *testing.T) *history {
	t.Helper()
	st, err := storeopen.OpenDir(t.TempDir())
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	hs := &history{st: st}
	hs.mark(t)
	hs.h, err = st.CreateSession("tt", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	hs.done(t, "session create")
	return hs
}

// mark appends a fresh HLC from st.Now() to marks.
func (hs *history) mark(t *testing.T) mvcc.HLC {
	t.Helper()
	at, err := hs.st.Now()
	if err != nil {
		t.Fatalf("Now: %v", err)
	}
	hs.marks = append(hs.marks, at)
	return at
}

// done records that exactly one commit (what) has just returned.
func (hs *history) done(t *testing.T, what string) mvcc.HLC {
	t.Helper()
	hs.commit = append(hs.commit, what)
	return hs.mark(t)
}

func (hs *history) write(t *testing.T, ino mvcc.Ino, content string) {
	t.Helper()
	if _, err := hs.st.WriteContent(context.Background(), hs.h.ID, ino, bytes.NewReader([]byte(content)), time.Now().UnixNano()); err != nil {
		t.Fatalf("write %q: %v", content, err)
	}
	hs.done(t, "write "+content)
}

// putCheckpoint stores a checkpoint name -> at as one commit, the way
// CreateCheckpoint does but without its name check: a name that reads as
// a time cannot be created today, but Resolve must still prefer it.
func (hs *history) putCheckpoint(t *testing.T, name string, at mvcc.HLC) {
	t.Helper()
	if _, err := hs.st.Update(hs.h.ID, func(tx *mvcc.WriteTx) error {
		if err := tx.PutCheckpoint(name, at); err != nil {
			return err
		}
		tx.SetEvent(mvcc.Event{Op: mvcc.OpCheckpoint, Path: ".", Detail: name})
		return nil
	}); err != nil {
		t.Fatalf("put checkpoint %q: %v", name, err)
	}
	hs.done(t, "checkpoint "+name)
}

// build makes: session, file f, write v1, checkpoint v1-done, write v2.
// It returns the checkpoint's HLC and t1, an instant between v1-done and
// the v2 write.
func (hs *history) build(t *testing.T) (cp, t1 mvcc.HLC) {
	t.Helper()
	f, err := hs.st.Create(hs.h.ID, hs.h.Root, "f", mvcc.Attr{Mode: 0o644}, "")
	if err != nil {
		t.Fatalf("create f: %v", err)
	}
	hs.done(t, "create f")
	hs.write(t, f.Ino, "v1")
	cp, err = hs.st.CreateCheckpoint(hs.h.ID, "v1-done")
	if err != nil {
		t.Fatalf("checkpoint v1-done: %v", err)
	}
	t1 = hs.done(t, "checkpoint v1-done")
	hs.write(t, f.Ino, "v2")
	return cp, t1
}

func resolve(t *testing.T, st *mvcc.Store, sid mvcc.SessionID, name string) mvcc.HLC {
	t.Helper()
	at, err := timetravel.Resolve(st, sid, name)
	if err != nil {
		t.Fatalf("Resolve(%q): %v", name, err)
	}
	return at
}

func TestResolve(t *testing.T) {
	hs := newHistory(t)
	st, sid := hs.st, hs.h.ID
	cp, t1 := hs.build(t)
	t2 := hs.marks[len(hs.marks)-1] // after the v2 write

	// A checkpoint name: the HLC of its commit.
	if got := resolve(t, st, sid, "v1-done"); got != cp {
		t.Errorf("Resolve(v1-done) = %s; want the checkpoint's %s", got, cp)
	}
	// The canonical HLC text: exactly that HLC, to the nanosecond.
	if got := resolve(t, st, sid, t1.String()); got != t1 {
		t.Errorf("Resolve(%s) = %s; want the same HLC", t1, got)
	}
	// Any other RFC 3339 text: the instant it denotes.
	plus1 := t1.Time().In(time.FixedZone("+01:00", 3600)).Format(time.RFC3339Nano)
	if got := resolve(t, st, sid, plus1); got != t1 {
		t.Errorf("Resolve(%s) = %s; want %s", plus1, got, t1)
	}
	sec := t1.Time().Truncate(time.Second)
	if got, want := resolve(t, st, sid, sec.Format(time.RFC3339)), mvcc.HLC(sec.UnixNano()); got != want {
		t.Errorf("Resolve(%s) = %s; want %s", sec.Format(time.RFC3339), got, want)
	}

	// Precedence: a checkpoint whose name is also a canonical HLC or an
	// RFC 3339 time wins over reading the name as a time.
	for _, name := range []string{t2.String(), plus1} {
		if err := mvcc.ValidCheckpointName(name); !errors.Is(err, mvcc.ErrInvalid) {
			t.Errorf("ValidCheckpointName(%q) = %v; want ErrInvalid", name, err)
		}
		hs.putCheckpoint(t, name, hs.h.Created)
		if got := resolve(t, st, sid, name); got != hs.h.Created {
			t.Errorf("Resolve(%q) = %s; want the checkpoint's %s, not the time the name reads as", name, got, hs.h.Created)
		}
	}
	// The canonical text of an instant no checkpoint names still reads as
	// that HLC.
	if got := resolve(t, st, sid, t1.String()); got != t1 {
		t.Errorf("Resolve(%s) after adding checkpoints = %s", t1, got)
	}

	// Checkpoints belong to their session.
	other, err := st.CreateSession("other", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	if at, err := timetravel.Resolve(st, other.ID, "v1-done"); !errors.Is(err, mvcc.ErrNotFound) {
		t.Errorf("Resolve(v1-done) in another session = %s, %v; want ErrNotFound", at, err)
	}
}

func TestResolveMalformed(t *testing.T) {
	hs := newHistory(t)
	hs.build(t)
	for _, name := range []string{
		"no-such-checkpoint",
		"",
		"2026-13-45T00:00:00Z",          // no such date
		"2026-11-29 14:03:00Z",          // not RFC 3339 (space)
		" 2026-11-29T14:03:00Z",         // leading space
		"2026-11-29T14:03:00.123456789", // no offset
		"v1-done ",                      // not the checkpoint's name
	} {
		at, err := timetravel.Resolve(hs.st, hs.h.ID, name)
		if !errors.Is(err, mvcc.ErrNotFound) {
			t.Errorf("Resolve(%q) = %s, %v; want an error wrapping ErrNotFound", name, at, err)
			continue
		}
		if !strings.Contains(err.Error(), hs.h.ID.String()) || (name != "" && !strings.Contains(err.Error(), name)) {
			t.Errorf("Resolve(%q): %q should name the text and the session", name, err)
		}
	}
}

func TestPoints(t *testing.T) {
	hs := newHistory(t)
	cp, _ := hs.build(t)
	hs.putCheckpoint(t, "z-shadow", hs.h.Created)
	cpAfter, err := hs.st.CreateCheckpoint(hs.h.ID, "after-v2")
	if err != nil {
		t.Fatal(err)
	}
	hs.done(t, "checkpoint after-v2")

	pts, err := timetravel.Points(hs.st, hs.h.ID)
	if err != nil {
		t.Fatal(err)
	}
	// First the commits Listed picks, oldest first: these commits came
	// within a second, so the first, the last of the window (which is
	// the last) and nothing else. Then the checkpoints.
	n := 2
	if len(pts) < n {
		t.Fatalf("%d points: %v", len(pts), pts)
	}
	for i, p := range pts[:n] {
		if p.Name != p.HLC.String() {
			t.Errorf("point %d is named %q; want its canonical HLC %s", i, p.Name, p.HLC)
		}
	}
	if pts[0].HLC != hs.h.Created || pts[1].HLC != cpAfter {
		t.Errorf("commit points %v; want the session's creation %s and its last commit %s", pts[:n], hs.h.Created, cpAfter)
	}
	// Then the checkpoints, each with the HLC it names.
	got := map[string]mvcc.HLC{}
	for _, p := range pts[n:] {
		got[p.Name] = p.HLC
	}
	want := map[string]mvcc.HLC{"v1-done": cp, "z-shadow": hs.h.Created, "after-v2": cpAfter}
	if len(pts[n:]) != len(want) || !maps.Equal(got, want) {
		t.Errorf("checkpoints after the commits: %v; want %v", pts[n:], want)
	}
	// Every commit still resolves by its HLC text, listed or not.
	for i, c := range hs.commit {
		mid := hs.marks[i] + (hs.marks[i+1]-hs.marks[i])/2
		if at, err := timetravel.Resolve(hs.st, hs.h.ID, mid.String()); err != nil || at != mid {
			t.Errorf("Resolve(%s) (within commit %q) = %s, %v", mid, c, at, err)
		}
	}

	// A session with one commit and no checkpoint: one point.
	other, err := hs.st.CreateSession("other", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	if pts, err := timetravel.Points(hs.st, other.ID); err != nil || len(pts) != 1 || pts[0].HLC != other.Created {
		t.Errorf("Points of a new session = %v, %v; want its creation at %s", pts, err, other.Created)
	}
}
