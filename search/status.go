package search

import (
	"github.com/padfs/padfs/mvcc"
)

// SessionStatus is how far the index of one session is behind its log.
type SessionStatus struct {
	Session string `json:"session"`
	// Covered is the last event the index reflects; Last the session's
	// last event. Lag is Last-Covered.
	Covered uint64 `json:"covered"`
	Last    uint64 `json:"last"`
	// Error is why catching up failed last (worker down, disk full...).
	Error string `json:"error,omitempty"`
}

// Status is the state of the index: its worker and every live session.
type Status struct {
	Worker   BackendStats    `json:"worker"`
	Sessions []SessionStatus `json:"sessions"`
}

// Status reports the index worker and, per live session, the covered and
// last sequence numbers.
func (ix *Index) Status() (Status, error) {
	s := Status{Worker: ix.be.stats()}
	infos, err := ix.st.Sessions()
	if err != nil {
		return s, err
	}
	for _, si := range infos {
		if si.Forgotten {
			continue
		}
		ss := SessionStatus{Session: si.ID.String()}
		_ = ix.st.View(func(t *mvcc.ReadTx) error {
			ss.Last, _, err = t.LastEvent(si.ID)
			return err
		})
		var cerr error
		if ss.Covered, _, cerr = ix.Covered(si.ID); cerr != nil {
			ss.Error = cerr.Error()
		}
		ix.mu.Lock()
		if e, ok := ix.failed[si.ID]; ok && ss.Error == "" {
			ss.Error = e
		}
		ix.mu.Unlock()
		s.Sessions = append(s.Sessions, ss)
	}
	return s, nil
}
