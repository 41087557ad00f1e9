package mvcc

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/padfs/padfs/mvcc/kv"
)

// The redaction job (see redact.go for what it does, job.go for how jobs
// run). Its phases, each in batches:
const (
	redactInodes = iota // inode versions: content, symlink targets, inline xattrs
	redactXattrs        // keyed xattr versions
	redactEvents        // the log's content hashes and sizes, symlink targets
	redactChunks        // the chunks the rewritten versions stopped naming
	redactSide          // the job's side records
	redactEnd           // one commit: the session.redact event; the mark goes
)

// contentBatch bounds the content one batch of inode versions reads (a
// single larger version is a batch of its own, up to MaxInMemory).
const contentBatch = 16 << 20

// Redact replaces needle by repl (DefaultRedaction if repl is nil) in
// every version of session sid, if token matches the receipt PlanRedact
// returns now (else ErrToken, and nothing changed), in batches; then it
// compacts the storage. It returns the receipt it carried out.
// Cancelling ctx stops it between two batches; the session stays marked
// (invisible), and Redact with the same token, or FinishJob, finishes it.
// The search index keeps its own copy: the caller re-indexes the session.
func (s *Store) Redact(ctx context.Context, sid SessionID, needle string, repl *string, token string, progress Progress) (*RedactReceipt, error) {
	rp := DefaultRedaction
	if repl != nil {
		rp = *repl
	}
	token = strings.TrimSpace(token)
	j, err := s.viewJob(sid)
	switch {
	case err != nil:
		return nil, err
	case j != nil && j.Kind == JobRedact && j.Token == token && j.Needle == needle && j.Repl == rp:
		r, err := s.runRedact(ctx, sid, progress) // cut short before: finish it
		return r, err
	case j != nil:
		return nil, busyError(sid, j.Kind)
	}
	var plan *redactPlan
	if err := s.planToken(sid, token, func(t *ReadTx) (string, error) {
		var err error
		if plan, err = t.planRedact(sid, needle, rp); err != nil {
			return "", err
		}
		return plan.r.Token, nil
	}); err != nil {
		return nil, err
	}
	if plan.r.Versions == 0 {
		return plan.r, nil // nothing to rewrite: no commit, no event
	}
	j = &jobState{Kind: JobRedact, Token: plan.r.Token, Needle: needle, Repl: rp,
		Total: plan.keys + int64(plan.r.Chunks+plan.r.SharedChunks), Redact: plan.r}
	if err := s.markJob(sid, plan.r.LastSeq, j); err != nil {
		return nil, err
	}
	return s.runRedact(ctx, sid, progress)
}

// redactor carries one run of a redaction job.
type redactor struct {
	s   *Store
	sid SessionID
	j   jobState // as read when the run began: needle, replacement, mark
	// Content already looked at by this run: its redaction (stored), or
	// nil for content without the needle.
	contents map[string]*Content
	// The inode versions the next batch covers end at end (inclusive);
	// last says no version follows.
	end  []byte
	last bool
	from []byte // the cursor prepare started at
}

// runRedact carries out (or resumes) the redaction job marked on sid.
func (s *Store) runRedact(ctx context.Context, sid SessionID, progress Progress) (*RedactReceipt, error) {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	progress, stop := progress.detach()
	defer stop()
	rd := &redactor{s: s, sid: sid, contents: map[string]*Content{}}
	j, err := s.viewJob(sid)
	if err == nil && j == nil {
		err = fmt.Errorf("%w: no redaction of session %s is under way", ErrNotFound, sid)
	}
	if err != nil {
		return nil, err
	}
	rd.j = *j
	for attempt := 0; ; attempt++ {
		err := s.jobStep(ctx, sid, "redact", progress, rd.prepare, rd.batch)
		if errors.Is(err, errChunkGone) && attempt < 3 {
			// A purge elsewhere deleted a chunk PutContent found present:
			// store the content again.
			rd.contents = map[string]*Content{}
			continue
		}
		if err != nil {
			return nil, err
		}
		break
	}
	r := rd.j.Redact
	if r == nil {
		r = &RedactReceipt{Session: sid}
	}
	if _, err := s.commit(sid, commitJob, func(t *WriteTx) error {
		h, err := t.rawHeader(sid)
		if err != nil {
			return err
		}
		h.Busy = ""
		if err := t.put(headerKey(sid), h); err != nil {
			return err
		}
		if err := t.w.Delete(jobKey(sid)); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpRedact, Path: ".",
			Detail: fmt.Sprintf("%d versions of %d files rewritten (%d occurrences)", r.Versions, r.Files, r.Occurrences)})
		return nil
	}); err != nil {
		return nil, err
	}
	s.paths.drop(sid)
	return r, s.compactAfter(sid, "redacted in the store", progress)
}

// prepare runs before each batch, outside any transaction: for a batch of
// inode versions (at most jobBatch, and contentBatch bytes of content) it
// stores the redacted content they will name.
func (rd *redactor) prepare(j *jobState) error {
	if j.Phase != redactInodes {
		return nil
	}
	pending := map[string][]byte{}
	err := rd.s.View(func(t *ReadTx) error {
		type version struct {
			k []byte
			n Inode
		}
		var vs []version
		prefix := key(pInode, rd.sid[:])
		start := prefix
		if j.Cursor != nil {
			start = j.Cursor
		}
		size := uint64(0)
		rd.end, rd.last, rd.from = nil, true, j.Cursor
		if err := t.r.Scan(start, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
			if len(vs) >= jobBatch || size >= contentBatch {
				rd.last = false
				return false, nil
			}
			var n Inode
			if err := decode(k, v, &n); err != nil {
				return false, err
			}
			vs = append(vs, version{append([]byte(nil), k...), n})
			if n.IsRegular() {
				size += n.Size
			}
			return true, nil
		}); err != nil {
			return err
		}
		for _, v := range vs {
			rd.end = v.k
			if !v.n.IsRegular() || v.n.Size == 0 {
				continue
			}
			ck := contentKey(v.k, &v.n)
			if _, ok := rd.contents[ck]; ok {
				continue
			}
			if _, ok := pending[ck]; ok {
				continue
			}
			data, err := t.Content(&v.n)
			if err != nil {
				return fmt.Errorf("inode %d version %s: %w", v.n.Ino, hlcFromInv(v.k), err)
			}
			if !bytes.Contains(data, []byte(rd.j.Needle)) {
				rd.contents[ck] = nil
				continue
			}
			red, _, err := redactBytes(data, rd.j.Needle, rd.j.Repl)
			if err != nil {
				return err
			}
			pending[ck] = red
			runtime.Gosched() // a writer waiting for a core goes first
		}
		return nil
	})
	if err != nil {
		return err
	}
	for ck, red := range pending {
		c, err := rd.s.PutContent(context.Background(), bytes.NewReader(red)) // at most 16 MiB a batch; ctx is checked between batches
		if err != nil {
			return err
		}
		rd.contents[ck] = c
		runtime.Gosched()
	}
	if f, ok := rd.s.kv.(flusher); ok && len(pending) > 0 {
		// Fold the new content into the base now, in the job's time: left
		// to the background flush, megabytes of it per batch fill the
		// log's memtables until other sessions' commits wait for the fold.
		return f.Flush()
	}
	return nil
}

// flusher is a driver that buffers writes (kv/wal): Flush moves them to
// its base.
type flusher interface{ Flush() error }

// errStopScan ends a scanKeys early.
var errStopScan = errors.New("stop scan")

// batch is one transaction of the job: what it does depends on the phase.
func (rd *redactor) batch(tx kv.Txn, j *jobState) (bool, error) {
	t := &WriteTx{ReadTx: ReadTx{s: rd.s, r: tx}, w: tx, sid: rd.sid}
	switch j.Phase {
	case redactInodes:
		return true, rd.inodeBatch(t, j)
	case redactXattrs:
		return true, rd.xattrBatch(t, j)
	case redactEvents:
		return true, rd.eventBatch(t, j)
	case redactChunks:
		return true, rd.chunkBatch(t, j)
	case redactSide:
		return true, rd.sideBatch(t, j)
	}
	return false, nil
}

// nextPhase moves j to phase p, from its start.
func nextPhase(j *jobState, p int) { j.Phase, j.Cursor, j.Pos = p, nil, 0 }

// pageFrom calls fn with each key (and value) of prefix from j.Cursor on,
// at most limit of them, and leaves j.Cursor after the last; it reports
// whether it reached the end of prefix.
func pageFrom(r kv.Reader, prefix []byte, j *jobState, limit int, fn func(k, v []byte) error) (bool, error) {
	start := prefix
	if j.Cursor != nil {
		start = j.Cursor
	}
	type kvp struct{ k, v []byte }
	var got []kvp
	if err := r.Scan(start, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
		got = append(got, kvp{append([]byte(nil), k...), append([]byte(nil), v...)})
		return len(got) <= limit, nil
	}); err != nil {
		return false, err
	}
	end := len(got) <= limit
	if !end {
		got = got[:limit]
	}
	for i, p := range got {
		if i > 0 && j.late() {
			// Out of time: the rest in the next batch.
			j.Cursor = append(got[i-1].k, 0)
			return false, nil
		}
		if err := fn(p.k, p.v); err != nil {
			return false, err
		}
		j.Done++
	}
	if len(got) > 0 {
		j.Cursor = append(got[len(got)-1].k, 0)
	}
	return end, nil
}

// inodeBatch rewrites the inode versions prepare looked at.
func (rd *redactor) inodeBatch(t *WriteTx, j *jobState) error {
	prefix := key(pInode, rd.sid[:])
	if !bytes.Equal(j.Cursor, rd.from) {
		return nil // another run moved on meanwhile: prepare again
	}
	if rd.end == nil { // no version (left)
		nextPhase(j, redactXattrs)
		return nil
	}
	endKey := append(append([]byte(nil), rd.end...), 0)
	end, err := pageFrom(t.w, prefix, j, jobBatch+1, func(k, v []byte) error {
		if bytes.Compare(k, endKey) >= 0 {
			return errStopScan
		}
		return rd.rewriteVersion(t, k, v)
	})
	switch {
	case err != nil && !errors.Is(err, errStopScan):
		return err
	case err == nil && !end:
		return nil // out of time: prepare again from j.Cursor
	}
	j.Cursor = endKey
	if rd.last {
		nextPhase(j, redactXattrs)
	}
	return nil
}

// rewriteVersion redacts one inode version in place: content, symlink
// target, inline xattr values. It moves the session's chunk counts from
// the old content to the new and notes the chunks it stopped naming, and
// the old content's hash for the log.
func (rd *redactor) rewriteVersion(t *WriteTx, k, v []byte) error {
	var n Inode
	if err := decode(k, v, &n); err != nil {
		return err
	}
	old := n
	needle, repl := rd.j.Needle, rd.j.Repl
	changed := false
	if n.IsRegular() && n.Size > 0 {
		c, ok := rd.contents[contentKey(k, &n)]
		if !ok {
			return fmt.Errorf("mvcc: redaction of session %s: inode %d version %s was not prepared", rd.sid, n.Ino, hlcFromInv(k))
		}
		if c != nil {
			if len(old.ContentHash) > 0 {
				if err := t.put(redactHashKey(rd.sid, old.ContentHash), &redactedHash{Hash: hex.EncodeToString(c.Hash), Size: int64(c.Size)}); err != nil {
					return err
				}
			}
			c.Apply(&n)
			n.ContentHLC = rd.j.At
			changed = true
		}
	}
	if strings.Contains(n.Target, needle) {
		red, _, err := redactBytes([]byte(n.Target), needle, repl)
		if err != nil {
			return err
		}
		n.Target, n.Size, changed = string(red), uint64(len(red)), true
	}
	for name, val := range n.Xattrs {
		if bytes.Contains(val, []byte(needle)) {
			red, _, err := redactBytes(append([]byte(nil), val...), needle, repl)
			if err != nil {
				return err
			}
			n.Xattrs[name], changed = red, true
		}
	}
	if !changed {
		return nil
	}
	if err := t.adjustChunkRefs(&old, &n); err != nil {
		return err
	}
	still := map[Hash]bool{}
	for _, h := range chunkSet(&n) {
		still[h] = true
	}
	for _, h := range chunkSet(&old) {
		if !still[h] {
			if err := t.w.Put(redactChunkKey(rd.sid, h), nil); err != nil {
				return err
			}
		}
	}
	return t.put(k, &n)
}

// xattrBatch redacts a batch of keyed xattr versions.
func (rd *redactor) xattrBatch(t *WriteTx, j *jobState) error {
	end, err := pageFrom(t.w, key(pXattr, rd.sid[:]), j, jobBatch, func(k, v []byte) error {
		var x xattrVersion
		if err := decode(k, v, &x); err != nil {
			return err
		}
		if !bytes.Contains(x.Value, []byte(rd.j.Needle)) {
			return nil
		}
		var err error
		if x.Value, _, err = redactBytes(x.Value, rd.j.Needle, rd.j.Repl); err != nil {
			return err
		}
		return t.put(k, &x)
	})
	if end {
		nextPhase(j, redactEvents)
	}
	return err
}

// eventBatch updates a batch of log entries: the hashes and sizes of
// content that was redacted, symlink targets.
func (rd *redactor) eventBatch(t *WriteTx, j *jobState) error {
	end, err := pageFrom(t.w, key(pEvent, rd.sid[:]), j, jobBatch, func(k, v []byte) error {
		var ev Event
		if err := decode(k, v, &ev); err != nil {
			return err
		}
		changed := false
		if ev.Hash != "" {
			if old, err := hex.DecodeString(ev.Hash); err == nil {
				hk := redactHashKey(rd.sid, old)
				if hv, err := t.w.Get(hk); err != nil {
					return err
				} else if hv != nil {
					var nh redactedHash
					if err := decode(hk, hv, &nh); err != nil {
						return err
					}
					ev.Hash, ev.Size, changed = nh.Hash, nh.Size, true
				}
			}
		}
		if ev.Op == OpSymlink && strings.Contains(ev.Path2, rd.j.Needle) {
			if red, _, err := redactBytes([]byte(ev.Path2), rd.j.Needle, rd.j.Repl); err == nil {
				ev.Path2, changed = string(red), true
			}
		}
		if !changed {
			return nil
		}
		return t.put(k, &ev)
	})
	if end {
		nextPhase(j, redactChunks)
	}
	return err
}

// chunkBatch deletes the chunks the rewritten versions stopped naming that
// no version of any session names any more. A session written by a padfs
// that did not count its chunk references is counted first (once, in one
// transaction, as prune does).
func (rd *redactor) chunkBatch(t *WriteTx, j *jobState) error {
	prefix := key(pJob, rd.sid[:], []byte{'c'})
	if j.Cursor == nil {
		ps, err := readPruneState(t.w, rd.sid)
		if err != nil {
			return err
		}
		if !ps.Counted {
			var hs []Hash
			if err := scanKeys(t.w, prefix, func(k, _ []byte) error {
				var h Hash
				copy(h[:], k[len(prefix):])
				hs = append(hs, h)
				return nil
			}); err != nil {
				return err
			}
			if err := recountChunkRefsLocked(t.w, rd.sid, hs); err != nil {
				return err
			}
		}
	}
	end, err := pageFrom(t.w, prefix, j, jobBatch/2, func(k, _ []byte) error {
		if len(k) != len(prefix)+len(Hash{}) {
			return fmt.Errorf("%w: redaction record %q", ErrCorrupt, k)
		}
		var h Hash
		copy(h[:], k[len(prefix):])
		if _, err := deleteChunkIfUnused(&rd.s.pins, t.w, h); err != nil {
			return err
		}
		return t.w.Delete(k)
	})
	if end {
		nextPhase(j, redactSide)
	}
	return err
}

// sideBatch deletes the job's old-hash records.
func (rd *redactor) sideBatch(t *WriteTx, j *jobState) error {
	end, err := pageFrom(t.w, key(pJob, rd.sid[:], []byte{'h'}), j, jobBatch, func(k, _ []byte) error {
		return t.w.Delete(k)
	})
	if end {
		nextPhase(j, redactEnd)
	}
	return err
}

// redactedHash is the value of a "W" sid 'h' record.
type redactedHash struct {
	Hash string `cbor:"1,keyasint"`
	Size int64  `cbor:"2,keyasint"`
}

func redactHashKey(sid SessionID, old []byte) []byte {
	return key(pJob, sid[:], []byte{'h'}, old)
}

func redactChunkKey(sid SessionID, h Hash) []byte {
	return key(pJob, sid[:], []byte{'c'}, h[:])
}
