package main

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/timetravel"
)

// The one resolver of points in time named on the command line, shared by
// log --since, diff FROM TO, restore --asof and undo, so that they accept
// the same words:
//
//	now                     a fresh HLC, after the mount's buffered writes are committed
//	42                      the state right after event 42 of the session's log
//	before-refactor         a checkpoint name
//	2026-11-29T14:03:00.123456789Z, any RFC 3339 time: the latest state at or before it
//
// Checkpoint names cannot be "now" or all digits (ValidCheckpointName), so
// the words never collide.

// maxSeq is the largest sequence number accepted: sequence numbers count
// commits from 1 and stay far below it (a larger value was a typo, and
// 2^64-1 used to wrap round to every event).
const maxSeq = math.MaxInt64

// when is a resolved point in time.
type when struct {
	At mvcc.HLC
	// IsSeq: given as a sequence number Seq. At is that event's HLC when
	// the event exists (HasEvent); 0 stands for before the first event.
	IsSeq    bool
	Seq      uint64
	HasEvent bool
}

// resolveWhen resolves s for session sid. what names the argument in
// errors ("--since", "FROM"). now supplies the HLC of "now" (nil: the
// store's clock).
func resolveWhen(st *mvcc.Store, sid mvcc.SessionID, what, s string, now func() (mvcc.HLC, error)) (when, error) {
	switch {
	case s == "":
		return when{}, fmt.Errorf("%s: empty point in time", what)
	case s == "now":
		if now == nil {
			now = st.Now
		}
		at, err := now()
		return when{At: at}, err
	case strings.Trim(s, "0123456789") == "":
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n > maxSeq {
			return when{}, fmt.Errorf("%s %s: sequence number out of range (0..%d)", what, s, uint64(maxSeq))
		}
		w := when{IsSeq: true, Seq: n}
		if n == 0 {
			return w, nil
		}
		err = st.View(func(t *mvcc.ReadTx) error {
			return t.Events(sid, n-1, func(ev mvcc.Event) bool {
				if ev.Seq == n {
					w.At, w.HasEvent = ev.HLC, true
				}
				return false
			})
		})
		return w, err
	}
	at, err := timetravel.Resolve(st, sid, s)
	if errors.Is(err, mvcc.ErrHLCRange) {
		return when{}, fmt.Errorf("%s: %w", what, err)
	}
	if err != nil {
		return when{}, fmt.Errorf("%s %q is not now, a sequence number, an HLC, an RFC 3339 time or a checkpoint name of session %s", what, s, sid)
	}
	return when{At: at}, nil
}

// resolveAt is resolveWhen for commands that need an HLC: a sequence
// number must name an event of the log.
func resolveAt(a *App, sid mvcc.SessionID, what, s string) (mvcc.HLC, error) {
	w, err := resolveWhen(a.Store, sid, what, s, a.now)
	if err != nil {
		return 0, err
	}
	if w.IsSeq && w.Seq > 0 && !w.HasEvent {
		last := uint64(0)
		a.Store.View(func(t *mvcc.ReadTx) error { last, _, _ = t.LastEvent(sid); return nil })
		return 0, fmt.Errorf("%s %d: session %s has no such event (its log ends at %d)", what, w.Seq, sid, last)
	}
	return w.At, nil
}

// now commits the mount's buffered writes and returns a fresh HLC: the
// state as of it has every write that returned.
func (a *App) now() (mvcc.HLC, error) {
	if err := a.FlushMount(); err != nil {
		return 0, fmt.Errorf("commit the mount's open writes: %w", err)
	}
	return a.Store.Now()
}
