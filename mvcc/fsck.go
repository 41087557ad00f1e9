package mvcc

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/padfs/padfs/mvcc/kv"
)

// Fsck verifies a store: every record's checksum and decoding, every
// chunk's checksum and SHA-256, and every reference (directory entries to
// inodes, manifests to chunks, R chunk references, the commit log's
// gap-free sequence and the N counters). Repair rebuilds what is derived
// (counters, chunk references) and moves what is unreadable out of the
// store into a quarantine file, saying what was lost.

// Problem kinds.
const (
	ProblemWAL      = "wal"      // a damaged write-ahead log
	ProblemStore    = "store"    // the bbolt file: truncated, bad meta page, rolled back
	ProblemRecord   = "record"   // a record failing its checksum or decoding
	ProblemChunk    = "chunk"    // a chunk failing its checksum or SHA-256
	ProblemDentry   = "dentry"   // an entry naming an inode the session does not have
	ProblemManifest = "manifest" // an inode naming a chunk that is not stored
	ProblemChunkRef = "chunkref" // an R reference missing, or naming a missing chunk
	ProblemEvents   = "events"   // a gap in a session's commit log
	ProblemCounter  = "counter"  // N counters that disagree with the log
	ProblemLive     = "live"     // a live-entry index that disagrees with the entries
)

// Problem is one thing fsck found wrong.
type Problem struct {
	Kind    string `json:"kind"`
	Key     string `json:"key,omitempty"` // the store key, Go-quoted
	Session string `json:"session,omitempty"`
	Path    string `json:"path,omitempty"` // in the session's latest tree, when known
	Detail  string `json:"detail"`
	// Repaired says what --repair did; empty when not repaired (or not
	// repairable).
	Repaired string `json:"repaired,omitempty"`
	// Lost lists what repairing gave up, e.g. the commits of a damaged log
	// ("session S #12 write a/b.txt").
	Lost []string `json:"lost,omitempty"`
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Kind)
	if p.Key != "" {
		b.WriteString(" key " + p.Key)
	}
	if p.Path != "" {
		fmt.Fprintf(&b, " path %q", p.Path)
	}
	if p.Session != "" {
		b.WriteString(" session " + p.Session)
	}
	b.WriteString(": " + p.Detail)
	if p.Repaired != "" {
		b.WriteString(" [repaired: " + p.Repaired + "]")
	}
	return b.String()
}

// FsckReport is the outcome of Fsck.
type FsckReport struct {
	Keys     int64     `json:"keys"`
	Chunks   int64     `json:"chunks"`
	Problems []Problem `json:"problems"`
	// Sessions whose derived state changed: their search index must be
	// rebuilt.
	Changed []SessionID `json:"-"`
	// Quarantine is the file holding the records Repair moved out.
	Quarantine string `json:"quarantine,omitempty"`
}

// FsckOptions tune Fsck.
type FsckOptions struct {
	Repair bool
	// QuarantineDir receives the unreadable records Repair removes
	// (required with Repair).
	QuarantineDir string
	// Progress, if set, is called with the number of keys checked.
	Progress func(done int64)
}

type inoRef struct {
	sid SessionID
	ino Ino
}

type chunkUse struct {
	h   Hash
	sid SessionID
}

// fsckState is what the scan collects.
type fsckState struct {
	r      *FsckReport
	bad    [][]byte // unreadable records to quarantine
	inodes map[inoRef]bool
	// dentries: entry versions naming an inode, checked once every inode
	// key was seen.
	dentries []dentryRef
	chunks   map[Hash]bool // stored (true: intact)
	uses     map[chunkUse]inoRef
	refs     map[chunkUse]bool
	events   map[SessionID]*eventRun
	counters map[SessionID]*counters
	bumped   map[SessionID]bool
	// The live-entry index: what the chains' heads say (by index key),
	// what the index holds, the sessions whose index is complete, and
	// those whose heads did not all read.
	liveWant  map[string]liveEntry
	liveHave  map[string]liveEntry
	liveDone  map[SessionID]bool
	liveBad   map[SessionID]bool
	lastChain []byte
}

type dentryRef struct {
	key  []byte
	sid  SessionID
	ino  Ino
	name string
	dir  Ino
}

type eventRun struct {
	last    uint64
	lastHLC HLC
}

// Fsck checks the whole store; with Repair it then fixes what it can.
func (s *Store) Fsck(opt FsckOptions) (*FsckReport, error) {
	st := &fsckState{
		r:        &FsckReport{},
		inodes:   map[inoRef]bool{},
		chunks:   map[Hash]bool{},
		uses:     map[chunkUse]inoRef{},
		refs:     map[chunkUse]bool{},
		events:   map[SessionID]*eventRun{},
		counters: map[SessionID]*counters{},
		bumped:   map[SessionID]bool{},
		liveWant: map[string]liveEntry{},
		liveHave: map[string]liveEntry{},
		liveDone: map[SessionID]bool{},
		liveBad:  map[SessionID]bool{},
	}
	err := s.View(func(t *ReadTx) error {
		if err := t.r.Scan(nil, nil, func(k, v []byte) (bool, error) {
			st.r.Keys++
			if opt.Progress != nil && st.r.Keys%1024 == 0 {
				opt.Progress(st.r.Keys)
			}
			st.check(k, v)
			return true, nil
		}); err != nil {
			return err
		}
		st.crossCheck(t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("fsck: %w", err)
	}
	if opt.Progress != nil {
		opt.Progress(st.r.Keys)
	}
	if opt.Repair && len(st.r.Problems) > 0 {
		if err := s.repair(st, opt.QuarantineDir); err != nil {
			return st.r, fmt.Errorf("fsck --repair: %w", err)
		}
	}
	return st.r, nil
}

func (st *fsckState) add(p Problem) { st.r.Problems = append(st.r.Problems, p) }

func sessionOf(k []byte) (SessionID, bool) {
	var sid SessionID
	if len(k) < 17 {
		return sid, false
	}
	copy(sid[:], k[1:17])
	return sid, true
}

// reject notes record k as a problem of kind and quarantines it.
func (st *fsckState) reject(k []byte, kind, detail string) {
	p := Problem{Kind: kind, Key: fmt.Sprintf("%q", k), Detail: detail}
	if sid, ok := sessionOf(k); ok && k[0] != pChunk && k[0] != pChunkRef {
		p.Session = sid.String()
	}
	st.add(p)
	st.bad = append(st.bad, append([]byte(nil), k...))
}

// rejectErr rejects record k as unreadable for err, if err is not nil.
func (st *fsckState) rejectErr(k []byte, err error) {
	if err != nil {
		st.reject(k, ProblemRecord, strings.TrimPrefix(strings.TrimPrefix(err.Error(), ErrCorrupt.Error()+": "), "mvcc: "))
	}
}

// check verifies one key on its own and notes its references.
func (st *fsckState) check(k, v []byte) {
	if len(k) == 0 {
		st.reject(k, ProblemRecord, "empty key")
		return
	}
	switch k[0] {
	case pMeta, pCheckpoint:
		if len(v) != 8 {
			st.reject(k, ProblemRecord, fmt.Sprintf("value is %d bytes, want 8", len(v)))
		}
	case pChunkRef:
		st.checkChunkRef(k)
	case pChunk:
		st.checkChunk(k, v)
	case pHeader, pState, pCounters, pEvent, pDentry, pInode:
		sid, ok := sessionOf(k)
		if !ok {
			st.reject(k, ProblemRecord, "key too short")
			return
		}
		st.rejectErr(k, st.checkSessionRecord(k, v, sid))
	case pLive:
		st.rejectErr(k, st.checkLiveRecord(k, v))
	case pXattr:
		_, _, err := splitXattrKey(k)
		if err == nil {
			err = decode(k, v, new(xattrVersion))
		}
		st.rejectErr(k, err)
	case pSuperseded, pPrune:
		st.rejectErr(k, checkPruneRecord(k, v))
	case pJob:
		st.rejectErr(k, checkJobKey(k, v))
	default:
		st.reject(k, ProblemRecord, fmt.Sprintf("unknown key prefix %q", k[0]))
	}
}

// checkChunkRef notes a chunk reference.
func (st *fsckState) checkChunkRef(k []byte) {
	if len(k) != 1+32+16 {
		st.reject(k, ProblemRecord, "malformed chunk reference key")
		return
	}
	var u chunkUse
	copy(u.h[:], k[1:33])
	copy(u.sid[:], k[33:])
	st.refs[u] = true
}

// checkChunk checks a chunk's frame and that its bytes hash to its key.
func (st *fsckState) checkChunk(k, v []byte) {
	st.r.Chunks++
	if len(k) != 33 {
		st.reject(k, ProblemChunk, "malformed chunk key")
		return
	}
	var h Hash
	copy(h[:], k[1:])
	data, err := unframe(k, v)
	if err != nil {
		st.chunks[h] = false
		st.reject(k, ProblemChunk, "checksum mismatch")
		return
	}
	if sha256.Sum256(data) != h {
		st.chunks[h] = false
		st.reject(k, ProblemChunk, "SHA-256 of the bytes does not match the key")
		return
	}
	st.chunks[h] = true
}

// checkSessionRecord decodes a header, state, counters, event, entry or
// inode record of session sid and notes what the cross-check needs.
func (st *fsckState) checkSessionRecord(k, v []byte, sid SessionID) error {
	switch k[0] {
	case pHeader:
		return decode(k, v, new(SessionHeader))
	case pState:
		return decode(k, v, new(sessionState))
	case pCounters:
		var c counters
		if err := decode(k, v, &c); err != nil {
			return err
		}
		st.counters[sid] = &c
	case pEvent:
		var ev Event
		if err := decode(k, v, &ev); err != nil {
			return err
		}
		st.event(k, sid, ev)
	case pDentry:
		return st.checkDentry(k, v, sid)
	case pInode:
		return st.checkInode(k, v, sid)
	}
	return nil
}

// checkDentry decodes an entry version, notes the inode it names and what
// the live-entry index should say of it.
func (st *fsckState) checkDentry(k, v []byte, sid SessionID) error {
	var d Dentry
	var err error
	if len(k) < 1+16+8+1+8 || k[len(k)-9] != 0 {
		err = fmt.Errorf("malformed directory entry key")
	} else if err = decode(k, v, &d); err == nil && d.Ino != 0 {
		st.dentries = append(st.dentries, dentryRef{key: append([]byte(nil), k...), sid: sid, ino: d.Ino,
			dir: Ino(binary.BigEndian.Uint64(k[17:25])), name: string(k[25 : len(k)-9])})
	}
	st.liveHead(k, sid, d, err)
	return err
}

// checkInode decodes an inode version and notes it and the chunks it uses.
func (st *fsckState) checkInode(k, v []byte, sid SessionID) error {
	if len(k) != 1+16+8+8 {
		return fmt.Errorf("malformed inode key")
	}
	var n Inode
	if err := decode(k, v, &n); err != nil {
		return err
	}
	ref := inoRef{sid, Ino(binary.BigEndian.Uint64(k[17:25]))}
	st.inodes[ref] = true
	for _, e := range n.Extents {
		if e.Chunk != nil {
			var u chunkUse
			copy(u.h[:], e.Chunk)
			u.sid = sid
			if _, ok := st.uses[u]; !ok {
				st.uses[u] = ref
			}
		}
	}
	return nil
}

// checkLiveRecord decodes a live-entry index record: a session's index
// state or one entry.
func (st *fsckState) checkLiveRecord(k, v []byte) error {
	sid, _ := sessionOf(k)
	switch {
	case len(k) == 1+16:
		var ls liveState
		if err := decode(k, v, &ls); err != nil {
			return err
		}
		if ls.Complete {
			st.liveDone[sid] = true
		}
	case len(k) > 1+16+8:
		var e liveEntry
		if err := decode(k, v, &e); err != nil {
			return err
		}
		st.liveHave[string(k)] = e
	default:
		return fmt.Errorf("malformed live-entry key")
	}
	return nil
}

// checkPruneRecord decodes a supersession or prune state record.
func checkPruneRecord(k, v []byte) error {
	if k[0] == pSuperseded && len(k) != 1+16+8 || k[0] == pPrune && len(k) != 1+16 {
		return fmt.Errorf("malformed key")
	}
	if k[0] == pSuperseded {
		return decode(k, v, new(supersession))
	}
	return decode(k, v, new(pruneState))
}

// liveHead notes what the live-entry index should say of an entry
// version that is the newest of its chain (the scan meets it first).
func (st *fsckState) liveHead(k []byte, sid SessionID, d Dentry, err error) {
	if len(k) < 1+16+8+1+8 {
		st.liveBad[sid] = true
		return
	}
	chain := k[:len(k)-8]
	if bytes.Equal(chain, st.lastChain) {
		return
	}
	st.lastChain = append(st.lastChain[:0], chain...)
	switch {
	case err != nil:
		st.liveBad[sid] = true // repair quarantines it, then rebuilds
	case d.Ino != 0:
		st.liveWant[string(liveKey(sid, Ino(binary.BigEndian.Uint64(k[17:25])), string(k[25:len(k)-9])))] =
			liveEntry{Ino: d.Ino, Type: d.Type, HLC: hlcFromInv(k)}
	}
}

// checkLive compares each complete live-entry index with the chains'
// heads: one problem per session, with what differs.
func (st *fsckState) checkLive() {
	type diff struct {
		missing, stale, differ int
		example                string
	}
	diffs := map[SessionID]*diff{}
	note := func(lk string, what string, count func(*diff)) {
		sid, _ := sessionOf([]byte(lk))
		if !st.liveDone[sid] || st.liveBad[sid] {
			return
		}
		d := diffs[sid]
		if d == nil {
			d = &diff{}
			diffs[sid] = d
		}
		count(d)
		if d.example == "" {
			d.example = fmt.Sprintf("%s: directory %d, name %q", what, binary.BigEndian.Uint64([]byte(lk)[17:25]), lk[25:])
		}
	}
	for lk, want := range st.liveWant {
		have, ok := st.liveHave[lk]
		switch {
		case !ok:
			note(lk, "missing", func(d *diff) { d.missing++ })
		case have != want:
			note(lk, "differs", func(d *diff) { d.differ++ })
		}
	}
	for lk := range st.liveHave {
		if _, ok := st.liveWant[lk]; !ok {
			note(lk, "not live", func(d *diff) { d.stale++ })
		}
	}
	sids := make([]SessionID, 0, len(diffs))
	for sid := range diffs {
		sids = append(sids, sid)
	}
	sort.Slice(sids, func(i, j int) bool { return bytes.Compare(sids[i][:], sids[j][:]) < 0 })
	for _, sid := range sids {
		d := diffs[sid]
		st.add(Problem{Kind: ProblemLive, Key: fmt.Sprintf("%q", liveStateKey(sid)), Session: sid.String(),
			Detail: fmt.Sprintf("live-entry index disagrees with the entries: %d live names missing, %d names not live, %d differ (first %s)",
				d.missing, d.stale, d.differ, d.example)})
	}
}

func (st *fsckState) event(k []byte, sid SessionID, ev Event) {
	run := st.events[sid]
	if run == nil {
		run = &eventRun{}
		st.events[sid] = run
	}
	seq := binary.BigEndian.Uint64(k[len(k)-8:])
	if seq != run.last+1 {
		st.add(Problem{Kind: ProblemEvents, Key: fmt.Sprintf("%q", k), Session: sid.String(),
			Detail: fmt.Sprintf("event %d follows event %d: %d events missing", seq, run.last, seq-run.last-1)})
	}
	if ev.Seq != seq {
		st.add(Problem{Kind: ProblemEvents, Key: fmt.Sprintf("%q", k), Session: sid.String(),
			Detail: fmt.Sprintf("event record says seq %d", ev.Seq)})
	}
	run.last, run.lastHLC = seq, ev.HLC
}

// crossCheck verifies the references between keys, once all were seen.
func (st *fsckState) crossCheck(t *ReadTx) {
	path := func(sid SessionID, ino Ino) string {
		p, err := t.Path(sid, ino, Latest)
		if err != nil {
			return fmt.Sprintf("inode %d", ino)
		}
		return p
	}
	for _, d := range st.dentries {
		if !st.inodes[inoRef{d.sid, d.ino}] {
			p := d.name
			if dp := path(d.sid, d.dir); dp != "." && !strings.HasPrefix(dp, "inode ") {
				p = dp + "/" + d.name
			}
			st.add(Problem{Kind: ProblemDentry, Key: fmt.Sprintf("%q", d.key), Session: d.sid.String(), Path: p,
				Detail: fmt.Sprintf("entry names inode %d, which has no record", d.ino)})
			st.bad = append(st.bad, d.key)
		}
	}
	uses := make([]chunkUse, 0, len(st.uses))
	for u := range st.uses {
		uses = append(uses, u)
	}
	sort.Slice(uses, func(i, j int) bool {
		if c := bytes.Compare(uses[i].h[:], uses[j].h[:]); c != 0 {
			return c < 0
		}
		return bytes.Compare(uses[i].sid[:], uses[j].sid[:]) < 0
	})
	for _, u := range uses {
		ref := st.uses[u]
		if _, ok := st.chunks[u.h]; !ok {
			st.add(Problem{Kind: ProblemManifest, Key: fmt.Sprintf("%q", chunkKey(u.h)), Session: u.sid.String(),
				Path: path(ref.sid, ref.ino), Detail: fmt.Sprintf("content names chunk %x, which is not stored (that part of the file is lost)", u.h[:8])})
		}
		if _, stored := st.chunks[u.h]; stored && !st.refs[u] {
			st.add(Problem{Kind: ProblemChunkRef, Key: fmt.Sprintf("%q", chunkRefKey(u.h, u.sid)), Session: u.sid.String(),
				Path: path(ref.sid, ref.ino), Detail: "missing reference from the session to a chunk it uses"})
		}
	}
	for u := range st.refs {
		// A chunk still used but gone is reported above, as lost content.
		if _, ok := st.chunks[u.h]; !ok && st.uses[u] == (inoRef{}) {
			st.add(Problem{Kind: ProblemChunkRef, Key: fmt.Sprintf("%q", chunkRefKey(u.h, u.sid)), Session: u.sid.String(),
				Detail: "reference to a chunk that is not stored"})
		}
	}
	sids := map[SessionID]bool{}
	for sid := range st.events {
		sids[sid] = true
	}
	for sid := range st.counters {
		sids[sid] = true
	}
	st.checkLive()
	for sid := range sids {
		run, c := st.events[sid], st.counters[sid]
		if run == nil {
			run = &eventRun{}
		}
		if c == nil {
			c = &counters{}
		}
		if c.NextSeq != run.last || c.LastHLC != run.lastHLC {
			st.add(Problem{Kind: ProblemCounter, Key: fmt.Sprintf("%q", countersKey(sid)), Session: sid.String(),
				Detail: fmt.Sprintf("counters say %d events (last %s), the log holds %d (last %s)", c.NextSeq, c.LastHLC, run.last, run.lastHLC)})
		}
	}
}

// repair fixes what st found, in one transaction: counters and chunk
// references are rebuilt; unreadable records and dangling entries are
// written to a quarantine file and deleted.
func (s *Store) repair(st *fsckState, qdir string) error {
	if qdir == "" {
		return errors.New("no quarantine directory")
	}
	var qf *os.File
	changed := map[SessionID]bool{}
	err := s.kv.Update(func(tx kv.Txn) error {
		// Unreadable records and dangling entries leave the store, into a
		// file, before their keys are deleted.
		var err error
		if qf, err = st.quarantineBad(tx, qdir); err != nil {
			return err
		}
		rebuild, err := st.deleteBad(tx)
		if err != nil {
			return err
		}
		for i := range st.r.Problems {
			p := &st.r.Problems[i]
			switch p.Kind {
			case ProblemRecord, ProblemChunk, ProblemDentry:
				if p.Key != "" && st.r.Quarantine != "" {
					p.Repaired = "moved to " + st.r.Quarantine + lostWhat(p)
				}
			}
		}
		for i := range st.r.Problems {
			p := &st.r.Problems[i]
			if sid, err := ulid.Parse(p.Session); err == nil {
				changed[sid] = true
			}
			if err := repairProblem(tx, p, rebuild); err != nil {
				return err
			}
		}
		for sid := range rebuild {
			if _, err := rebuildLiveLocked(tx, sid); err != nil {
				return err
			}
		}
		return nil
	})
	if qf != nil {
		qf.Close()
	}
	if err != nil {
		if qf != nil {
			os.Remove(qf.Name())
			st.r.Quarantine = ""
		}
		return err
	}
	for sid := range changed {
		st.r.Changed = append(st.r.Changed, sid)
	}
	return s.kv.Sync()
}

// quarantineBad writes the records to delete (those still there) to a
// quarantine file in qdir and names it in the report; nil when there are
// none.
func (st *fsckState) quarantineBad(tx kv.Txn, qdir string) (*os.File, error) {
	var lost []quarantined
	for _, k := range st.bad {
		v, err := tx.Get(k)
		if err != nil {
			return nil, err
		}
		if v == nil {
			continue
		}
		lost = append(lost, quarantined{Key: hex.EncodeToString(k), Value: base64.StdEncoding.EncodeToString(v)})
	}
	if len(lost) == 0 {
		return nil, nil
	}
	qf, err := writeQuarantine(qdir, lost)
	if err != nil {
		return nil, err
	}
	st.r.Quarantine = qf.Name()
	return qf, nil
}

// deleteBad deletes the quarantined records and returns the sessions
// whose live-entry index must be rebuilt (an entry chain's head may have
// changed).
func (st *fsckState) deleteBad(tx kv.Txn) (map[SessionID]bool, error) {
	rebuild := map[SessionID]bool{}
	for _, k := range st.bad {
		if err := tx.Delete(k); err != nil {
			return nil, err
		}
		if sid, ok := sessionOf(k); ok && k[0] == pDentry && st.liveDone[sid] {
			rebuild[sid] = true
		}
	}
	return rebuild, nil
}

// repairProblem rebuilds what p says is wrong (counters, the live-entry
// index, a chunk reference) and says so in p.Repaired. A live-entry index
// it rebuilds leaves rebuild.
func repairProblem(tx kv.Txn, p *Problem, rebuild map[SessionID]bool) error {
	switch p.Kind {
	case ProblemCounter:
		sid, _ := ulid.Parse(p.Session)
		c, err := rebuildCounters(tx, sid)
		if err != nil {
			return err
		}
		if c.NextSeq == 0 {
			if err := tx.Delete(countersKey(sid)); err != nil {
				return err
			}
		} else if b, err := encode(c); err != nil {
			return err
		} else if err := tx.Put(countersKey(sid), b); err != nil {
			return err
		}
		p.Repaired = fmt.Sprintf("counters rebuilt from the log: %d events", c.NextSeq)
	case ProblemLive:
		sid, _ := ulid.Parse(p.Session)
		n, err := rebuildLiveLocked(tx, sid)
		if err != nil {
			return err
		}
		delete(rebuild, sid)
		p.Repaired = fmt.Sprintf("live-entry index rebuilt from the entries: %d live names", n)
	case ProblemChunkRef:
		k := unquoteKey(p.Key)
		var h Hash
		copy(h[:], k[1:33])
		if v, err := tx.Get(chunkKey(h)); err != nil {
			return err
		} else if v == nil {
			if err := tx.Delete(k); err != nil {
				return err
			}
			p.Repaired = "reference deleted"
		} else {
			if err := tx.Put(k, []byte{}); err != nil {
				return err
			}
			p.Repaired = "reference added"
		}
	}
	return nil
}

// lostWhat says what deleting a problem's record gives up.
func lostWhat(p *Problem) string {
	k := unquoteKey(p.Key)
	if len(k) == 0 {
		return ""
	}
	switch k[0] {
	case pChunk:
		return " (files using this chunk read as EIO there)"
	case pInode:
		return " (this version of the inode is lost; reads fall back to the version before it)"
	case pDentry:
		return " (this version of the entry is lost; lookups fall back to the version before it)"
	case pEvent:
		return " (this commit's log entry is lost)"
	case pHeader:
		return " (the session's header is lost: the session is unreachable)"
	}
	return ""
}

// rebuildCounters derives a session's counters from its commit log.
func rebuildCounters(tx kv.Reader, sid SessionID) (counters, error) {
	var c counters
	prefix := key(pEvent, sid[:])
	err := tx.Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
		var ev Event
		if err := decode(k, v, &ev); err != nil {
			return true, nil // quarantined separately
		}
		c.NextSeq, c.LastHLC = binary.BigEndian.Uint64(k[len(k)-8:]), ev.HLC
		return true, nil
	})
	return c, err
}

// quarantined is one record moved out of the store (a line of the
// quarantine file).
type quarantined struct {
	Key   string `json:"key"`   // hex
	Value string `json:"value"` // base64
}

func writeQuarantine(dir string, recs []quarantined) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	name := filepath.Join(dir, "records-"+time.Now().UTC().Format("20060102T150405.000000000Z")+".jsonl")
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	enc := json.NewEncoder(f)
	for _, r := range recs {
		if err = enc.Encode(r); err != nil {
			break
		}
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = SyncDir(dir)
	}
	if err != nil {
		f.Close()
		os.Remove(name)
		return nil, fmt.Errorf("quarantine %s: %w", name, err)
	}
	return f, nil
}

func unquoteKey(q string) []byte {
	u, err := strconv.Unquote(q)
	if err != nil {
		return nil
	}
	return []byte(u)
}

// DescribeEventRecord describes the commit whose log event a raw write
// (key, value, or a deletion) stores, e.g. "session S #7 write a.txt", for
// a repair that says which commits it lost; ok is false for other writes.
func DescribeEventRecord(k, v []byte, deleted bool) (string, bool) {
	if deleted || len(k) != 1+16+8 || k[0] != pEvent {
		return "", false
	}
	sid, _ := sessionOf(k)
	var ev Event
	if err := decode(k, v, &ev); err != nil {
		return fmt.Sprintf("session %s #%d (unreadable event)", sid, binary.BigEndian.Uint64(k[17:])), true
	}
	line := fmt.Sprintf("session %s #%d %s %s", sid, ev.Seq, ev.Op, ev.Path)
	if ev.Path2 != "" {
		line += " -> " + ev.Path2
	}
	return line, true
}
