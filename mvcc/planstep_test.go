package mvcc

import (
	"errors"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/rawscan"
)

// withPlanStep makes every read of a job's plan a step of its own (a pause
// and a check after each) for the test.
func withPlanStep(t *testing.T, d time.Duration) {
	old := planStep
	planStep = d
	t.Cleanup(func() { planStep = old })
}

// TestPlanPausesBetweenReadTransactions: a hard forget's and a
// redaction's plans read the session in steps with pauses between them
// (before, one read transaction without a pause: a writer of another
// session waited for a CPU meanwhile), and a commit to the session in a
// pause is noticed: the receipt is read again, and Purge or Redact with
// the token from before refuses (ErrToken) and changes nothing.
func TestPlanPausesBetweenReadTransactions(t *testing.T) {
	withPlanStep(t, 0)
	e := lcOpen(t)
	sid := e.session("big")
	other := e.session("other")
	e.write(other, "keep.txt", []byte("other's\n"))
	fillSession(e, sid, 40, true)
	var pauses int64
	var write func()
	e.st.jobHook = func(event string, n int64, _ time.Duration) {
		if event == "plan" {
			pauses++
			if n == 5 && write != nil {
				w := write
				write = nil
				w() // in the plan's pause: the session changes
			}
		}
	}
	r, err := e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	if pauses < 10 {
		t.Fatalf("PlanPurge paused %d times reading %d keys", pauses, r.Keys)
	}
	pr, err := e.st.PlanRedact(sid, purgeMarker, DefaultRedaction)
	if err != nil {
		t.Fatal(err)
	}
	// A commit during the plan of Purge: the receipt is stale.
	write = func() { e.write(sid, "late.txt", []byte("late "+purgeMarker+"\n")) }
	if _, err := e.st.Purge(t.Context(), sid, r.Token, nil); !errors.Is(err, ErrToken) {
		t.Fatalf("Purge after a commit in its plan: %v, want ErrToken", err)
	}
	write = func() { e.write(sid, "later.txt", []byte("later\n")) }
	if _, err := e.st.Redact(t.Context(), sid, purgeMarker, nil, pr.Token, nil); !errors.Is(err, ErrToken) {
		t.Fatalf("Redact after a commit in its plan: %v, want ErrToken", err)
	}
	if got := e.mustRead(sid, "late.txt", Latest); got != "late "+purgeMarker+"\n" {
		t.Fatalf("late.txt after the refused jobs: %q", got)
	}
	// A commit during PlanPurge: it reads the session again and its
	// receipt is that of the state after the commit.
	write = func() { e.write(sid, "latest.txt", []byte("latest\n")) }
	r2, err := e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	if r2.Files != r.Files+3 {
		t.Fatalf("receipt after commits during the plan: %d files, want %d", r2.Files, r.Files+3)
	}
	if _, err := e.st.Purge(t.Context(), sid, r2.Token, nil); err != nil {
		t.Fatal(err)
	}
	e.settle()
	checkPurged(e, sid, other, "keep.txt", "other's\n")
	if hits := rawscan.Hits(t, e.dir, purgeMarker); len(hits) > 0 {
		t.Fatalf("marker left on disk: %v", hits)
	}
}
