package mvcc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// The live-entry index. Listing a directory from its entry chains costs a
// seek per name it ever held, tombstones included, so a directory that once
// held 100,000 build outputs lists slowly forever. So every commit that
// writes an entry version also keeps, in the same transaction, one key per
// name that is live now:
//
//	L S 7 "main.go"   -> {ino 42, type, hlc t3}   (the chain's newest version, not a tombstone)
//	L S               -> {complete}                 (the session's index state)
//
// Listing the latest tree scans "L" sid dir: one key per live name. The
// past (.asof/) keeps reading the chains. The keys are derived: fsck checks
// them against the chains and --repair rebuilds them; an archive leaves
// them out and its import derives them.
//
// A session written by an older padfs has no index. Its listings use the
// chains until BuildLiveIndex (run at open) has swept every chain once, in
// batches that each commit their keys and how far they got, so that an
// interrupted build resumes where it stopped; "complete" is written by the
// last batch. Commits keep the keys of the names they touch all along, so
// a batch and a commit can interleave in any order. The first index key a
// store gets raises its format to 3, which older padfs refuse: they would
// write entries without keeping the index.

// formatLiveIndex is the store format that has live-entry keys.
const formatLiveIndex = 3

// liveEntry is the value of a live-entry key.
type liveEntry struct {
	Ino  Ino    `cbor:"1,keyasint"`
	Type uint32 `cbor:"2,keyasint,omitempty"`
	HLC  HLC    `cbor:"3,keyasint"` // of the entry version it mirrors
}

// liveState is the value of a session's index state key.
type liveState struct {
	Complete bool `cbor:"1,keyasint,omitempty"`
	// Next is the entry chain the build continues at ("D" sid parent name
	// 0x00); empty: at the session's first chain.
	Next []byte `cbor:"2,keyasint,omitempty"`
	// Entries counts the live entries the build wrote so far.
	Entries uint64 `cbor:"3,keyasint,omitempty"`
}

// liveBatch is how many entry chains one build transaction reads (a
// variable so that tests can interrupt a build between small batches).
var liveBatch = 8192

// liveBatchDone, if set, is called after each committed build batch (tests).
var liveBatchDone func(sid SessionID, st liveState)

func liveKey(sid SessionID, parent Ino, name string) []byte {
	return key(pLive, sid[:], u64(uint64(parent)), []byte(name))
}

func livePrefix(sid SessionID, dir Ino) []byte { return key(pLive, sid[:], u64(uint64(dir))) }

func liveStateKey(sid SessionID) []byte { return key(pLive, sid[:]) }

// putLive mirrors an entry version this commit writes (ino 0: a tombstone)
// in the live index.
func (t *WriteTx) putLive(parent Ino, name string, ino Ino, typ uint32) error {
	lk := liveKey(t.sid, parent, name)
	if ino == 0 {
		return t.w.Delete(lk)
	}
	return t.put(lk, &liveEntry{Ino: ino, Type: typ, HLC: t.hlc})
}

// markLiveCompleteLocked says the session's index is complete: for a new
// session, whose every entry this build writes.
func markLiveCompleteLocked(tx kv.Txn, sid SessionID) error {
	if err := raiseFormat(tx, formatLiveIndex); err != nil {
		return err
	}
	b, err := encode(&liveState{Complete: true})
	if err != nil {
		return err
	}
	return tx.Put(liveStateKey(sid), b)
}

// readLiveState returns the session's index state (zero: none yet).
func readLiveState(r kv.Reader, sid SessionID) (liveState, error) {
	var st liveState
	k := liveStateKey(sid)
	v, err := r.Get(k)
	if err != nil || v == nil {
		return st, err
	}
	err = decode(k, v, &st)
	return st, err
}

// liveIndexed reports whether sid's index is complete, so that its latest
// listings may read it. Only "complete" is cached: it never goes back.
func (t *ReadTx) liveIndexed(sid SessionID) (bool, error) {
	if _, ok := t.s.liveDone.Load(sid); ok {
		return true, nil
	}
	st, err := readLiveState(t.r, sid)
	if err != nil || !st.Complete {
		return false, err
	}
	t.s.liveDone.Store(sid, true)
	return true, nil
}

// readDirLive lists dir's live entries from the index, in name order.
func (t *ReadTx) readDirLive(sid SessionID, dir Ino, fn func(Dentry) bool) error {
	prefix := livePrefix(sid, dir)
	return t.r.Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
		var e liveEntry
		if err := decode(k, v, &e); err != nil {
			return false, err
		}
		return fn(Dentry{Ino: e.Ino, Type: e.Type, Name: string(k[len(prefix):]), HLC: e.HLC}), nil
	})
}

// lookupLive answers a latest lookup from the index (one Get, not a seek
// into the chain), if sid's index is complete: ok says it answered. In a
// commit a live name's entry also tells the chain's newest key, which
// spares the write of its next version a seek (versionPut); an absent
// name's chain may end in a tombstone, which that write must still find.
func (t *ReadTx) lookupLive(sid SessionID, parent Ino, name string) (Dentry, bool, error) {
	if ok, err := t.liveIndexed(sid); !ok || err != nil {
		return Dentry{}, false, err
	}
	lk := liveKey(sid, parent, name)
	v, err := t.r.Get(lk)
	if err != nil {
		return Dentry{}, true, err
	}
	if v == nil {
		return Dentry{}, true, nameNotFound(name)
	}
	var e liveEntry
	if err := decode(lk, v, &e); err != nil {
		return Dentry{}, true, err
	}
	if t.heads != nil {
		chain := dentryChain(sid, parent, name)
		if _, seen := t.heads.get(chain); !seen {
			t.heads.set(chain, append(chain, inv(e.HLC)...))
		}
	}
	return Dentry{Ino: e.Ino, Type: e.Type, Name: name, HLC: e.HLC}, true, nil
}

// liveHead is the newest version of one entry chain, as the build reads it.
type liveHead struct {
	sid    SessionID
	parent Ino
	name   string
	d      Dentry // Ino 0: a tombstone
}

// chainHeads calls fn with the newest version of each entry chain under
// prefix from pos on, up to limit chains (0: no limit), and returns the
// position after the last one (nil: no chain left). It is one scan over
// the versions, not a seek per chain.
func chainHeads(r kv.Reader, prefix, pos []byte, limit int, fn func(liveHead) error) ([]byte, error) {
	var heads []liveHead
	var next, cur []byte
	err := r.Scan(pos, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
		if len(k) < 1+16+8+1+8 || k[len(k)-9] != 0 {
			return false, fmt.Errorf("%w: malformed directory entry key %q", ErrCorrupt, k)
		}
		chain := k[:len(k)-8]
		if cur != nil && bytes.Equal(chain, cur) {
			return true, nil // an older version of the same name
		}
		if limit > 0 && len(heads) == limit {
			next = append([]byte(nil), chain...)
			return false, nil
		}
		cur = append(cur[:0], chain...)
		h := liveHead{parent: Ino(binary.BigEndian.Uint64(k[17:25])), name: string(k[25 : len(k)-9])}
		copy(h.sid[:], k[1:17])
		if err := decode(k, v, &h.d); err != nil {
			return false, err
		}
		h.d.Name, h.d.HLC = h.name, hlcFromInv(k)
		heads = append(heads, h)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	for _, h := range heads {
		if err := fn(h); err != nil {
			return nil, err
		}
	}
	return next, nil
}

// setLiveFromHead makes the index key of one chain agree with its head.
func setLiveFromHead(tx kv.Txn, h liveHead) error {
	lk := liveKey(h.sid, h.parent, h.name)
	if h.d.Ino == 0 {
		return tx.Delete(lk)
	}
	b, err := encode(&liveEntry{Ino: h.d.Ino, Type: h.d.Type, HLC: h.d.HLC})
	if err != nil {
		return err
	}
	return tx.Put(lk, b)
}

// BuildLiveIndex builds the live-entry index of every session that lacks
// one (written by an older padfs), in batches of its own transactions, and
// resumes an interrupted build. A session whose chains do not read is left
// to the chains (and logged): fsck reports what is damaged.
func (s *Store) BuildLiveIndex() error {
	var sids []SessionID
	err := s.View(func(t *ReadTx) error {
		prefix := []byte{pHeader}
		return t.r.Scan(prefix, kv.PrefixEnd(prefix), func(k, _ []byte) (bool, error) {
			if sid, ok := sessionOf(k); ok && len(k) == 17 {
				sids = append(sids, sid)
			}
			return true, nil
		})
	})
	if err != nil {
		return err
	}
	for _, sid := range sids {
		if err := s.buildLiveIndex(sid); err != nil {
			if errors.Is(err, ErrCorrupt) {
				slog.Warn("live-entry index not built; listings read the entry chains", "session", sid, "err", err)
				continue
			}
			return err
		}
	}
	return nil
}

func (s *Store) buildLiveIndex(sid SessionID) error {
	if _, ok := s.liveDone.Load(sid); ok {
		return nil
	}
	start, logged := time.Now(), false
	prefix := key(pDentry, sid[:])
	for {
		var st liveState
		err := s.kv.Update(func(tx kv.Txn) error {
			var err error
			if st, err = readLiveState(tx, sid); err != nil || st.Complete {
				return err
			}
			if v, err := tx.Get(headerKey(sid)); err != nil || v == nil {
				st.Complete = true // purged meanwhile: nothing to build
				return err
			}
			if err := raiseFormat(tx, formatLiveIndex); err != nil {
				return err
			}
			pos := st.Next
			if len(pos) == 0 {
				pos = prefix
			}
			next, err := chainHeads(tx, prefix, pos, liveBatch, func(h liveHead) error {
				if h.d.Ino != 0 {
					st.Entries++
				}
				return setLiveFromHead(tx, h)
			})
			if err != nil {
				return err
			}
			st.Next, st.Complete = next, next == nil
			b, err := encode(&st)
			if err != nil {
				return err
			}
			return tx.Put(liveStateKey(sid), b)
		})
		if err != nil {
			return fmt.Errorf("live-entry index of session %s: %w", sid, err)
		}
		if liveBatchDone != nil {
			liveBatchDone(sid, st)
		}
		if st.Complete {
			s.liveDone.Store(sid, true)
			if logged {
				slog.Info("live-entry index built", "session", sid, "entries", st.Entries, "took", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if !logged && time.Since(start) > 2*time.Second {
			slog.Info("building the live-entry index (once, for a store of an older padfs)", "session", sid, "entries so far", st.Entries)
			logged = true
		}
	}
}

// rebuildLiveLocked rebuilds sid's whole index in tx from its chains
// (fsck --repair): every index key goes, then one per live head.
func rebuildLiveLocked(tx kv.Txn, sid SessionID) (int, error) {
	lp := key(pLive, sid[:])
	if err := scanKeys(tx, lp, func(k, _ []byte) error { return tx.Delete(k) }); err != nil {
		return 0, err
	}
	n := 0
	prefix := key(pDentry, sid[:])
	if _, err := chainHeads(tx, prefix, prefix, 0, func(h liveHead) error {
		if h.d.Ino != 0 {
			n++
		}
		return setLiveFromHead(tx, h)
	}); err != nil {
		return 0, err
	}
	return n, markLiveCompleteLocked(tx, sid)
}

// raiseFormat raises the store's format record to v (never lowers it).
func raiseFormat(tx kv.Txn, v uint64) error {
	k := metaKey("format")
	cur, err := tx.Get(k)
	if err != nil {
		return err
	}
	if len(cur) == 8 && binary.BigEndian.Uint64(cur) >= v {
		return nil
	}
	return tx.Put(k, u64(v))
}
