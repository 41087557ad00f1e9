package search

import (
	"testing"
	"time"
)

// TestSettleCountsFromFirstCommit: the settle delay runs from the first
// commit a pass has not taken, not from the end of the previous pass:
// commits that came during a long catch-up (tar -x) have waited long
// enough, and the next pass starts at once instead of leaving the worker
// idle for settleMax. The delays here are an hour, so only the age of the
// commits can start the pass (dirtySince set as a pass two hours long would
// leave it).
func TestSettleCountsFromFirstCommit(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a": []byte("needle\n")})
	ix, err := OpenWith(data, st, Options{Background: true, settleQuiet: time.Hour, settleMax: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// The commits wait: the settle counts from its own start, an hour.
	putFile(t, st, sid, "b", []byte("needle too\n"))
	// As a pass of two hours would leave them: they waited long enough,
	// and the next wake (a commit of the burst; here a kick) starts the
	// pass.
	ix.mu.Lock()
	ix.dirtySince = time.Now().Add(-2 * time.Hour)
	ix.mu.Unlock()
	ix.kick()
	waitCovered(t, ix, st, sid)
	out, code, stats := padGrep(t, ix, sid, []string{"-rn", "needle"})
	if out != "a:1:needle\nb:1:needle too\n" || code != 0 || stats.Scanned || stats.Degraded {
		t.Fatalf("exit %d %+v:\n%s", code, stats, out)
	}
}
