package mvcc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/rawscan"
	"github.com/padfs/padfs/mvcc/kv"
)

// Tests of the redaction in bounded batches (issue 10.7) on a real store.

// checkRedacted asserts that the redaction of purgeMarker in sid is
// complete: no job, not busy, content reads redacted (one small file and
// the chunked one), the log keeps its shape plus one session.redact
// event, and the marker is in no file of the data directory.
func checkRedacted(e *lcEnv, sid SessionID, logBefore []Event) {
	e.t.Helper()
	if jobs, err := e.st.Jobs(); err != nil || len(jobs) != 0 {
		e.t.Fatalf("jobs after the redaction: %+v %v", jobs, err)
	}
	if _, err := e.st.LiveHeader(sid); err != nil {
		e.t.Fatalf("session after the redaction: %v", err)
	}
	if got, want := e.mustRead(sid, "d07/f-7", Latest), "v2 7 "+DefaultRedaction+"\n"; got != want {
		e.t.Fatalf("d07/f-7 reads %q, want %q", got, want)
	}
	want := strings.ReplaceAll(string(bigText(11, 600<<10, purgeMarker, 5, 300<<10, 590<<10)), purgeMarker, DefaultRedaction)
	if e.mustRead(sid, "big/a.txt", Latest) != want {
		e.t.Fatal("big/a.txt not redacted exactly")
	}
	logAfter := e.events(sid, LogFilter{})
	if len(logAfter) != len(logBefore)+1 || logAfter[len(logAfter)-1].Op != OpRedact {
		e.t.Fatalf("log %d -> %d events, last %+v", len(logBefore), len(logAfter), logAfter[len(logAfter)-1])
	}
	for i, ev := range logBefore {
		if a := logAfter[i]; a.Seq != ev.Seq || a.HLC != ev.HLC || a.Op != ev.Op || a.Path != ev.Path {
			e.t.Fatalf("event %d changed shape: %+v -> %+v", ev.Seq, ev, a)
		}
	}
	if err := e.st.kv.View(func(r kv.Reader) error {
		p := jobKey(sid)
		return r.Scan(p, kv.PrefixEnd(p), func(k, _ []byte) (bool, error) { return false, fmt.Errorf("job key %q left", k) })
	}); err != nil {
		e.t.Fatal(err)
	}
	if hits := rawscan.Hits(e.t, e.dir, purgeMarker); len(hits) > 0 {
		e.t.Fatalf("redacted text still on disk in %v", hits)
	}
}

func TestRedactBatchesLetOtherWritersIn(t *testing.T) {
	e := lcOpen(t)
	other := e.session("other")
	sid := e.session("big")
	fillSession(e, sid, 1500, true)
	logBefore := e.events(sid, LogFilter{})
	r, err := e.st.PlanRedact(sid, purgeMarker, DefaultRedaction)
	if err != nil {
		t.Fatal(err)
	}
	commitsDuring(e, other, func() error {
		_, err := e.st.Redact(t.Context(), sid, purgeMarker, nil, r.Token, nil)
		return err
	})
	checkRedacted(e, sid, logBefore)
}

func TestRedactCancelledResumes(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("big")
	fillSession(e, sid, 600, true)
	logBefore := e.events(sid, LogFilter{})
	r, err := e.st.PlanRedact(sid, purgeMarker, DefaultRedaction)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	e.st.batchHook = func(_ string, n int64, _ time.Duration) {
		if n == 2 {
			cancel()
		}
	}
	if _, err := e.st.Redact(ctx, sid, purgeMarker, nil, r.Token, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("redaction cancelled after 2 batches: %v", err)
	}
	e.st.batchHook = nil
	if jobs, err := e.st.Jobs(); err != nil || len(jobs) != 1 || jobs[0].Kind != JobRedact || jobs[0].Batches != 2 {
		t.Fatalf("jobs after the cancel: %+v %v", jobs, err)
	}
	// Marked: not readable, mountable or writable meanwhile.
	if _, err := e.st.LiveHeader(sid); !errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "redacted") {
		t.Fatalf("mount check of a session being redacted: %v", err)
	}
	if _, err := e.st.Walk(sid, "d07/f-7", Latest); !errors.Is(err, ErrBusy) {
		t.Fatalf("read of a session being redacted: %v", err)
	}
	if _, err := e.st.Update(sid, func(t *WriteTx) error { t.SetEvent(Event{Op: "write"}); return nil }); !errors.Is(err, ErrBusy) {
		t.Fatalf("commit to a session being redacted: %v", err)
	}
	if _, err := e.st.PlanPurge(sid); !errors.Is(err, ErrBusy) {
		t.Fatalf("purge receipt of a session being redacted: %v", err)
	}
	if _, err := e.st.Redact(t.Context(), sid, purgeMarker, ptr("[X]"), r.Token, nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("redaction with another replacement: %v", err)
	}
	// fsck knows the job's records (the mark and the side records).
	rep, err := e.st.Fsck(FsckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range rep.Problems {
		if strings.HasPrefix(p.Key, `"W`) || strings.Contains(p.Detail, "prefix") {
			t.Fatalf("fsck during a redaction: %+v", p)
		}
	}
	// The same command finishes it.
	if _, err := e.st.Redact(t.Context(), sid, purgeMarker, nil, r.Token, nil); err != nil {
		t.Fatal(err)
	}
	checkRedacted(e, sid, logBefore)
}

const redactKillEnv = "PADFS_REDACT_KILL_DIR"

// TestRedactKillChild is the process TestRedactKilledResumes kills.
func TestRedactKillChild(t *testing.T) {
	dir := os.Getenv(redactKillEnv)
	if dir == "" {
		t.Skip("run by TestRedactKilledResumes")
	}
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.ResolveSession("big")
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.PlanRedact(h.ID, purgeMarker, DefaultRedaction)
	if err != nil {
		t.Fatal(err)
	}
	st.batchHook = func(_ string, n int64, _ time.Duration) { fmt.Printf("batch %d\n", n) }
	if _, err := st.Redact(context.Background(), h.ID, purgeMarker, nil, r.Token, nil); err != nil {
		t.Fatal(err)
	}
	fmt.Println("finished")
}

func TestRedactKilledResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process")
	}
	e := lcOpen(t)
	sid := e.session("big")
	fillSession(e, sid, 1500, true)
	logBefore := e.events(sid, LogFilter{})
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRedactKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), redactKillEnv+"="+e.dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	batches := 0
	for sc.Scan() && batches < 3 {
		_, _ = fmt.Sscanf(sc.Text(), "batch %d", &batches)
	}
	if batches < 3 {
		t.Fatalf("child ended after %d batches: %s", batches, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	st, err := OpenDir(e.dir)
	if err != nil {
		t.Fatalf("reopen after kill -9: %v", err)
	}
	e.st = st
	t.Cleanup(func() { st.Close() })
	jobs, err := st.Jobs()
	if err != nil || len(jobs) != 1 || jobs[0].Kind != JobRedact || jobs[0].Done >= jobs[0].Total {
		t.Fatalf("after kill -9 in batch %d: jobs %+v %v (the kill must land mid-redaction)", batches, jobs, err)
	}
	t.Logf("killed after batch %d; the job record says %d batches, %d of %d keys", batches, jobs[0].Batches, jobs[0].Done, jobs[0].Total)
	if _, err := st.FinishJob(t.Context(), sid, nil); err != nil {
		t.Fatal(err)
	}
	checkRedacted(e, sid, logBefore)
}
