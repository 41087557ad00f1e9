package mvcc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// Pruning bounds a session's history. Prune(sid, T) deletes every version
// of an entry, inode or xattr that no point worth keeping can read: a
// version lives from its own HLC until the HLC of the version above it, and
// it stays when that span contains T or a kept checkpoint (or lies after
// T). Tombstones go too when nothing older stays below them (reading no
// version reads the same as reading a tombstone). So the state as of T,
// as of each kept checkpoint and at every point after T read exactly as
// before; as-of reads of any other point before T read the state as of T
// (the "floor", see clampAt). The commit log ("E"), checkpoints ("K"),
// session state and headers are kept.
//
// Cost: the S records of the commits up to T (superseded.go) name the
// versions to look at, so pruning a day reads that day's records. Sessions
// written by a padfs without records are scanned chain by chain, once, for
// the history before their first record. Work is done in short write
// transactions of at most pruneBatch versions, each followed by a pause as
// long as itself (pace), so writers wait at most one batch and keep about
// half of the write lock's time. Chunks whose last referencing version
// goes are deleted.

// pruneState is the session's "P" record.
type pruneState struct {
	// PrunedTo is the floor: as-of reads before it (except at Kept) read
	// the state as of PrunedTo.
	PrunedTo HLC   `cbor:"1,keyasint,omitempty"`
	Kept     []HLC `cbor:"2,keyasint,omitempty"`
	// RecordsSince is the HLC from which every commit wrote its S record
	// (0: no commit yet by a padfs that writes them).
	RecordsSince HLC `cbor:"3,keyasint,omitempty"`
	// ScannedTo: history up to here was pruned by a scan of the chains.
	ScannedTo HLC `cbor:"4,keyasint,omitempty"`
	// Counted says that the session's chunk references hold counts.
	Counted bool `cbor:"5,keyasint,omitempty"`
	// KeepLast is the --keep-last of the last prune: reads before the
	// floor find a file's version at their point if it is one of its
	// KeepLast newest (keptInode).
	KeepLast int `cbor:"6,keyasint,omitempty"`
}

func readPruneState(r kv.Reader, sid SessionID) (pruneState, error) {
	var ps pruneState
	k := pruneKey(sid)
	v, err := r.Get(k)
	if err != nil || v == nil {
		return ps, err
	}
	err = decode(k, v, &ps)
	return ps, err
}

func writePruneState(tx kv.Txn, sid SessionID, ps pruneState) error {
	b, err := encode(&ps)
	if err != nil {
		return fmt.Errorf("mvcc: encode prune state of %s: %w", sid, err)
	}
	return tx.Put(pruneKey(sid), b)
}

// pruneFloor is the cached part of a session's prune state that reads need.
type pruneFloor struct {
	to       HLC
	kept     []HLC
	created  HLC // reads before the session existed find nothing, as before
	keepLast int
}

// clampAt returns the point a read as of at really reads: at itself, or
// the session's floor if at lies in pruned history.
func (t *ReadTx) clampAt(sid SessionID, at HLC) (HLC, error) {
	if at == Latest {
		return at, nil
	}
	f, err := t.floor(sid)
	if err != nil {
		return at, err
	}
	if at >= f.to || at < f.created || slices.Contains(f.kept, at) {
		return at, nil
	}
	return f.to, nil
}

// floor returns the session's cached prune floor.
func (t *ReadTx) floor(sid SessionID) (pruneFloor, error) {
	var f pruneFloor
	if v, ok := t.s.floors.Load(sid); ok {
		f = v.(pruneFloor)
	} else {
		ps, err := readPruneState(t.r, sid)
		if err != nil {
			return f, err
		}
		f = pruneFloor{to: ps.PrunedTo, kept: ps.Kept, keepLast: ps.KeepLast}
		if ps.PrunedTo != 0 {
			h, err := t.Header(sid)
			if err != nil {
				return f, err
			}
			f.created = h.Created
		}
		// LoadOrStore: a prune that raised the floor meanwhile wins over
		// what this (older) snapshot says.
		if v, loaded := t.s.floors.LoadOrStore(sid, f); loaded {
			f = v.(pruneFloor)
		}
	}
	return f, nil
}

// PrunedTo returns the session's floor: as-of reads before it read the
// state as of it (0: never pruned), and the checkpoint points kept below it.
func (s *Store) PrunedTo(sid SessionID) (HLC, []HLC, error) {
	var ps pruneState
	err := s.View(func(t *ReadTx) error {
		var err error
		ps, err = readPruneState(t.r, sid)
		return err
	})
	return ps.PrunedTo, ps.Kept, err
}

// SeqAtOrBefore returns the sequence number of the session's last event
// at or before at (0: none), by binary search of the log.
func (t *ReadTx) SeqAtOrBefore(sid SessionID, at HLC) (uint64, error) {
	return t.seqAfterHLC(sid, at)
}

func (s *Store) dropPruneCache(sid SessionID) {
	s.floors.Delete(sid)
	s.recorded.Delete(sid)
}

// PruneOptions tune Prune.
type PruneOptions struct {
	// Before is T: history superseded before it goes.
	Before HLC
	// DropCheckpoints prunes the states of checkpoints before T too (the
	// names stay and read the state as of T).
	DropCheckpoints bool
	// DryRun computes the receipt and changes nothing.
	DryRun bool
	// UnlinkedBefore: inodes unlinked (link count 0) at or before it lose
	// their last version too. A file unlinked while open lives on for its
	// handles, so the default is an hour before now (and at most T).
	UnlinkedBefore HLC
	// KeepLast keeps, besides, the KeepLast newest versions of each inode
	// (each content or attribute change of a file is one version; names
	// and xattrs do not count), unless the inode was unlinked before
	// UnlinkedBefore. Reads before T find them (see Inode).
	KeepLast int
	// Progress, if set, is told the versions looked at so far.
	Progress Progress
}

// PruneReceipt says what a prune freed (or, dry, would free).
type PruneReceipt struct {
	Session SessionID `json:"session"`
	Before  HLC       `json:"-"`
	// Versions deleted: entry, inode and xattr versions (tombstones too).
	Versions int `json:"versions"`
	// Chunks deleted (no version of any session names them any more).
	Chunks int `json:"chunks"`
	// Bytes of keys and values deleted, chunks included.
	Bytes int64 `json:"bytes"`
	// Records is the number of S records read; Scanned the number of keys
	// read by the chain scan of history without records (0 when the
	// records cover it).
	Records int `json:"records"`
	// KeptLast counts the versions superseded before T kept by KeepLast.
	KeptLast int  `json:"kept_last"`
	Scanned  int  `json:"scanned"`
	DryRun   bool `json:"dry_run,omitempty"`
	// Kept lists the checkpoints whose state was kept below T.
	Kept []HLC `json:"-"`
	// Recounted says the session's chunk references were counted afresh
	// (once per session written by an older padfs).
	Recounted bool `json:"recounted,omitempty"`
}

// pruneBatch bounds the versions one write transaction of a prune handles.
const pruneBatch = 256

// pace waits, after a batch that began at t0, as long as the batch held
// the write lock (at most 10 ms): the writers waiting for the lock get it
// in between, instead of racing a prune that asks for it again at once.
func pace(t0 time.Time) { time.Sleep(min(time.Since(t0), 10*time.Millisecond)) }

// Prune deletes the history of sid before opt.Before (see the top of this
// file) and returns what it freed. Writers keep committing meanwhile.
func (s *Store) Prune(sid SessionID, opt PruneOptions) (*PruneReceipt, error) {
	s.pruneMu.Lock()
	defer s.pruneMu.Unlock()
	progress, stop := opt.Progress.detach()
	defer stop()
	if opt.UnlinkedBefore == 0 {
		opt.UnlinkedBefore = HLC(time.Now().Add(-time.Hour).UnixNano())
	}
	opt.UnlinkedBefore = min(opt.UnlinkedBefore, opt.Before)
	r := &PruneReceipt{Session: sid, Before: opt.Before, DryRun: opt.DryRun}
	pr := &pruner{sid: sid, r: r, unlinkedBefore: opt.UnlinkedBefore, unknown: map[Hash]bool{},
		keepLast: opt.KeepLast, lastKept: map[string][]byte{}, pins: &s.pins}
	if opt.DryRun {
		if err := s.pruneDry(pr, opt, progress); err != nil {
			return nil, err
		}
		return r, nil
	}
	ps, err := s.raiseFloor(pr, opt)
	if err != nil {
		return nil, err
	}
	if needScan(ps, r.Before) {
		if err := s.scanUnrecorded(pr, progress); err != nil {
			return r, err
		}
	}
	if err := s.pruneRecords(pr, progress); err != nil {
		return r, err
	}
	if len(pr.unknown) > 0 {
		if err := s.kv.Update(func(tx kv.Txn) error {
			pr.io = &pruneIO{r: tx, w: tx}
			return pr.resolveUnknown(tx)
		}); err != nil {
			return r, err
		}
	}
	return r, nil
}

// plan reads the session's prune state and settles the prune's T (not
// below the last prune's) and the points it keeps: the checkpoints before
// T still readable, unless dropped, then T.
func (p *pruner) plan(rd kv.Reader, t *ReadTx, before HLC, dropCheckpoints bool) (pruneState, error) {
	if _, err := t.Header(p.sid); err != nil {
		return pruneState{}, err
	}
	ps, err := readPruneState(rd, p.sid)
	if err != nil {
		return ps, err
	}
	r := p.r
	r.Before = max(before, ps.PrunedTo)
	r.Kept = nil
	if !dropCheckpoints {
		err = t.Checkpoints(p.sid, func(_ string, at HLC) bool {
			if at < r.Before && (at >= ps.PrunedTo || slices.Contains(ps.Kept, at)) && !slices.Contains(r.Kept, at) {
				r.Kept = append(r.Kept, at)
			}
			return true
		})
	}
	slices.Sort(r.Kept)
	p.points = append(slices.Clone(r.Kept), r.Before)
	return ps, err
}

// pruneDry fills the receipt of a prune that changes nothing, in one view.
func (s *Store) pruneDry(pr *pruner, opt PruneOptions, progress Progress) error {
	before := min(opt.Before, s.clock.Last())
	return s.View(func(t *ReadTx) error {
		ps, err := pr.plan(t.r, t, before, opt.DropCheckpoints)
		if err != nil {
			return err
		}
		pr.io = &pruneIO{r: t.r, gone: map[string]bool{}, refs: map[string][]byte{}}
		if needScan(ps, pr.r.Before) {
			if err := pr.scanChains(t.r, nil, progress); err != nil {
				return err
			}
		}
		if err := pr.records(t.r, nil, progress, -1); err != nil {
			return err
		}
		return pr.resolveUnknown(t.r)
	})
}

// raiseFloor plans a real prune and records its floor, before any version
// goes: from then on reads of pruned history read the state as of T, which
// the prune keeps. It returns the prune state it wrote.
func (s *Store) raiseFloor(pr *pruner, opt PruneOptions) (pruneState, error) {
	sid := pr.sid
	var ps pruneState
	err := s.kv.Update(func(tx kv.Txn) error {
		// T is never later than now: every commit after this one is later
		// than T, so the state as of T is settled.
		// (tickLocked: above the store's high-water, which another host
		// sharing the store may have raised.)
		now, err := s.tickLocked(tx)
		if err != nil {
			return err
		}
		t := &ReadTx{s: s, r: tx}
		if ps, err = pr.plan(tx, t, min(opt.Before, now), opt.DropCheckpoints); err != nil {
			return err
		}
		next := ps
		next.PrunedTo, next.Kept, next.KeepLast = pr.r.Before, pr.r.Kept, opt.KeepLast
		if err := writePruneState(tx, sid, next); err != nil {
			return err
		}
		h, err := t.Header(sid)
		if err != nil {
			return err
		}
		s.floors.Store(sid, pruneFloor{to: next.PrunedTo, kept: next.Kept, created: h.Created, keepLast: next.KeepLast})
		ps = next
		return nil
	})
	if err != nil {
		s.floors.Delete(sid) // the floor may not have reached the store
	}
	return ps, err
}

// scanUnrecorded prunes the history without S records chain by chain and
// notes how far the session has been scanned.
func (s *Store) scanUnrecorded(pr *pruner, progress Progress) error {
	if err := pr.scanChains(nil, s, progress); err != nil {
		return err
	}
	return s.kv.Update(func(tx kv.Txn) error {
		cur, err := readPruneState(tx, pr.sid)
		if err != nil {
			return err
		}
		cur.ScannedTo = max(cur.ScannedTo, pr.r.Before)
		return writePruneState(tx, pr.sid, cur)
	})
}

// pruneRecords works through the S records up to T in batches of at most
// pruneBatch versions, each its own write transaction followed by a pause.
func (s *Store) pruneRecords(pr *pruner, progress Progress) error {
	for {
		n := 0
		t0 := time.Now()
		if err := s.kv.Update(func(tx kv.Txn) error {
			pr.io = &pruneIO{r: tx, w: tx}
			n = 0
			return pr.records(tx, &n, progress, pruneBatch)
		}); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		pace(t0)
	}
}

// needScan says whether history before T lacks S records not yet scanned.
func needScan(ps pruneState, before HLC) bool {
	if ps.RecordsSince != 0 && ps.ScannedTo >= ps.RecordsSince {
		return false
	}
	return before > ps.ScannedTo
}

// pruner carries one prune's decisions and counts.
type pruner struct {
	sid            SessionID
	r              *PruneReceipt
	points         []HLC // kept checkpoints, then T
	unlinkedBefore HLC
	io             *pruneIO
	unknown        map[Hash]bool // chunks whose reference was not counted
	pos            []byte        // next S record
	keepLast       int
	// lastKept caches per inode chain the oldest version KeepLast keeps
	// (nil: none). Versions written meanwhile only make it keep more.
	lastKept map[string][]byte
	pins     *chunkPins // not freed (stream.go)
}

// inLast says whether the inode version vk is among the keepLast newest of
// its chain. It reads at most keepLast keys of a chain, once per prune.
func (p *pruner) inLast(vk []byte) (bool, error) {
	if p.keepLast <= 0 || vk[0] != pInode {
		return false, nil
	}
	chain := vk[:len(vk)-8]
	b, ok := p.lastKept[string(chain)]
	if !ok {
		var err error
		if b, err = p.lastBound(chain); err != nil {
			return false, err
		}
		p.lastKept[string(chain)] = b
	}
	return b != nil && bytes.Compare(vk, b) <= 0, nil
}

// lastBound returns the oldest version key of an inode chain that
// keepLast keeps (the keepLast-th counted, or the chain's oldest), nil if
// the inode was unlinked before unlinkedBefore.
func (p *pruner) lastBound(chain []byte) ([]byte, error) {
	var b []byte
	var c lastCounter
	var ferr error
	err := p.io.scan(chain, kv.PrefixEnd(chain), func(k []byte) bool {
		if len(k) != len(chain)+8 {
			return true
		}
		v, err := p.io.get(k)
		if err != nil {
			ferr = err
			return false
		}
		if !c.seen {
			if tomb, err := isTomb(k, v); err != nil || tomb && hlcFromInv(k) <= p.unlinkedBefore {
				ferr = err
				return false
			}
		}
		if ferr = c.add(k, v); ferr != nil {
			return false
		}
		b = append([]byte(nil), k...)
		return c.n < p.keepLast
	})
	if err == nil {
		err = ferr
	}
	if err != nil || !c.seen {
		return nil, err
	}
	return b, nil
}

// lastCounter counts, newest first, the versions of an inode chain that
// count for keep-last: all but the truncation of a rewrite, an empty
// version that a non-empty one superseded (a shell redirect commits the
// O_TRUNC, then the write). Such a version stays if a counted one older
// than it stays.
type lastCounter struct {
	seen      bool
	newerSize uint64
	n         int
}

func (c *lastCounter) add(k, v []byte) error {
	var n Inode
	if err := decode(k, v, &n); err != nil {
		return err
	}
	if !c.seen || n.Size != 0 || c.newerSize == 0 {
		c.n++
	}
	c.seen, c.newerSize = true, n.Size
	return nil
}

// keptAt says whether a version that lived from w until s is read at a
// point kept.
func (p *pruner) keptAt(w, s HLC) bool {
	for _, pt := range p.points {
		if w <= pt && pt < s {
			return true
		}
	}
	return false
}

// records handles up to limit versions' worth of S records up to T (limit
// < 0: all), and adds the records handled to *n.
func (p *pruner) records(rd kv.Reader, n *int, progress Progress, limit int) error {
	if p.pos == nil {
		p.pos = key(pSuperseded, p.sid[:])
	}
	end := supersededKey(p.sid, p.r.Before+1)
	type rec struct {
		k []byte
		s supersession
	}
	work := 0
	for limit < 0 || work < limit {
		var batch []rec
		err := rd.Scan(p.pos, end, func(k, v []byte) (bool, error) {
			if p.io.gone[string(k)] {
				return true, nil
			}
			var s supersession
			if err := decode(k, v, &s); err != nil {
				return false, err
			}
			batch = append(batch, rec{append([]byte(nil), k...), s})
			work += len(s.Superseded) + len(s.Tombs) + 1
			return limit < 0 && len(batch) < 256 || work < limit, nil
		})
		if err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for _, rc := range batch {
			if err := p.record(rc.k, rc.s); err != nil {
				return err
			}
			p.r.Records++
			if n != nil {
				*n++
			}
			p.pos = append(append([]byte(nil), rc.k...), 0)
		}
		progress.report("prune", int64(p.r.Records), 0)
	}
	return nil
}

// record prunes what one S record names and keeps (rewritten) the part
// that must stay.
func (p *pruner) record(k []byte, rec supersession) error {
	at := HLC(binary.BigEndian.Uint64(k[len(k)-8:]))
	var rest supersession
	for _, vk := range rec.Superseded {
		if len(vk) < 9 {
			return fmt.Errorf("%w: supersession record %q names key %q", ErrCorrupt, k, vk)
		}
		if p.keptAt(hlcFromInv(vk), at) {
			rest.Superseded = append(rest.Superseded, vk)
			continue
		}
		if last, err := p.inLast(vk); err != nil {
			return err
		} else if last {
			p.r.KeptLast++
			rest.Superseded = append(rest.Superseded, vk)
			continue
		}
		if err := p.deleteVersion(vk); err != nil {
			return err
		}
	}
	for _, vk := range rec.Tombs {
		if len(vk) < 9 {
			return fmt.Errorf("%w: supersession record %q names key %q", ErrCorrupt, k, vk)
		}
		ok, err := p.tombDeletable(vk)
		if err != nil {
			return err
		}
		if !ok {
			rest.Tombs = append(rest.Tombs, vk)
			continue
		}
		if err := p.deleteVersion(vk); err != nil {
			return err
		}
	}
	if len(rest.Superseded) == 0 && len(rest.Tombs) == 0 {
		return p.io.del(k)
	}
	if len(rest.Superseded) == len(rec.Superseded) && len(rest.Tombs) == len(rec.Tombs) {
		return nil
	}
	b, err := encode(&rest)
	if err != nil {
		return err
	}
	return p.io.put(k, b)
}

// tombDeletable says whether the tombstone version vk may go: nothing older
// stays in its chain (else reads at its span would find that), and an
// unlinked inode was unlinked before UnlinkedBefore.
func (p *pruner) tombDeletable(vk []byte) (bool, error) {
	if vk[0] == pInode && hlcFromInv(vk) > p.unlinkedBefore {
		return false, nil
	}
	chain := vk[:len(vk)-8]
	older := false
	err := p.io.scan(append(append([]byte(nil), vk...), 0), kv.PrefixEnd(chain), func(k []byte) bool {
		if len(k) == len(vk) {
			older = true
			return false
		}
		return true
	})
	return !older, err
}

// deleteVersion deletes one version key (if still there) and, for an
// inode version, its chunk references; counts what went.
func (p *pruner) deleteVersion(vk []byte) error {
	v, err := p.io.get(vk)
	if err != nil || v == nil {
		return err
	}
	if vk[0] == pInode {
		var n Inode
		if err := decode(vk, v, &n); err != nil {
			return err
		}
		for _, h := range chunkSet(&n) {
			if err := p.unref(h); err != nil {
				return err
			}
		}
	}
	p.r.Versions++
	p.r.Bytes += int64(len(vk) + len(v))
	return p.io.del(vk)
}

// unref counts one version of the session fewer naming chunk h and deletes
// the chunk once no session references it.
func (p *pruner) unref(h Hash) error {
	rk := chunkRefKey(h, p.sid)
	v, err := p.io.get(rk)
	if err != nil || v == nil {
		return err
	}
	c, counted, err := refCount(rk, v)
	if err != nil {
		return err
	}
	if !counted {
		p.unknown[h] = true
		return nil
	}
	if c > 1 {
		return p.io.put(rk, u64(c-1))
	}
	if err := p.io.del(rk); err != nil {
		return err
	}
	return p.freeChunk(h)
}

// freeChunk deletes chunk h if no session references it.
func (p *pruner) freeChunk(h Hash) error {
	if p.pins.pinned(h) {
		return nil // a stream's, not committed yet (stream.go)
	}
	rp := key(pChunkRef, h[:])
	used := false
	if err := p.io.scan(rp, kv.PrefixEnd(rp), func([]byte) bool { used = true; return false }); err != nil || used {
		return err
	}
	ck := chunkKey(h)
	v, err := p.io.get(ck)
	if err != nil || v == nil {
		return err
	}
	p.r.Chunks++
	p.r.Bytes += int64(len(ck) + len(v))
	return p.io.del(ck)
}

// resolveUnknown settles the chunks whose references were not counted:
// it counts the session's references afresh (dry: only for those chunks)
// and frees the chunks no version names any more.
func (p *pruner) resolveUnknown(rd kv.Reader) error {
	if len(p.unknown) == 0 {
		return nil
	}
	hs := make([]Hash, 0, len(p.unknown))
	for h := range p.unknown {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b Hash) int { return bytes.Compare(a[:], b[:]) })
	if p.io.w != nil {
		if err := recountChunkRefsLocked(p.io.w, p.sid, hs); err != nil {
			return err
		}
		p.r.Recounted = true
	} else {
		// Dry: which of them does a remaining version still name?
		still := map[Hash]bool{}
		prefix := key(pInode, p.sid[:])
		if err := rd.Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
			if p.io.gone[string(k)] {
				return true, nil
			}
			var n Inode
			if err := decode(k, v, &n); err != nil {
				return false, err
			}
			for _, h := range chunkSet(&n) {
				if p.unknown[h] {
					still[h] = true
				}
			}
			return true, nil
		}); err != nil {
			return err
		}
		for _, h := range hs {
			if !still[h] {
				if err := p.io.del(chunkRefKey(h, p.sid)); err != nil {
					return err
				}
			}
		}
	}
	for _, h := range hs {
		if err := p.freeChunk(h); err != nil {
			return err
		}
	}
	return nil
}

// scanChains prunes, chain by chain, the entry, inode and xattr versions of
// history that has no S records (sessions written by an older padfs).
// Dry (s == nil) it reads rd; else it reads pages in views and deletes
// each page in its own short write transaction.
func (p *pruner) scanChains(rd kv.Reader, s *Store, progress Progress) error {
	for _, pre := range []byte{pDentry, pInode, pXattr} {
		prefix := key(pre, p.sid[:])
		pos := prefix
		for pos != nil {
			var page [][]byte // version keys to delete
			var next []byte
			read := func(r kv.Reader) (err error) {
				page, next, err = p.readPage(r, prefix, pos)
				return err
			}
			if s == nil {
				if err := read(rd); err != nil {
					return err
				}
				for _, k := range page {
					if err := p.deleteVersion(k); err != nil {
						return err
					}
				}
			} else {
				if err := s.kv.View(read); err != nil {
					return err
				}
				if err := p.deletePage(s, page); err != nil {
					return err
				}
			}
			progress.report("scan", int64(p.r.Scanned), 0)
			pos = next
		}
	}
	return nil
}

// readPage reads whole chains under prefix from pos on, up to pruneBatch
// versions' worth (a chain is never cut), and returns the versions to
// delete and where the next page starts (nil: at the end).
func (p *pruner) readPage(r kv.Reader, prefix, pos []byte) (page [][]byte, next []byte, err error) {
	var chain, vals [][]byte
	var chainKey []byte
	n := 0
	flush := func() error {
		del, err := p.decideChain(chain, vals)
		page = append(page, del...)
		chain, vals = nil, nil
		return err
	}
	err = r.Scan(pos, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
		if len(k) < len(prefix)+9 {
			return false, fmt.Errorf("%w: short version key %q", ErrCorrupt, k)
		}
		if p.io != nil && p.io.gone[string(k)] {
			return true, nil
		}
		ck := k[:len(k)-8]
		if chainKey == nil || !bytes.Equal(ck, chainKey) {
			if n >= pruneBatch {
				next = append([]byte(nil), k...)
				return false, nil
			}
			if err := flush(); err != nil {
				return false, err
			}
			chainKey = append([]byte(nil), ck...)
		}
		chain = append(chain, append([]byte(nil), k...))
		vals = append(vals, append([]byte(nil), v...))
		n++
		p.r.Scanned++
		return true, nil
	})
	if err == nil {
		err = flush() // the last chain
	}
	return page, next, err
}

// deletePage deletes one page's versions in a write transaction of its
// own, then pauses as long as it took.
func (p *pruner) deletePage(s *Store, page [][]byte) error {
	if len(page) == 0 {
		return nil
	}
	t0 := time.Now()
	err := s.kv.Update(func(tx kv.Txn) error {
		p.io = &pruneIO{r: tx, w: tx}
		for _, k := range page {
			if err := p.deleteVersion(k); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		pace(t0)
	}
	return err
}

// decideChain returns the versions of one chain (newest first) to delete.
func (p *pruner) decideChain(keys, vals [][]byte) ([][]byte, error) {
	var del [][]byte
	olderKept := false
	headGone := false
	if p.keepLast > 0 && len(keys) > 0 && keys[0][0] == pInode {
		tomb, err := isTomb(keys[0], vals[0])
		if err != nil {
			return nil, err
		}
		headGone = tomb && hlcFromInv(keys[0]) <= p.unlinkedBefore
	}
	// newer[i]: the versions newer than keys[i] that count for keep-last.
	var newer []int
	if p.keepLast > 0 && len(keys) > 0 && keys[0][0] == pInode && !headGone {
		var c lastCounter
		for i := range keys {
			newer = append(newer, c.n)
			if err := c.add(keys[i], vals[i]); err != nil {
				return nil, err
			}
		}
	}
	for i := len(keys) - 1; i >= 0; i-- { // oldest first
		last := newer != nil && newer[i] < p.keepLast
		w := hlcFromInv(keys[i])
		if w > p.r.Before {
			break
		}
		s := Latest
		if i > 0 {
			s = hlcFromInv(keys[i-1])
		}
		tomb, err := isTomb(keys[i], vals[i])
		if err != nil {
			return nil, err
		}
		switch {
		case tomb && !olderKept && (keys[i][0] != pInode || w <= p.unlinkedBefore):
			del = append(del, keys[i])
		case p.keptAt(w, s) || s > p.r.Before:
			olderKept = true
		case last:
			p.r.KeptLast++
			olderKept = true
		default:
			del = append(del, keys[i])
		}
	}
	return del, nil
}

// isTomb says whether a version reads as absence: an unlinked name, a
// removed xattr, an inode at link count 0.
func isTomb(k, v []byte) (bool, error) {
	switch k[0] {
	case pDentry:
		var d Dentry
		err := decode(k, v, &d)
		return d.Ino == 0, err
	case pXattr:
		var x xattrVersion
		err := decode(k, v, &x)
		return x.Removed, err
	case pInode:
		var n Inode
		err := decode(k, v, &n)
		return n.Nlink == 0, err
	}
	return false, nil
}

// pruneIO is where a prune reads and deletes: a write transaction, or (dry)
// a read view with the deletions remembered.
type pruneIO struct {
	r    kv.Reader
	w    kv.Txn            // nil: dry
	gone map[string]bool   // dry: deleted keys
	refs map[string][]byte // dry: rewritten values
}

func (io *pruneIO) get(k []byte) ([]byte, error) {
	if io.w == nil {
		if io.gone[string(k)] {
			return nil, nil
		}
		if v, ok := io.refs[string(k)]; ok {
			return v, nil
		}
	}
	return io.r.Get(k)
}

func (io *pruneIO) del(k []byte) error {
	if io.w == nil {
		io.gone[string(k)] = true
		return nil
	}
	return io.w.Delete(k)
}

func (io *pruneIO) put(k, v []byte) error {
	if io.w == nil {
		io.refs[string(k)] = v
		return nil
	}
	return io.w.Put(k, v)
}

// scan calls fn with the keys in [start, end) not deleted, until it
// returns false.
func (io *pruneIO) scan(start, end []byte, fn func(k []byte) bool) error {
	return io.r.Scan(start, end, func(k, _ []byte) (bool, error) {
		if io.gone[string(k)] {
			return true, nil
		}
		return fn(k), nil
	})
}

// Compact deletes the orphan chunks failed commits left (orphans.go), then
// rewrites the store's files so that the space freed by prunes and
// deletions goes back to the filesystem and no freed page still holds
// deleted bytes. It copies the live keys into a fresh file; behind the WAL
// commits go on meanwhile (kv/wal Compact).
func (s *Store) Compact(progress Progress) error {
	progress, stop := progress.detach()
	defer stop()
	if _, err := s.sweepOrphanChunks(); err != nil {
		return err
	}
	return s.compactKV(func(done, total int64) { progress.report("compact", done, total) })
}

// keptInode returns, for a read as of at in pruned history, the version of
// ino current at at if fewer than keepLast newer versions count (as the
// prune counted them, lastCounter) and it
// provably was current then: the next newer version left in the chain is
// the one that superseded it, as that commit's S record says. Else nil,
// and the read takes the state at the floor. It reads at most about
// 2*keepLast versions of the chain and one S record.
func (t *ReadTx) keptInode(sid SessionID, ino Ino, at HLC, keepLast int) (*Inode, error) {
	chain := inodeChain(sid, ino)
	k, v, err := t.seekChain(chain, at)
	if err != nil || k == nil {
		return nil, err
	}
	var newer []byte
	var c lastCounter
	if err := t.r.Scan(chain, k, func(kk, vv []byte) (bool, error) {
		if len(kk) != len(k) {
			return true, nil
		}
		newer = append(newer[:0], kk...)
		err := c.add(kk, vv)
		return c.n < keepLast, err
	}); err != nil {
		return nil, err
	}
	if c.n >= keepLast {
		return nil, nil
	}
	if newer != nil {
		sk := supersededKey(sid, hlcFromInv(newer))
		sv, err := t.r.Get(sk)
		if err != nil || sv == nil {
			return nil, err
		}
		var rec supersession
		if err := decode(sk, sv, &rec); err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(rec.Superseded, func(x []byte) bool { return bytes.Equal(x, k) }) {
			return nil, nil
		}
	}
	n := new(Inode)
	if err := decode(k, v, n); err != nil {
		return nil, err
	}
	if n.Nlink == 0 {
		return nil, nil
	}
	n.HLC = hlcFromInv(k)
	return n, nil
}
