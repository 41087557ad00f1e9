// Package timetravel resolves the names under a session's .asof/ directory
// into HLCs and lists a session's commit points. A name is, in order of
// precedence: a checkpoint name, the canonical HLC text, or any RFC 3339
// time (meaning the latest state at or before it).
package timetravel

import (
	"errors"
	"fmt"

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

// Points lists a session's commit points (one per event, oldest first)
// followed by its checkpoints. Once history was pruned before T (see
// mvcc.Prune), the points before T all show the state as of T: they are
// left out, and T itself is the first point listed.
func Points(st *mvcc.Store, sid mvcc.SessionID) ([]Point, error) {
	var out []Point
	floor, _, err := st.PrunedTo(sid)
	if err != nil {
		return nil, err
	}
	err = st.View(func(t *mvcc.ReadTx) error {
		after := uint64(0)
		if floor != 0 {
			out = append(out, Point{Name: floor.String(), HLC: floor})
			var err error
			if after, err = t.SeqAtOrBefore(sid, floor); err != nil {
				return err
			}
		}
		if err := t.Events(sid, after, func(ev mvcc.Event) bool {
			if ev.HLC > floor {
				out = append(out, Point{Name: ev.HLC.String(), HLC: ev.HLC})
			}
			return true
		}); err != nil {
			return err
		}
		return t.Checkpoints(sid, func(name string, at mvcc.HLC) bool {
			out = append(out, Point{Name: name, HLC: at})
			return true
		})
	})
	return out, err
}
