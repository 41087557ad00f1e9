package mvcc

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/padfs/padfs/mvcc/kv"
)

// The supersession record. Every commit that writes a version over an
// older one (or writes a tombstone) also writes, in the same transaction,
// one record of what it did, keyed by session and plain HLC so that the
// records are in time order:
//
//	S S t5 -> {superseded: [D S 7 "a" ^t2, I S 42 ^t3], tombs: [D S 7 "b" ^t5]}
//
// Pruning history up to T then reads the records of the commits up to T,
// in order, instead of every chain of the store (prune.go). A version
// superseded at t5 lived from its own HLC (the last 8 bytes of its key)
// until t5. Tombstones (an unlinked name, a removed xattr, an inode at
// link count 0) are listed by the commit that wrote them, since nothing
// may ever supersede them.
//
// Chunk references count: "R" h sid holds the number of the session's
// inode versions that name chunk h, so that a prune knows at once when it
// deleted the last version using a chunk. An empty value is a reference
// written by a padfs that did not count (format 2 stores); such sessions
// are recounted once, by the first prune that meets one (recountChunkRefs).

// supersession is the value of an S record.
type supersession struct {
	Superseded [][]byte `cbor:"1,keyasint,omitempty"`
	Tombs      [][]byte `cbor:"2,keyasint,omitempty"`
}

// versionPut notes, before a version key k of chain is written by this
// commit, the version it supersedes (the chain's newest, if older than the
// commit) and whether the new version is a tombstone. It returns the value
// k already had in this commit (a second write of the same version), or
// nil.
func (t *WriteTx) versionPut(chain, k []byte, tomb bool) ([]byte, error) {
	var prevV []byte
	prev, ok := t.heads.get(chain)
	if !ok {
		var err error
		if prev, err = t.seekHead(chain); err != nil {
			return nil, err
		}
	}
	// k is the caller's and stays unchanged: the records keep it, uncopied.
	t.heads.set(chain, k)
	same := prev != nil && bytes.Equal(prev, k)
	if same {
		var err error
		if prevV, err = t.w.Get(k); err != nil {
			return nil, err
		}
		prevV = append([]byte(nil), prevV...)
	}
	if t.sup.Superseded == nil && t.sup.Tombs == nil {
		// Empty, not nil, encodes the same (omitempty).
		t.sup.Superseded, t.sup.Tombs = t.supArr[:0:2], t.supArr[2:2]
	}
	if prev != nil && !same {
		t.sup.Superseded = append(t.sup.Superseded, prev)
	}
	if same {
		// Rewritten in this commit: only its tombstone status may change.
		t.sup.Tombs = removeKey(t.sup.Tombs, k)
	}
	if tomb {
		t.sup.Tombs = append(t.sup.Tombs, k)
	}
	return prevV, nil
}

// headCache is a commit's newest key of each chain it read as of Latest
// or wrote (nil for an empty chain), so that writing the chain's next
// version needs no second seek to learn what it supersedes. The keys are
// never changed once stored. Rewriting a known chain's head, as every
// write after a read does, allocates nothing.
type headCache struct {
	idx  map[string]int
	keys [][]byte
	arr  [4][]byte // keys' first (an unlink has three chains)
}

func (h *headCache) get(chain []byte) ([]byte, bool) {
	if h == nil {
		return nil, false
	}
	i, ok := h.idx[string(chain)]
	if !ok {
		return nil, false
	}
	return h.keys[i], true
}

func (h *headCache) set(chain, k []byte) {
	if h == nil {
		return
	}
	if i, ok := h.idx[string(chain)]; ok {
		h.keys[i] = k
		return
	}
	if h.idx == nil {
		h.idx, h.keys = map[string]int{}, h.arr[:0]
	}
	h.idx[string(chain)] = len(h.keys)
	h.keys = append(h.keys, k)
}

// seekHead is the newest key of chain (nil: none), which versionPut is
// about to replace as the head: seekChain without its value's copy.
func (t *ReadTx) seekHead(chain []byte) ([]byte, error) {
	start := append(append(make([]byte, 0, len(chain)+8), chain...), inv(Latest)...)
	kk, _, err := kv.First(t.r, start, kv.PrefixEnd(chain))
	if err != nil || len(kk) != len(chain)+8 {
		return nil, err
	}
	return append([]byte(nil), kk...), nil
}

func removeKey(ks [][]byte, k []byte) [][]byte {
	out := ks[:0]
	for _, x := range ks {
		if !bytes.Equal(x, k) {
			out = append(out, x)
		}
	}
	return out
}

// writeSupersessionLocked writes the commit's S record, if it has one, and
// notes in the session's prune state since when its records are complete.
func (t *WriteTx) writeSupersessionLocked(kind commitKind) error {
	if err := t.s.noteRecordsLocked(t.w, t.sid, t.hlc, kind == commitNew); err != nil {
		return err
	}
	if len(t.sup.Superseded) == 0 && len(t.sup.Tombs) == 0 {
		return nil
	}
	return t.put(supersededKey(t.sid, t.hlc), &t.sup)
}

// noteRecordsLocked makes sure the session's prune state says since when
// its S records (and chunk counts) are complete: from its creation for a
// session created by this padfs, else from the first commit this padfs
// made. One Get per session and process.
func (s *Store) noteRecordsLocked(tx kv.Txn, sid SessionID, at HLC, created bool) error {
	if _, ok := s.recorded.Load(sid); ok {
		return nil
	}
	ps, err := readPruneState(tx, sid)
	if err != nil {
		return err
	}
	if ps.RecordsSince == 0 {
		ps.RecordsSince = at
		ps.Counted = created
		if created {
			ps.ScannedTo = at // nothing before: no scan ever needed
		}
		if err := writePruneState(tx, sid, ps); err != nil {
			return err
		}
	}
	s.recorded.Store(sid, true)
	return nil
}

// chunkSet returns the distinct chunks n names.
func chunkSet(n *Inode) []Hash {
	var out []Hash
	seen := map[Hash]bool{}
	for _, e := range n.Extents {
		if e.Chunk == nil {
			continue
		}
		var h Hash
		copy(h[:], e.Chunk)
		if !seen[h] {
			seen[h] = true
			out = append(out, h)
		}
	}
	return out
}

// refCount decodes a chunk reference's value: the count, and whether the
// reference is counted at all.
func refCount(k, v []byte) (uint64, bool, error) {
	switch len(v) {
	case 0:
		return 0, false, nil
	case 8:
		return binary.BigEndian.Uint64(v), true, nil
	}
	return 0, false, fmt.Errorf("%w: chunk reference %q is %d bytes", ErrCorrupt, k, len(v))
}

// adjustChunkRefs moves the session's chunk counts from the version old
// (nil: none) to the version n of the same key.
func (t *WriteTx) adjustChunkRefs(old, n *Inode) error {
	was := map[Hash]bool{}
	if old != nil {
		for _, h := range chunkSet(old) {
			was[h] = true
		}
	}
	for _, h := range chunkSet(n) {
		if was[h] {
			delete(was, h)
			continue
		}
		if err := t.incChunkRef(h); err != nil {
			return err
		}
	}
	for h := range was {
		rk := chunkRefKey(h, t.sid)
		v, err := t.w.Get(rk)
		if err != nil || v == nil {
			return err
		}
		c, counted, err := refCount(rk, v)
		if err != nil || !counted {
			return err
		}
		if c <= 1 {
			err = t.w.Delete(rk) // an orphan chunk now, if nobody else has it
		} else {
			err = t.w.Put(rk, u64(c-1))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// incChunkRef counts one more version of the session naming chunk h.
func (t *WriteTx) incChunkRef(h Hash) error {
	rk := chunkRefKey(h, t.sid)
	v, err := t.w.Get(rk)
	if err != nil {
		return err
	}
	if v == nil {
		// The session did not hold this chunk yet, so nothing kept it from
		// being deleted as an orphan since PutContent stored it.
		if err := checkChunkLocked(t.w, h); err != nil {
			return err
		}
		return t.w.Put(rk, u64(1))
	}
	c, counted, err := refCount(rk, v)
	if err != nil || !counted {
		return err // not counted: a recount will count this version too
	}
	return t.w.Put(rk, u64(c+1))
}

// recountChunkRefsLocked counts, in one transaction, every inode version of
// sid per chunk and writes the counts: once per session written by a padfs
// that did not count, and after a redaction (which rewrites versions in
// place). It reads all of the session's inode versions, so it stalls
// writers for that long; hashes lists references to drop when no version
// names them any more (they are not found by the scan).
func recountChunkRefsLocked(tx kv.Txn, sid SessionID, hashes []Hash) error {
	counts := map[Hash]uint64{}
	err := scanKeys(tx, key(pInode, sid[:]), func(k, v []byte) error {
		var n Inode
		if err := decode(k, v, &n); err != nil {
			return err
		}
		for _, h := range chunkSet(&n) {
			counts[h]++
		}
		return nil
	})
	if err != nil {
		return err
	}
	for h, c := range counts {
		if err := tx.Put(chunkRefKey(h, sid), u64(c)); err != nil {
			return err
		}
	}
	for _, h := range hashes {
		if counts[h] == 0 {
			if err := tx.Delete(chunkRefKey(h, sid)); err != nil {
				return err
			}
		}
	}
	ps, err := readPruneState(tx, sid)
	if err != nil {
		return err
	}
	ps.Counted = true
	return writePruneState(tx, sid, ps)
}
