package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// A job's plan (the receipt PlanPurge and PlanRedact return, and its
// recomputation when Purge and Redact check the token) reads the whole
// session, a redaction's every content too. In one read transaction that
// was one goroutine on a CPU without a pause, for a 1 GiB session (2
// CPUs, load 10) 0.4 s of the first second of a hard forget and most of
// a redaction's first 26-33 s; in a runtime trace a writer of another
// session waited for a P (runnable) 20-25 ms at a time meanwhile, and in
// the collector's assists and stack scans.
//
// A plan reads instead through a stepReader: each Get is a read
// transaction of its own, a Scan one per page of planPage keys (its
// callback runs between them, on copies), and after planStep of reading
// it pauses as long (pace) and checks that the session has not changed
// (planView). The plan so takes at most about half a CPU, and no read
// transaction of it lasts more than a page.

// planStep is the reading a plan does between two pauses.
var planStep = 2 * time.Millisecond

// planPage bounds the keys one read transaction of a plan's Scan copies.
const planPage = 256

// errPlanChanged means the session changed while a stepped plan read it.
var errPlanChanged = errors.New("the session changed while it was being read")

// stepReader is a kv.Reader over a series of short read transactions.
type stepReader struct {
	kv     kv.Store
	check  func() error // after each pause; an error ends the plan
	t0     time.Time    // when the current step began
	pauses int64
	hook   func(event string, n int64, took time.Duration) // Store.jobHook
}

var (
	_ kv.Reader  = (*stepReader)(nil)
	_ kv.Firster = (*stepReader)(nil)
)

// tick pauses and checks once the current step has used planStep.
func (r *stepReader) tick() error {
	if time.Since(r.t0) < planStep {
		return nil
	}
	took := time.Since(r.t0)
	pace(r.t0)
	if r.pauses++; r.hook != nil {
		r.hook("plan", r.pauses, took)
	}
	if err := r.check(); err != nil {
		return err
	}
	r.t0 = time.Now()
	return nil
}

func (r *stepReader) Get(k []byte) (v []byte, err error) {
	if err := r.kv.View(func(rd kv.Reader) error {
		vv, err := rd.Get(k)
		v = bytes.Clone(vv)
		return err
	}); err != nil {
		return nil, err
	}
	return v, r.tick()
}

func (r *stepReader) First(start, end []byte) (k, v []byte, err error) {
	if err := r.kv.View(func(rd kv.Reader) error {
		kk, vv, err := kv.First(rd, start, end)
		k, v = bytes.Clone(kk), bytes.Clone(vv)
		return err
	}); err != nil {
		return nil, nil, err
	}
	return k, v, r.tick()
}

func (r *stepReader) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) error {
	type kvp struct{ k, v []byte }
	pos := start
	for {
		var got []kvp
		full := false
		if err := r.kv.View(func(rd kv.Reader) error {
			got, full = got[:0], false
			return rd.Scan(pos, end, func(k, v []byte) (bool, error) {
				got = append(got, kvp{bytes.Clone(k), bytes.Clone(v)})
				full = len(got) == planPage
				return !full, nil
			})
		}); err != nil {
			return err
		}
		if err := r.tick(); err != nil {
			return err
		}
		for _, p := range got {
			if more, err := fn(p.k, p.v); err != nil || !more {
				return err
			}
		}
		if !full {
			return nil
		}
		pos = append(got[len(got)-1].k, 0) // the next key after the last one
	}
}

// planView runs plan, which reads session sid, through a stepReader while
// no prune runs (a prune changes a session's keys without an event). It
// fails with errPlanChanged if the session's last event changed meanwhile
// (a commit): plan then saw no single state of it.
func (s *Store) planView(sid SessionID, plan func(t *ReadTx) error) error {
	_ = s.FlushHeld() // as View does: a held create is the session's too
	s.pruneMu.Lock()
	defer s.pruneMu.Unlock()
	var lastSeq uint64
	known := false
	check := func() error {
		return s.view(func(t *ReadTx) error {
			if _, err := t.Header(sid); err != nil {
				return err // purged or marked meanwhile
			}
			seq, _, err := t.LastEvent(sid)
			switch {
			case err != nil:
				return err
			case known && seq != lastSeq:
				return fmt.Errorf("%w: session %s", errPlanChanged, sid)
			}
			lastSeq, known = seq, true
			return nil
		})
	}
	if err := check(); err != nil {
		return err
	}
	r := &stepReader{kv: s.kv, check: check, t0: time.Now(), hook: s.jobHook}
	if err := plan(&ReadTx{s: s, r: r}); err != nil {
		return err
	}
	return check()
}

// planRetry is planView for a receipt: a session that keeps changing is
// read again, and after the third try in one read transaction.
func (s *Store) planRetry(sid SessionID, plan func(t *ReadTx) error) error {
	for try := 0; try < 3; try++ {
		if err := s.planView(sid, plan); !errors.Is(err, errPlanChanged) {
			return err
		}
	}
	return s.View(plan)
}

// planToken recomputes a receipt through planView for a job (plan
// returns its token) and checks it against token: a session that changed
// since the receipt, or while it was read again, is ErrToken.
func (s *Store) planToken(sid SessionID, token string, plan func(t *ReadTx) (string, error)) error {
	var got string
	err := s.planView(sid, func(t *ReadTx) error {
		var err error
		got, err = plan(t)
		return err
	})
	switch {
	case errors.Is(err, errPlanChanged):
		return fmt.Errorf("%w: session %s changed since the receipt", ErrToken, sid)
	case err != nil:
		return err
	case token != got:
		return fmt.Errorf("%w: session %s", ErrToken, sid)
	}
	return nil
}
