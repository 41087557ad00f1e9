package mvcc

import "fmt"

// Forget soft-forgets a session: a new state version {Forgotten} and a
// session.forget event, in one commit. Nothing is deleted: the session
// leaves live listings, LiveHeader (and so a read-write mount) refuses it,
// and every as-of read before the returned HLC keeps working. Forgetting a
// forgotten session is ErrForgotten.
func (s *Store) Forget(sid SessionID) (HLC, error) {
	ev, err := s.commit(sid, commitAny, func(t *WriteTx) error {
		if gone, at, err := t.Forgotten(sid, Latest); err != nil {
			return err
		} else if gone {
			return fmt.Errorf("%w: %s was already forgotten at %s", ErrForgotten, sid, at)
		}
		if err := t.put(stateKey(sid, t.hlc), &sessionState{Forgotten: true}); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpForget, Path: "."})
		return nil
	})
	return ev.HLC, err
}

// HeaderAt returns the header of a session that exists and is live as of
// at: what a read-only mount of a forgotten session as of an earlier time
// requires. A forgotten session is ErrForgotten when at is at or after the
// forget.
func (s *Store) HeaderAt(sid SessionID, at HLC) (*SessionHeader, error) {
	var h *SessionHeader
	err := s.View(func(t *ReadTx) error {
		var err error
		if h, err = t.Header(sid); err != nil {
			return err
		}
		if at < h.Created {
			return fmt.Errorf("%w: %s did not exist yet at %s (created %s)", ErrNotFound, sid, at, h.Created)
		}
		gone, when, err := t.Forgotten(sid, at)
		if err == nil && gone {
			err = fmt.Errorf("%w: %s was forgotten at %s; read it as of an earlier time", ErrForgotten, sid, when)
		}
		return err
	})
	return h, err
}
