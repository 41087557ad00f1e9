package mvcc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// Store is the versioned store: sessions, trees, content and commit logs,
// on top of an ordered transactional KV (kv.Store). It is safe for
// concurrent use. Writers are serialized by the KV's Update, and each commit
// takes its HLC inside that critical section, so HLC order is commit order.
type Store struct {
	kv    kv.Store
	clock *Clock

	mu       sync.Mutex
	watchers []*watcher
	follow   *follower // other writers' commits (follow.go)

	paths pathCache
	// hw is the HLC high-water mark this process last wrote or read in a
	// write transaction (under the KV's write serialization). Another
	// process sharing the store (PostgreSQL) moves the stored one.
	hw HLC
	// lastLive is the last commit that found its session live (update.go).
	lastLive atomic.Pointer[liveMark]

	recorded sync.Map   // SessionID -> true: its prune state notes its S records
	floors   sync.Map   // SessionID -> pruneFloor: as-of reads before it are clamped
	pruneMu  sync.Mutex // one prune at a time
	liveDone sync.Map   // SessionID -> true: its live-entry index is complete (liveidx.go)

	jobMu sync.Mutex // one purge or redaction runs at a time (job.go)

	compacting atomic.Bool // a compaction runs (measurements)

	held heldState // a create not committed yet (held.go)

	pins chunkPins // chunks of streams not committed yet (stream.go)

	// batchHook, if set (tests), is called after each batch of a job.
	batchHook func(stage string, batches int64, took time.Duration)
	// jobHook, if set (tests), is called at each pause of a job's plan
	// ("plan", pauses so far) and after its mark ("mark", 0).
	jobHook func(event string, n int64, took time.Duration)
}

// New opens the mvcc layer on kvs: it checks (or writes) the format version
// and restores the HLC high-water mark.
func New(kvs kv.Store) (*Store, error) {
	s := &Store{kv: kvs}
	var last HLC
	err := kvs.Update(func(tx kv.Txn) error {
		v, err := tx.Get(metaKey("format"))
		if err != nil {
			return err
		}
		switch {
		case v == nil:
			if err := tx.Put(metaKey("format"), u64(formatInline)); err != nil {
				return err
			}
			if err := tx.Put(metaKey("ino"), u64(1)); err != nil {
				return err
			}
		case len(v) != 8:
			return fmt.Errorf("%w: format record is %d bytes", ErrCorrupt, len(v))
		case binary.BigEndian.Uint64(v) > FormatVersion:
			return fmt.Errorf("%w: store format %d is newer than this padfs understands (%d); upgrade padfs",
				ErrFormat, binary.BigEndian.Uint64(v), FormatVersion)
		}
		if m, ok := kvs.(kv.MinFormater); ok && m.MinFormat() > 0 {
			// The driver's layout (bolt's nested values) is what an
			// older padfs would misread: the format makes it refuse.
			if m.MinFormat() > FormatVersion {
				return fmt.Errorf("%w: the store driver needs format %d, newer than this padfs understands (%d)", ErrFormat, m.MinFormat(), FormatVersion)
			}
			if err := raiseFormat(tx, m.MinFormat()); err != nil {
				return err
			}
		}
		if v, err = tx.Get(metaKey("hlc")); err != nil {
			return err
		} else if len(v) == 8 {
			last = HLC(binary.BigEndian.Uint64(v))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.clock = NewClock(last)
	s.hw = last
	// A store of an older padfs gets its live-entry index once. Failing
	// that (a damaged chain, a full disk) costs speed, not the open:
	// listings read the chains meanwhile.
	if err := s.BuildLiveIndex(); err != nil {
		slog.Warn("live-entry index not built; directory listings read the entry chains", "err", err)
	}
	return s, nil
}

// KV returns the ordered KV under the store (for the composition above
// mvcc: a driver's leases and maintenance).
func (s *Store) KV() kv.Store { return s.kv }

// Shared reports whether other processes write the store too (kv.Sharer):
// then a pin (Stream) keeps a chunk from this process's sweeps only.
func (s *Store) Shared() bool { return kv.Shared(s.kv) }

// tickLocked issues the HLC of a write transaction: greater than every HLC
// this process issued and than the stored high-water mark, which other
// processes sharing the store advance (so HLCs increase across hosts too),
// and records it as the new high-water mark. A high-water mark this
// process did not write means another process committed since our last
// write: the cached paths become suspect (pathCache).
func (s *Store) tickLocked(tx kv.Txn) (HLC, error) {
	stored, err := storedHW(tx)
	if err != nil {
		return 0, err
	}
	return s.tickFromLocked(tx, stored)
}

// storedHW reads the stored HLC high-water mark (0 if there is none).
func storedHW(tx kv.Reader) (HLC, error) {
	v, err := tx.Get(metaKey("hlc"))
	if err != nil || len(v) != 8 {
		return 0, err
	}
	return HLC(binary.BigEndian.Uint64(v)), nil
}

// tickFromLocked is tickLocked with the stored high-water mark already read
// in tx.
func (s *Store) tickFromLocked(tx kv.Txn, stored HLC) (HLC, error) {
	if stored != 0 && stored != s.hw {
		s.clock.Observe(stored)
		s.paths.suspectAll()
	}
	h := s.clock.Tick()
	s.hw = h
	return h, tx.Put(metaKey("hlc"), u64(uint64(h)))
}

// Observe makes the clock issue only HLCs above h (an HLC another process
// issued).
func (c *Clock) Observe(h HLC) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h > c.last {
		c.last = h
	}
}

// Close stops following other writers and closes the underlying KV.
func (s *Store) Close() error {
	s.FlushHeld() // its error is logged; the store closes anyway
	s.stopFollowing()
	return s.kv.Close()
}

// Sync returns when every commit so far survives a power loss.
func (s *Store) Sync() error {
	if err := s.FlushHeld(); err != nil {
		return err
	}
	return s.kv.Sync()
}

// Now returns a fresh HLC greater than every commit so far and persists it
// as the high-water mark, so .asof/<Now()>/ shows every completed write and
// no later one, even across a restart with a clock that stepped back.
func (s *Store) Now() (HLC, error) {
	if err := s.FlushHeld(); err != nil {
		return 0, err
	}
	var h HLC
	err := s.kv.Update(func(tx kv.Txn) error {
		var err error
		h, err = s.tickLocked(tx)
		return err
	})
	return h, err
}

// Watch registers fn to be called after every commit, outside any
// transaction, on the committing goroutine. Commits on different
// goroutines may report out of order: order by Event.Seq. fn must not
// block (the search index only wakes its catch-up loop). The returned
// function unregisters fn: commits that begin after it returned do not
// call fn (one already reporting may still).
func (s *Store) Watch(fn func(SessionID, Event)) (cancel func()) {
	w := &watcher{fn: fn}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchers = append(s.watchers, w)
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		// A new slice: notifyWatchers may be iterating the old one.
		s.watchers = slices.DeleteFunc(slices.Clone(s.watchers), func(x *watcher) bool { return x == w })
	}
}

// watcher is one Watch registration (a pointer, so cancel finds its own).
type watcher struct{ fn func(SessionID, Event) }

func (s *Store) notify(sid SessionID, ev Event) {
	s.mu.Lock()
	f := s.follow
	s.mu.Unlock()
	if f != nil {
		f.sawLocal(sid, ev.Seq)
	}
	s.notifyWatchers(sid, ev)
}

func (s *Store) notifyWatchers(sid SessionID, ev Event) {
	s.mu.Lock()
	ws := s.watchers
	s.mu.Unlock()
	for _, w := range ws {
		w.fn(sid, ev)
	}
}

// ReadTx is a consistent read-only view of the store.
type ReadTx struct {
	s *Store
	r kv.Reader
	// heads, in a commit, remembers the newest key of each chain read as
	// of Latest (versionPut); nil outside a commit.
	heads *headCache
	// view: a read-only snapshot (View), which nothing writes to while it
	// reads, so that "as of T" past the session's last commit is its latest
	// state.
	view bool
}

// View runs fn against a consistent snapshot.
func (s *Store) View(fn func(*ReadTx) error) error {
	// A held create whose commit fails (a failing or full disk) stays
	// held and is logged: reads go on without it rather than fail.
	_ = s.FlushHeld()
	return s.view(fn)
}

// view is View without committing a held create first.
func (s *Store) view(fn func(*ReadTx) error) error {
	return s.kv.View(func(r kv.Reader) error { return fn(&ReadTx{s: s, r: r, view: true}) })
}

// seekChain returns the newest version in the chain with HLC <= at.
func (t *ReadTx) seekChain(chain []byte, at HLC) (k, v []byte, err error) {
	start := append(append(make([]byte, 0, len(chain)+8), chain...), inv(at)...)
	kk, vv, err := kv.First(t.r, start, kv.PrefixEnd(chain))
	if err == nil && len(kk) == len(chain)+8 {
		k = append([]byte(nil), kk...)
		v = append([]byte(nil), vv...)
	}
	if err == nil && at == Latest {
		t.heads.set(chain, k)
	}
	return k, v, err
}

// Header returns a session's immutable header. A session being purged or
// redacted is ErrBusy (and ErrNoSession): nothing may read or change it.
func (t *ReadTx) Header(sid SessionID) (*SessionHeader, error) {
	h, err := t.rawHeader(sid)
	if err != nil {
		return nil, err
	}
	if h.Busy != "" {
		return nil, busyError(sid, h.Busy)
	}
	return h, nil
}

// Forgotten reports whether the session is forgotten as of at, and when.
func (t *ReadTx) Forgotten(sid SessionID, at HLC) (bool, HLC, error) {
	k, v, err := t.seekChain(key(pState, sid[:]), at)
	if err != nil || k == nil {
		return false, 0, err
	}
	var st sessionState
	if err := decode(k, v, &st); err != nil {
		return false, 0, err
	}
	return st.Forgotten, hlcFromInv(k), nil
}

// Lookup returns the entry name in directory parent as of at.
func (t *ReadTx) Lookup(sid SessionID, parent Ino, name string, at HLC) (Dentry, error) {
	at, err := t.clampAt(sid, at)
	if err != nil {
		return Dentry{}, err
	}
	if at == Latest {
		if d, ok, err := t.lookupLive(sid, parent, name); ok || err != nil {
			return d, err
		}
	}
	k, v, err := t.seekChain(dentryChain(sid, parent, name), at)
	if err != nil {
		return Dentry{}, err
	}
	if k == nil {
		return Dentry{}, nameNotFound(name)
	}
	var d Dentry
	if err := decode(k, v, &d); err != nil {
		return Dentry{}, err
	}
	if d.Ino == 0 {
		return Dentry{}, nameNotFound(name)
	}
	d.Name, d.HLC = name, hlcFromInv(k)
	return d, nil
}

// Inode returns the version of ino current as of at.
func (t *ReadTx) Inode(sid SessionID, ino Ino, at HLC) (*Inode, error) {
	c, err := t.clampAt(sid, at)
	if err != nil {
		return nil, err
	}
	if c != at {
		// Pruned history: the file's own version at at if --keep-last
		// kept it (prune.go), else the state at the floor.
		if f, err := t.floor(sid); err != nil || f.keepLast > 0 {
			if err != nil {
				return nil, err
			}
			if n, err := t.keptInode(sid, ino, at, f.keepLast); n != nil || err != nil {
				return n, err
			}
		}
		at = c
	}
	k, v, err := t.seekChain(inodeChain(sid, ino), at)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, fmt.Errorf("%w: inode %d", ErrNotFound, ino)
	}
	n := new(Inode)
	if err := decode(k, v, n); err != nil {
		return nil, err
	}
	n.HLC = hlcFromInv(k)
	return n, nil
}

// ReadDir calls fn for each entry of directory dir as of at, in name order,
// until fn returns false. The latest state reads the live-entry index, one
// key per live name (liveidx.go); a past state costs one seek per name the
// directory ever had (two where the name changed since), never a walk of
// each name's history.
func (t *ReadTx) ReadDir(sid SessionID, dir Ino, at HLC, fn func(Dentry) bool) error {
	at, err := t.clampAt(sid, at)
	if err != nil {
		return err
	}
	if at != Latest && t.view {
		// As of T at or after the session's last commit is now (.asof/ of
		// `padfs now`, a diff to now, the search index's walks).
		// Unreadable counters only cost this shortcut (fsck reports them).
		if _, last, err := t.LastEvent(sid); err == nil && last != 0 && last <= at {
			at = Latest
		}
	}
	if at == Latest {
		if ok, err := t.liveIndexed(sid); err != nil {
			return err
		} else if ok {
			return t.readDirLive(sid, dir, fn)
		}
	}
	return t.readDirChains(sid, dir, at, fn)
}

// readDirChains lists dir as of at (clamped) from its entry chains.
func (t *ReadTx) readDirChains(sid SessionID, dir Ino, at HLC, fn func(Dentry) bool) error {
	prefix := dirPrefix(sid, dir)
	end := kv.PrefixEnd(prefix)
	pos := prefix
	for {
		var k, v []byte
		err := t.r.Scan(pos, end, func(kk, vv []byte) (bool, error) {
			if len(kk) < len(prefix)+9 {
				return false, fmt.Errorf("%w: short entry key %q", ErrCorrupt, kk)
			}
			k, v = append([]byte(nil), kk...), append([]byte(nil), vv...)
			return false, nil
		})
		if err != nil || k == nil {
			return err
		}
		name := string(k[len(prefix) : len(k)-9])
		if at != Latest && hlcFromInv(k) > at {
			// The newest version is too new: seek to the one in force at at.
			if k, v, err = t.seekChain(dentryChain(sid, dir, name), at); err != nil {
				return err
			}
		}
		if k != nil {
			var d Dentry
			if err := decode(k, v, &d); err != nil {
				return err
			}
			if d.Ino != 0 {
				d.Name, d.HLC = name, hlcFromInv(k)
				if !fn(d) {
					return nil
				}
			}
		}
		// Skip the rest of this name's chain: prefix name 0x01.
		pos = append(append(append([]byte(nil), prefix...), name...), 1)
	}
}

// Path returns the path of ino relative to the session root ("." for the
// root itself), following each inode's most recent link.
func (t *ReadTx) Path(sid SessionID, ino Ino, at HLC) (string, error) {
	h, err := t.Header(sid)
	if err != nil {
		return "", err
	}
	var parts []string
	for i := 0; ino != h.Root; i++ {
		if i > 4096 {
			return "", fmt.Errorf("%w: parent chain of inode %d does not reach the root", ErrCorrupt, ino)
		}
		n, err := t.Inode(sid, ino, at)
		if err != nil {
			return "", err
		}
		if n.Parent == 0 {
			return "", fmt.Errorf("%w: inode %d has no parent", ErrNotFound, ino)
		}
		parts = append(parts, n.Name)
		ino = n.Parent
	}
	if len(parts) == 0 {
		return ".", nil
	}
	var b bytes.Buffer
	for i := len(parts) - 1; i >= 0; i-- {
		b.WriteString(parts[i])
		if i > 0 {
			b.WriteByte('/')
		}
	}
	return b.String(), nil
}

// Events calls fn for each event of the session with Seq > after, oldest
// first, until fn returns false.
func (t *ReadTx) Events(sid SessionID, after uint64, fn func(Event) bool) error {
	if after == math.MaxUint64 {
		return nil // no Seq is greater (after+1 would wrap to every event)
	}
	prefix := key(pEvent, sid[:])
	return t.r.Scan(eventKey(sid, after+1), kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
		var ev Event
		if err := decode(k, v, &ev); err != nil {
			return false, err
		}
		return fn(ev), nil
	})
}

// Checkpoint returns the HLC a checkpoint name stands for.
func (t *ReadTx) Checkpoint(sid SessionID, name string) (HLC, bool, error) {
	v, err := t.r.Get(checkpointKey(sid, name))
	if err != nil || v == nil {
		return 0, false, err
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: checkpoint %q", ErrCorrupt, name)
	}
	return HLC(binary.BigEndian.Uint64(v)), true, nil
}

// Checkpoints calls fn for each named checkpoint of the session.
func (t *ReadTx) Checkpoints(sid SessionID, fn func(name string, at HLC) bool) error {
	prefix := key(pCheckpoint, sid[:])
	return t.r.Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
		if len(v) != 8 {
			return false, fmt.Errorf("%w: checkpoint key %q", ErrCorrupt, k)
		}
		return fn(string(k[len(prefix):]), HLC(binary.BigEndian.Uint64(v))), nil
	})
}

// nowNs is the wall time stamped into mtime/ctime.
func nowNs() int64 { return time.Now().UnixNano() }
