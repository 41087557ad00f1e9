package postgres

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Lease-local reads: a View of a process that holds a session's lease
// reads that session's keys from the cache with no round trip.
//
// Why this is exact. A View must see every commit that completed before it
// began and nothing that is not in one generation. Three writers could
// change a leased session's keys:
//
//   - Another padfs process: every commit logs its partitions in
//     padfs_changes under the writer lock, and the guard (qLogChange;
//     padfs_changes_guard on that table) refuses a change to a guarded
//     partition of a session whose lease is live and held by someone
//     else (`padfs restore`, `undo`, `prune`, `redact`, `rename` or a
//     hard forget from another host fail, naming the holder; a mount's policy skips the
//     sessions others hold). A session's log and checkpoint names are not
//     guarded (guardedKind): `padfs checkpoint` works from any host, and
//     the holder reads those keys with a check. What must override a live holder takes the
//     lease over and waits until the holder's lease has run out before it
//     commits (TakeOver: `session forget --force`, `fsck --repair` takes
//     "*", which no session lease can be held beside).
//   - A writer that does not log (SQL by hand, an older padfs): the
//     statement trigger on padfs_kv logs the partition "" for it, which the
//     guard refuses while any session's lease is live.
//   - This process: its commits go into the cache as they commit. A View
//     goes lease-local only when no commit of this process is in flight and
//     the cache has applied the last one sent, and a commit waits (up to
//     pinWait) for the lease-local Views that are reading their snapshot;
//     for those still reading then, it begins a transaction each before it
//     commits (it holds the writer lock: their snapshot is the database
//     before this commit, which for the session's keys is the View's own
//     snapshot), and they go on in it when they must ask the server.
//
// So while the lease lives, the leased session's guarded keys in the
// database are what this process's cache holds for them. The privilege
// ends before the server would let anyone else take the lease
// (Lease.local); a Release ends it first. A View reads a copy-on-write
// snapshot of the cache (snapshot) as long as every key it asks for is in
// a guarded partition of a leased session and covered; its first other read (a miss, or a key of the
// store, of another session, or of a chunk) begins a transaction as any
// View does, reading the changes since the snapshot's generation: if one
// of them touched a partition the View read from the snapshot (which only
// a lease lost mid-View can cause), the View fails rather than mix two
// generations.

// pinWait bounds how long a commit waits for lease-local Views before it
// begins transactions for them (a View that waits on an Update of this
// process would otherwise deadlock with it).
const pinWait = 20 * time.Millisecond

// localState orders this process's commits and its lease-local Views.
type localState struct {
	mu       sync.Mutex
	cond     *sync.Cond
	pinned   map[*reader]struct{} // lease-local Views reading their snapshot
	inflight int                  // commits sent and not yet applied to the cache
	waiting  int                  // commits waiting for pinned Views
	// floor: lease-local reads need the cache at this generation or
	// later: this process's last commit sent, or the newest commit when a
	// lease was taken (or renewed after it had run out on the server).
	floor int64
}

// raiseFloor keeps lease-local reads off until the cache has seen
// generation g.
func (s *Store) raiseFloor(g int64) {
	s.local.mu.Lock()
	s.local.floor = max(s.local.floor, g)
	s.local.mu.Unlock()
}

// relist rebuilds the map of leases that guard a session.
func (s *Store) relist() {
	s.leaseMu.Lock()
	m := map[string]*Lease{}
	for _, l := range s.leases {
		if l.sid != nil {
			m[string(l.sid)] = l
		}
	}
	s.leaseMu.Unlock()
	s.locals.Store(&m)
}

// anyLocal reports whether this process holds a lease that guards a
// session.
func (s *Store) anyLocal() bool {
	m := s.locals.Load()
	return m != nil && len(*m) > 0
}

// isLocal reports whether partition p is a guarded one of a session whose
// lease this process holds with its privilege in force.
func (s *Store) isLocal(p []byte) bool {
	if len(p) != 17 || !guardedKind(p[0]) {
		return false
	}
	m := s.locals.Load()
	if m == nil {
		return false
	}
	l := (*m)[string(p[1:])]
	return l != nil && l.local()
}

// prebegun is a transaction a commit began for a pinned View.
type prebegun struct {
	done chan struct{} // closed once begun (or failed)
	conn *pgxpool.Conn
	r    *reader // its generation, changes, cached
	err  error
}

// pin returns a snapshot of the cache for lease-local View r, or nil when
// one may not be taken now.
func (s *Store) pin(r *reader) *snapshot {
	ls := &s.local
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.inflight > 0 || ls.waiting > 0 {
		return nil
	}
	sn := s.cache.snapshot(ls.floor)
	if sn != nil {
		if ls.pinned == nil {
			ls.pinned = map[*reader]struct{}{}
		}
		ls.pinned[r] = struct{}{}
	}
	return sn
}

// unpin ends r's pin; it returns the transaction a commit began for r,
// if one did.
func (s *Store) unpin(r *reader) *prebegun {
	ls := &s.local
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if _, ok := ls.pinned[r]; ok {
		delete(ls.pinned, r)
		if len(ls.pinned) == 0 && ls.waiting > 0 {
			ls.cond.Broadcast()
		}
	}
	return r.pre
}

// prebegunFor returns the transaction a commit began for r, if one did.
func (s *Store) prebegunFor(r *reader) *prebegun {
	s.local.mu.Lock()
	defer s.local.mu.Unlock()
	return r.pre
}

// commitStart waits for the lease-local Views reading a snapshot (up to
// pinWait) and begins a transaction for each still reading, then notes a
// commit of generation gen in flight. The caller's transaction holds the
// writer lock.
func (s *Store) commitStart(gen int64) {
	ls := &s.local
	ls.mu.Lock()
	ls.waiting++ // no View pins until this commit is in flight
	if len(ls.pinned) > 0 {
		expired := false
		t := time.AfterFunc(pinWait, func() {
			ls.mu.Lock()
			expired = true
			ls.cond.Broadcast()
			ls.mu.Unlock()
		})
		for len(ls.pinned) > 0 && !expired {
			ls.cond.Wait()
		}
		t.Stop()
	}
	type late struct {
		r    *reader
		from int64
	}
	var lates []late
	for r := range ls.pinned {
		r.pre = &prebegun{done: make(chan struct{})}
		lates = append(lates, late{r, r.snap.gen})
	}
	clear(ls.pinned)
	ls.mu.Unlock()
	var wg sync.WaitGroup
	for _, l := range lates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pre := l.r.pre
			pre.r = &reader{s: s}
			pre.conn, pre.err = s.open(context.Background(), pre.r, viewBegin, false, l.from)
			close(pre.done)
		}()
	}
	wg.Wait()
	ls.mu.Lock()
	ls.waiting--
	ls.inflight++
	ls.floor = max(ls.floor, gen)
	ls.mu.Unlock()
}

func (s *Store) commitEnd() {
	ls := &s.local
	ls.mu.Lock()
	ls.inflight--
	ls.mu.Unlock()
}

// localGet serves key from the View's snapshot if it may: ok false if
// the View must ask the database.
func (r *reader) localGet(key []byte) (v []byte, found, ok bool) {
	p := partOf(key)
	if !r.s.isLocal(p) {
		return nil, false, false
	}
	if r.snap == nil {
		if r.snap = r.s.pin(r); r.snap == nil {
			return nil, false, false
		}
	}
	v, found, covered := r.snap.lookup(key)
	if covered {
		r.noteRead(p)
	}
	return v, found, covered
}

// localNext is the pager's next row of [*pos, end) from the View's
// snapshot, as long as *pos is in a leased session's partition the
// snapshot covers: found, or known that there is none; else (known false)
// *pos has moved to where the View must ask the database.
func (r *reader) localNext(pos *string, end []byte) (k, v []byte, found, known bool) {
	for {
		p := partOf([]byte(*pos))
		bound := prefixEnd(string(p))
		if !r.s.isLocal(p) || bound == "" {
			return nil, nil, false, false
		}
		if r.snap == nil {
			if r.snap = r.s.pin(r); r.snap == nil {
				return nil, nil, false, false
			}
		}
		lookEnd, last := []byte(bound), false
		if end != nil && string(end) <= bound {
			lookEnd, last = end, true
		}
		start := *pos
		k, v, found, known = r.snap.seek(pos, lookEnd)
		if found || known || *pos != start {
			r.noteRead(p) // what it returned, and the keys it passed
		}
		switch {
		case found:
			return k, v, true, true
		case !known:
			return nil, nil, false, false
		case last:
			return nil, nil, false, true
		}
		*pos = bound
	}
}

func (r *reader) noteRead(p []byte) {
	if r.read == nil {
		r.read = map[string]struct{}{}
	}
	r.read[string(p)] = struct{}{}
}

// overtaken reports whether a View that read partitions read from
// snapshot sn cannot go on at generation g (nonce: its change's), given
// the changes from sn's generation on: one of them touched a partition it
// read, or they do not tell.
func overtaken(sn *snapshot, g, nonce int64, changes []change, read map[string]struct{}) bool {
	switch {
	case g == sn.gen:
		return nonce != sn.nonce
	case g < sn.gen:
		return true
	}
	next := sn.gen + 1
	for _, ch := range changes {
		switch {
		case ch.gen < sn.gen:
			continue
		case ch.gen == sn.gen:
			if ch.nonce != sn.nonce {
				return true
			}
			continue
		case ch.gen > g:
			return next != g+1
		case ch.gen != next:
			return true
		}
		for _, p := range ch.parts {
			for rp := range read {
				if bytes.HasPrefix([]byte(rp), p) {
					return true
				}
			}
		}
		next++
	}
	return next != g+1
}

// errOvertaken fails a lease-local View that cannot go on consistently.
func (s *Store) errOvertaken() error {
	return fmt.Errorf("postgres store %s: %w: a commit changed what a lease-local read had read (the lease lapsed while it ran)", s.desc, ErrFenced)
}
