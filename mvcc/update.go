package mvcc

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/padfs/padfs/mvcc/kv"
)

// WriteTx is one commit: every record it writes is stamped with the same
// HLC, and it appends exactly one event to the session's log.
type WriteTx struct {
	ReadTx
	w   kv.Txn
	sid SessionID
	hlc HLC
	ev  Event

	staged      map[Ino]string // directory paths learned by this commit
	treeChanged bool           // a directory moved or went away
	sup         supersession   // what this commit superseded (superseded.go)
	hc          headCache      // heads' storage, one allocation with the commit
	enc         bytes.Buffer   // put's encoding, over encArr until a record outgrows it
	encArr      [512]byte
	supArr      [4][]byte // sup's first keys: superseded, then tombstones
	cnt         counters  // appendEventLocked's, which put would move to the heap
	evOut       Event
	dent        Dentry
}

// HLC is the stamp of this commit.
func (t *WriteTx) HLC() HLC { return t.hlc }

// Session is the session this commit writes to.
func (t *WriteTx) Session() SessionID { return t.sid }

// SetEvent describes the commit in the session's log (Seq and HLC are
// filled in at commit).
func (t *WriteTx) SetEvent(ev Event) { t.ev = ev }

// Update runs fn as one commit to session sid and returns its HLC. The
// session must exist and not be forgotten. fn must call SetEvent.
func (s *Store) Update(sid SessionID, fn func(*WriteTx) error) (HLC, error) {
	ev, err := s.commit(sid, commitLive, fn)
	return ev.HLC, err
}

// commitKind says what a commit requires of its session.
type commitKind int

const (
	commitLive commitKind = iota // exists and is not forgotten: tree operations
	commitAny                    // exists, forgotten or not: forget, redaction
	commitNew                    // does not exist yet: create, fork
	commitJob                    // marked by a job (job.go): its last commit
)

// commit is the one write path: it runs fn as one commit to sid, stamped
// with a fresh HLC taken inside the serialized write (so HLC order is
// commit order), appends the event fn set, and tells the watchers.
func (s *Store) commit(sid SessionID, kind commitKind, fn func(*WriteTx) error) (Event, error) {
	if err := s.FlushHeld(); err != nil {
		return Event{}, err
	}
	return s.commitThen(sid, kind, fn, nil)
}

// commitThen is commit without committing a held create first; done, if
// set, is called with the outcome as soon as the transaction has ended.
func (s *Store) commitThen(sid SessionID, kind commitKind, fn func(*WriteTx) error, done func(error)) (Event, error) {
	t := new(WriteTx) // outside: the event it ends with is then not one more allocation
	err := s.kv.Update(func(tx kv.Txn) error {
		*t = WriteTx{ReadTx: ReadTx{s: s, r: tx}, w: tx, sid: sid}
		t.heads = &t.hc
		stored, err := storedHW(tx)
		if err != nil {
			return err
		}
		if err := t.checkSessionLocked(kind, stored); err != nil {
			return err
		}
		if t.hlc, err = s.tickFromLocked(tx, stored); err != nil {
			return err
		}
		if err := s.paths.checkLocked(tx, sid); err != nil {
			return err
		}
		if err := fn(t); err != nil {
			return err
		}
		if kind == commitNew {
			// Every entry of a new session is written by this build.
			if err := markLiveCompleteLocked(tx, sid); err != nil {
				return err
			}
		}
		if t.ev.Op == "" {
			return fmt.Errorf("mvcc: commit without an event")
		}
		// Still inside the serialized write: no other commit sees the
		// cache between this update and our commit.
		if t.treeChanged {
			s.paths.drop(sid)
		} else {
			s.paths.add(sid, t.staged)
		}
		if err := t.writeSupersessionLocked(kind); err != nil {
			return err
		}
		ev, err := t.appendEventLocked()
		if err == nil {
			s.paths.setSeq(sid, ev.Seq)
			if done == nil {
				deferIfMetadata(tx, kind, ev.Op)
			}
		}
		return err
	})
	if done != nil {
		done(err)
	}
	if err != nil {
		return Event{}, err
	}
	ev := t.evOut
	if kind == commitLive {
		s.lastLive.Store(&liveMark{sid: sid, hw: ev.HLC})
	}
	s.notify(sid, ev)
	return ev, nil
}

// liveMark says that the commit that wrote high-water mark hw found session
// sid live (its header there, not busy, not forgotten). Every write
// transaction that can change that (forget, a purge or redaction mark,
// another process's commits) takes an HLC and so moves the stored
// high-water mark: while it still reads hw, no transaction but reads and
// uncommitted attempts has happened since, and sid is still live. A commit
// stream to one session (rm -rf, untar) then skips the header decode and the
// state seek.
type liveMark struct {
	sid SessionID
	hw  HLC
}

// checkSessionLocked checks that sid may take a commit of this kind;
// stored is the high-water mark as the transaction found it.
func (t *WriteTx) checkSessionLocked(kind commitKind, stored HLC) error {
	if kind == commitLive && stored != 0 {
		if m := t.s.lastLive.Load(); m != nil && m.sid == t.sid && m.hw == stored {
			return nil
		}
	}
	if kind == commitNew {
		if v, err := t.w.Get(headerKey(t.sid)); err != nil {
			return err
		} else if v != nil {
			return fmt.Errorf("%w: session %s already exists", ErrExist, t.sid)
		}
		return nil
	}
	if kind == commitJob {
		h, err := t.rawHeader(t.sid)
		if err == nil && h.Busy == "" {
			err = fmt.Errorf("%w: session %s is not marked for a job", ErrCorrupt, t.sid)
		}
		return err
	}
	if _, err := t.Header(t.sid); err != nil {
		return err
	}
	if kind == commitLive {
		if gone, at, err := t.Forgotten(t.sid, Latest); err != nil {
			return err
		} else if gone {
			return fmt.Errorf("%w: %s was forgotten at %s", ErrForgotten, t.sid, at)
		}
	}
	return nil
}

// appendEventLocked writes the event with the next sequence number and bumps
// the session counters and the store's HLC high-water mark.
func (t *WriteTx) appendEventLocked() (Event, error) {
	ck := countersKey(t.sid)
	c := &t.cnt
	*c = counters{}
	if v, err := t.w.Get(ck); err != nil {
		return Event{}, err
	} else if v != nil {
		if err := decode(ck, v, c); err != nil {
			return Event{}, err
		}
	}
	c.NextSeq++
	c.LastHLC = t.hlc
	ev := &t.evOut
	*ev = t.ev
	ev.Seq, ev.HLC = c.NextSeq, t.hlc
	if err := t.put(eventKey(t.sid, ev.Seq), ev); err != nil {
		return Event{}, err
	}
	if err := t.put(ck, c); err != nil {
		return Event{}, err
	}
	return *ev, nil // tickLocked wrote the high-water mark
}

func (t *WriteTx) put(k []byte, v any) error {
	if t.enc.Cap() == 0 {
		t.enc = *bytes.NewBuffer(t.encArr[:0])
	}
	b, err := encodeTo(&t.enc, v) // Put copies: the buffer serves every put
	if err != nil {
		return fmt.Errorf("mvcc: encode %q: %w", k, err)
	}
	return t.w.Put(k, b)
}

// PutInode writes a new version of n stamped with this commit's HLC and
// counts the session's references to n's chunks.
func (t *WriteTx) PutInode(n *Inode) error {
	n.HLC = t.hlc
	chain, k := inodeVersion(t.sid, n.Ino, t.hlc)
	prev, err := t.versionPut(chain, k, n.Nlink == 0)
	if err != nil {
		return err
	}
	var old *Inode
	if prev != nil {
		old = new(Inode)
		if err := decode(k, prev, old); err != nil {
			return err
		}
	}
	if err := t.adjustChunkRefs(old, n); err != nil {
		return err
	}
	return t.put(k, n)
}

// PutDentry writes a new version of the entry name in parent; ino 0 writes
// a tombstone.
func (t *WriteTx) PutDentry(parent Ino, name string, ino Ino, typ uint32) error {
	chain, k := dentryVersion(t.sid, parent, name, t.hlc)
	if _, err := t.versionPut(chain, k, ino == 0); err != nil {
		return err
	}
	t.dent = Dentry{Ino: ino, Type: typ} // in the WriteTx: put would move it to the heap
	if err := t.put(k, &t.dent); err != nil {
		return err
	}
	return t.putLive(parent, name, ino, typ)
}

// putChunkRefs makes sure the session references n's chunks (redaction,
// which rewrites versions in place and then recounts).
func (t *WriteTx) putChunkRefs(n *Inode) error {
	for _, h := range chunkSet(n) {
		if err := t.incChunkRef(h); err != nil {
			return err
		}
	}
	return nil
}

// AllocIno returns a fresh inode number, unique across the store.
func (t *WriteTx) AllocIno() (Ino, error) {
	k := metaKey("ino")
	v, err := t.w.Get(k)
	if err != nil {
		return 0, err
	}
	next := uint64(1)
	if len(v) == 8 {
		next = binary.BigEndian.Uint64(v)
	}
	if err := t.w.Put(k, u64(next+1)); err != nil {
		return 0, err
	}
	return Ino(next + 1), nil
}

// reserveInos takes n more inode numbers after AllocIno's for the held
// creates (held.go) and returns them as [first, end).
func (t *WriteTx) reserveInos(n uint64) (Ino, Ino, error) {
	k := metaKey("ino")
	v, err := t.w.Get(k)
	if err != nil {
		return 0, 0, err
	}
	if len(v) != 8 {
		return 0, 0, fmt.Errorf("%w: inode counter is %d bytes", ErrCorrupt, len(v))
	}
	last := binary.BigEndian.Uint64(v)
	if err := t.w.Put(k, u64(last+n)); err != nil {
		return 0, 0, err
	}
	return Ino(last + 1), Ino(last + n + 1), nil
}

// Latest reads the current version of ino inside this commit.
func (t *WriteTx) Latest(ino Ino) (*Inode, error) { return t.Inode(t.sid, ino, Latest) }

// PutCheckpoint names this commit's HLC.
func (t *WriteTx) PutCheckpoint(name string, at HLC) error {
	return t.w.Put(checkpointKey(t.sid, name), u64(uint64(at)))
}
