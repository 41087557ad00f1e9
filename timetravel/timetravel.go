// Package timetravel resolves the names under a session's .asof/ directory
// into HLCs and lists a session's commit points. A name is, in order of
// precedence: a checkpoint name, the canonical HLC text, or any RFC 3339
// time (meaning the latest state at or before it).
package timetravel

import (
	"errors"
	"fmt"
	"time"

	"github.com/padfs/padfs/mvcc"
)

// Resolve turns a .asof/ name into the HLC whose state it shows.
func Resolve(st *mvcc.Store, sid mvcc.SessionID, name string) (mvcc.HLC, error) {
	var at mvcc.HLC
	err := st.View(func(t *mvcc.ReadTx) error {
		h, ok, err := t.Checkpoint(sid, name)
		if err != nil || ok {
			at = h
			return err
		}
		at, err = mvcc.ParseHLC(name)
		if errors.Is(err, mvcc.ErrHLCRange) {
			return err // a time, but one no HLC stands for: say so
		}
		if err != nil {
			return fmt.Errorf("%w: %q is neither an HLC, an RFC 3339 time nor a checkpoint of session %s",
				mvcc.ErrNotFound, name, sid)
		}
		return nil
	})
	return at, err
}

// Point is one entry of .asof/: a commit or a named checkpoint.
type Point struct {
	Name string // canonical HLC text, or the checkpoint name
	HLC  mvcc.HLC
}

// The listing rule of .asof/ (Points). Every commit still resolves by its
// HLC or a time; only the listing is thinned, so that a session of weeks
// lists a few hundred points a person can browse, not one per commit.
const (
	// Pause is the quiet time after a commit that makes it settled: the
	// end of an untar, a build, a git commit, an agent's turn.
	Pause = time.Minute
	// One point per window: windows of fineWindow for the fineAge
	// before the session's last commit, then of midWindow until midAge,
	// then of oldWindow.
	fineWindow = 10 * time.Minute
	fineAge    = 24 * time.Hour
	midWindow  = time.Hour
	midAge     = 7 * 24 * time.Hour
	oldWindow  = 24 * time.Hour
)

// Points lists what ls .asof/ shows, oldest first: the session's first
// commit, a point per window of time (see Listed), its last commit, then its
// checkpoints. Once history was pruned before T (see mvcc.Prune), the
// points before T all show the state as of T: T takes the first commit's
// place and nothing before it is listed.
func Points(st *mvcc.Store, sid mvcc.SessionID) ([]Point, error) {
	floor, _, err := st.PrunedTo(sid)
	if err != nil {
		return nil, err
	}
	var commits []mvcc.HLC
	var cps []Point
	err = st.View(func(t *mvcc.ReadTx) error {
		after := uint64(0)
		if floor != 0 {
			commits = append(commits, floor)
			var err error
			if after, err = t.SeqAtOrBefore(sid, floor); err != nil {
				return err
			}
		}
		if err := t.Events(sid, after, func(ev mvcc.Event) bool {
			if ev.HLC > floor && (len(commits) == 0 || ev.HLC != commits[len(commits)-1]) {
				commits = append(commits, ev.HLC)
			}
			return true
		}); err != nil {
			return err
		}
		return t.Checkpoints(sid, func(name string, at mvcc.HLC) bool {
			cps = append(cps, Point{Name: name, HLC: at})
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	pts := make([]Point, 0, len(cps)+64)
	for _, h := range Listed(commits) {
		pts = append(pts, Point{Name: h.String(), HLC: h})
	}
	return append(pts, cps...), nil
}

// Listed picks the commits .asof/ lists from a session's commits (in
// order): the first, the last, and one per window of wall-clock time
// (UTC) that holds a commit: windows of 10 minutes in the 24 hours before
// the last commit, of an hour in the week before that, of a day before
// that; the last commit stands for its own window. A window's point is
// its last settled commit (one followed by at least Pause without another
// commit), or its last commit when none settled in it (a session written
// without a pause). A session busy for a month lists at most
// about 330 points; the listing of a session nobody writes to does not
// change.
func Listed(commits []mvcc.HLC) []mvcc.HLC {
	if len(commits) <= 2 {
		return commits
	}
	last := commits[len(commits)-1].Time()
	out := []mvcc.HLC{commits[0]}
	var (
		window  time.Time // the window being picked from
		pick    mvcc.HLC  // its point so far (0: none yet)
		settled bool      // pick is a settled commit
	)
	for i, h := range commits[1 : len(commits)-1] {
		t := h.Time()
		if w := windowOf(t, last); !w.Equal(window) {
			if pick != 0 {
				out = append(out, pick)
			}
			window, pick, settled = w, 0, false
		}
		if s := commits[i+2].Time().Sub(t) >= Pause; s || !settled {
			pick, settled = h, s
		}
	}
	if pick != 0 && !window.Equal(windowOf(last, last)) {
		out = append(out, pick) // (the last commit stands for its window)
	}
	return append(out, commits[len(commits)-1])
}

// windowOf is the start of the listing window t falls in, by its age
// before the last commit.
func windowOf(t, last time.Time) time.Time {
	switch age := last.Sub(t); {
	case age < fineAge:
		return t.Truncate(fineWindow)
	case age < midAge:
		return t.Truncate(midWindow)
	default:
		return t.Truncate(oldWindow)
	}
}
