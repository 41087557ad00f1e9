package mvcc

import (
	"encoding/binary"
	"log/slog"
	"sync"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// Following other writers. A store shared by several processes
// (PostgreSQL: several hosts) changes behind this process's back; its
// watchers (the search index) only hear of our own commits. Follow polls
// the store's HLC high-water mark, one small read, and when it moved, tells
// the watchers of the newest event of every session whose log grew.
type follower struct {
	mu   sync.Mutex
	hw   HLC                  // high-water mark at the last poll
	seen map[SessionID]uint64 // each session's last event we told of (or saw at the first poll)
	base bool                 // seen holds a first snapshot

	// Under Store.mu: the background poller (stop nil: none).
	stop, done chan struct{}
	stopped    bool
}

// follower returns the store's follower, making it on first use.
func (s *Store) follower() *follower {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.follow == nil {
		s.follow = &follower{seen: map[SessionID]uint64{}}
	}
	return s.follow
}

// Follow starts polling the store every interval for commits of other
// processes, until Close: for a store other processes write.
func (s *Store) Follow(interval time.Duration) {
	f := s.follower()
	s.mu.Lock()
	if f.stop != nil {
		s.mu.Unlock()
		return
	}
	stop, done := make(chan struct{}), make(chan struct{})
	f.stop, f.done = stop, done
	s.mu.Unlock()
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if _, err := s.PollOthers(); err != nil {
				slog.Debug("poll the store for other writers", "err", err)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (s *Store) stopFollowing() {
	s.mu.Lock()
	f := s.follow
	var stop, done chan struct{}
	if f != nil && f.stop != nil && !f.stopped {
		stop, done = f.stop, f.done
		f.stopped = true
	}
	s.mu.Unlock()
	if stop != nil {
		close(stop)
		<-done
	}
}

// sawLocal records an event this process committed, so that a poll does
// not report it again.
func (f *follower) sawLocal(sid SessionID, seq uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if seq > f.seen[sid] {
		f.seen[sid] = seq
	}
}

// PollOthers checks once for commits the watchers have not heard of (of
// other processes) and tells them; it returns how many sessions had some.
// The first poll only takes note of where every session's log ends.
func (s *Store) PollOthers() (int, error) {
	f := s.follower()
	type news struct {
		sid SessionID
		ev  Event
	}
	var out []news
	var hw HLC
	f.mu.Lock()
	last, base := f.hw, f.base
	seen := make(map[SessionID]uint64, len(f.seen))
	for k, v := range f.seen {
		seen[k] = v
	}
	f.mu.Unlock()
	counts := map[SessionID]uint64{}
	err := s.View(func(t *ReadTx) error {
		v, err := t.r.Get(metaKey("hlc"))
		if err != nil || len(v) != 8 {
			return err
		}
		if hw = HLC(binary.BigEndian.Uint64(v)); hw == last && base {
			return nil
		}
		prefix := []byte{pCounters}
		var grown []SessionID
		err = t.r.Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
			sid, ok := sessionOf(k)
			if !ok || len(k) != 17 {
				return true, nil
			}
			var c counters
			if err := decode(k, v, &c); err != nil {
				return false, err
			}
			counts[sid] = c.NextSeq
			if base && c.NextSeq > seen[sid] {
				grown = append(grown, sid)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
		for _, sid := range grown {
			if err := t.Events(sid, counts[sid]-1, func(ev Event) bool {
				out = append(out, news{sid, ev})
				return false
			}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	f.mu.Lock()
	f.hw, f.base = hw, true
	for sid, n := range counts {
		if n > f.seen[sid] {
			f.seen[sid] = n
		}
	}
	f.mu.Unlock()
	for _, n := range out {
		s.notifyWatchers(n.sid, n.ev)
	}
	return len(out), nil
}
