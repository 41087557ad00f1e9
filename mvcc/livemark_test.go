package mvcc

import (
	"context"
	"errors"
	"testing"
	"time"
)

// commitOK commits a file creation to sid and checks that the commit left
// the live mark on sid, so that the next commit to sid would skip the
// session check if nothing moved the high-water mark.
func commitOK(t *testing.T, st *Store, sid SessionID, root Ino, name string) {
	t.Helper()
	if _, err := st.Create(sid, root, name, Attr{Mode: 0o100644}, ""); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	if m := st.lastLive.Load(); m == nil || m.sid != sid {
		t.Fatalf("create %s left live mark %+v, want one on %s", name, m, sid)
	}
}

// TestLiveMarkForget: the live mark of the session's last commit does not
// let a commit in after the session is forgotten.
func TestLiveMarkForget(t *testing.T) {
	st, sid, root := openTest(t)
	commitOK(t, st, sid, root, "a")
	commitOK(t, st, sid, root, "b") // this one went through the mark
	if _, err := st.Forget(sid); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(sid, root, "c", Attr{Mode: 0o100644}, ""); !errors.Is(err, ErrForgotten) {
		t.Fatalf("commit to a forgotten session right after a marked commit: %v, want ErrForgotten", err)
	}
}

// TestLiveMarkBusy: nor after a purge marked it (and was cut short), nor
// after a redaction marked it.
func TestLiveMarkBusy(t *testing.T) {
	e := lcOpen(t)
	for _, kind := range []string{JobPurge, JobRedact} {
		sid := e.session("s-" + kind)
		fillSession(e, sid, 600, kind == JobRedact)
		h, err := e.st.Header(sid)
		if err != nil {
			t.Fatal(err)
		}
		commitOK(t, e.st, sid, h.Root, "last")
		ctx, cancel := context.WithCancel(t.Context())
		e.st.batchHook = func(string, int64, time.Duration) { cancel() }
		switch kind {
		case JobPurge:
			r, err := e.st.PlanPurge(sid)
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.st.Purge(ctx, sid, r.Token, nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("purge cancelled after one batch: %v", err)
			}
		case JobRedact:
			r, err := e.st.PlanRedact(sid, purgeMarker, DefaultRedaction)
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.st.Redact(ctx, sid, purgeMarker, nil, r.Token, nil)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("redaction cancelled after one batch: %v", err)
			}
		}
		cancel()
		e.st.batchHook = nil
		if _, err := e.st.Create(sid, h.Root, "after", Attr{Mode: 0o100644}, ""); !errors.Is(err, ErrBusy) {
			t.Fatalf("commit to a session marked for %s right after a marked commit: %v, want ErrBusy", kind, err)
		}
	}
}

// TestLiveMarkOtherProcess: another process sharing the store forgets the
// session between two commits of this one.
func TestLiveMarkOtherProcess(t *testing.T) {
	a, b := openShared(t)
	h, err := a.CreateSession("s", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	commitOK(t, a, h.ID, h.Root, "a")
	commitOK(t, a, h.ID, h.Root, "b")
	if _, err := b.Forget(h.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Create(h.ID, h.Root, "c", Attr{Mode: 0o100644}, ""); !errors.Is(err, ErrForgotten) {
		t.Fatalf("commit after another process forgot the session: %v, want ErrForgotten", err)
	}
}
