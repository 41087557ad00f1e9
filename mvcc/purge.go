package mvcc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"

	"github.com/padfs/padfs/mvcc/kv"
)

// Hard forget: the irreversible purge of a session, in two steps.
//
//  1. PlanPurge changes nothing and returns a receipt: what would go, and
//     a token bound to it (to the session's last event and to every count).
//  2. Purge(ctx, sid, token) recomputes the receipt (in steps: planstep.go)
//     and refuses (ErrToken) unless the token matches, so a stale receipt
//     (the session changed, or a fork started sharing its chunks) purges
//     nothing. Then it runs as a job (job.go): the mark makes the
//     session invisible at once, and batches of at most jobBatch keys
//     delete, first, the inode versions with the session's chunk
//     references and every chunk they name that no other session
//     references (only those chunks are looked at, never the whole chunk
//     keyspace), then every other key
//     under the session's prefixes (purgePrefixes: header, state,
//     counters, checkpoints, events, entries, xattrs, records, and any
//     kind added later), the header last. Then it compacts the storage
//     so that no freed page still holds the bytes.
//
// Chunks shared with another session (a fork, or equal bytes written
// there) stay: they are that session's content too. The receipt counts
// them; each batch decides afresh, so a chunk another session took up
// after the receipt stays as well.

// PurgeReceipt describes what a hard forget removes.
type PurgeReceipt struct {
	Session SessionID `json:"session"`
	Name    string    `json:"name,omitempty"`
	// LastSeq and LastHLC identify the session's newest event: any commit
	// changes them, and with them the token.
	LastSeq uint64 `json:"last_seq"`
	LastHLC HLC    `json:"-"`
	// Files counts the files, symlinks and other non-directories the
	// session ever had; Dirs its directories (root included).
	Files int `json:"files"`
	Dirs  int `json:"dirs"`
	// Versions counts the versions of those files (directories' versions
	// go too, uncounted).
	Versions int `json:"versions"`
	// Bytes is the content removed: inline content and symlink targets of
	// every version, plus every chunk deleted.
	Bytes int64 `json:"bytes"`
	// Chunks are deleted; SharedChunks stay because other sessions
	// reference them.
	Chunks       int `json:"chunks"`
	SharedChunks int `json:"shared_chunks"`
	// Keys is the number of keys deleted (progress total).
	Keys  int    `json:"keys"`
	Token string `json:"token"`
}

// PlanPurge returns the receipt of a hard forget of sid. It changes nothing.
func (s *Store) PlanPurge(sid SessionID) (*PurgeReceipt, error) {
	var r *PurgeReceipt
	err := s.planRetry(sid, func(t *ReadTx) error {
		var err error
		r, _, err = t.planPurge(sid)
		return err
	})
	return r, err
}

// planPurge computes the receipt and the chunks to delete.
func (t *ReadTx) planPurge(sid SessionID) (*PurgeReceipt, []Hash, error) {
	h, err := t.Header(sid)
	if err != nil {
		return nil, nil, err
	}
	r := &PurgeReceipt{Session: sid, Name: h.Name}
	if r.LastSeq, r.LastHLC, err = t.LastEvent(sid); err != nil {
		return nil, nil, err
	}
	files, dirs := map[Ino]bool{}, map[Ino]bool{}
	chunks := map[Hash]uint32{}
	for _, p := range sessionPrefixes(sid) {
		err := scanKeys(t.r, p, func(k, v []byte) error {
			r.Keys++
			if p[0] != pInode {
				return nil
			}
			var n Inode
			if err := decode(k, v, &n); err != nil {
				return err
			}
			if n.IsDir() {
				dirs[n.Ino] = true
			} else {
				files[n.Ino] = true
				r.Versions++
			}
			r.Bytes += int64(len(n.Inline)) + int64(len(n.Target))
			for _, e := range n.Extents {
				if e.Chunk != nil {
					var h Hash
					copy(h[:], e.Chunk)
					chunks[h] = uint32(e.Len) // a chunk: at most chunkMax
				}
			}
			return nil
		})
		if err != nil {
			return nil, nil, err
		}
	}
	r.Files, r.Dirs = len(files), len(dirs)
	var del []Hash
	for _, h := range sortedHashes(chunks) {
		others, err := t.chunkUsers(h, sid)
		if err != nil {
			return nil, nil, err
		}
		if len(others) > 0 {
			r.SharedChunks++
			continue
		}
		del = append(del, h)
		r.Chunks++
		r.Bytes += int64(chunks[h])
	}
	r.Keys += len(chunks) + len(del) // chunk references, then chunks
	r.Token = receiptToken("forget", sid.String(), r.LastSeq, uint64(r.LastHLC), r.Files, r.Dirs,
		r.Versions, r.Bytes, r.Chunks, r.SharedChunks, r.Keys)
	return r, del, nil
}

// receiptToken binds a confirmation token to a receipt: a digest of every
// field, so that any change to the session (its last event) or to the
// counts makes an old token stale. It is a confirmation of intent, not a
// secret.
func receiptToken(kind string, parts ...any) string {
	d := sha256.New()
	fmt.Fprintf(d, "padfs %s receipt v1", kind)
	for _, p := range parts {
		fmt.Fprintf(d, "\x00%v", p)
	}
	return kind + "-" + hex.EncodeToString(d.Sum(nil)[:12])
}

// Progress reports a long operation: stage names what is running ("purge",
// "redact", "compact"), done out of total units.
type Progress func(stage string, done, total int64)

func (p Progress) report(stage string, done, total int64) {
	if p != nil {
		p(stage, done, total)
	}
}

// detach returns a Progress that never blocks its caller: a goroutine
// calls p, and a report made while p is still busy is dropped (the next
// one supersedes it). Purge and redaction report from inside the store's
// write transaction, where a slow reader of the progress (a stopped
// terminal, a full control socket) must not stall every writer of the
// mount. stop waits for the reports already taken.
func (p Progress) detach() (detached Progress, stop func()) {
	if p == nil {
		return nil, func() {}
	}
	type report struct {
		stage       string
		done, total int64
	}
	ch := make(chan report, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for r := range ch {
			p(r.stage, r.done, r.total)
		}
	}()
	detached = func(stage string, done, total int64) {
		select {
		case ch <- report{stage, done, total}:
		default:
		}
	}
	return detached, func() { close(ch); wg.Wait() }
}

// Purge irreversibly removes session sid if token matches the receipt
// PlanPurge returns now (else ErrToken, and nothing changed), in batches,
// then compacts the storage so no byte of it remains in the store's files.
// It returns the receipt it carried out. Cancelling ctx stops it between
// two batches; the session stays marked, and Purge with the same token
// (or FinishJob) finishes it. Other layers keep their own copies (the search
// index): the caller purges those too.
func (s *Store) Purge(ctx context.Context, sid SessionID, token string, progress Progress) (*PurgeReceipt, error) {
	token = strings.TrimSpace(token)
	j, err := s.viewJob(sid)
	switch {
	case err != nil:
		return nil, err
	case j != nil && j.Kind == JobPurge && j.Token == token:
		return s.runPurge(ctx, sid, progress) // cut short before: finish it
	case j != nil:
		return nil, busyError(sid, j.Kind)
	}
	var r *PurgeReceipt
	if err := s.planToken(sid, token, func(t *ReadTx) (string, error) {
		var err error
		if r, _, err = t.planPurge(sid); err != nil {
			return "", err
		}
		return r.Token, nil
	}); err != nil {
		return nil, err
	}
	j = &jobState{Kind: JobPurge, Token: r.Token, Total: int64(r.Keys), Purge: r}
	if err := s.markJob(sid, r.LastSeq, j); err != nil {
		return nil, err
	}
	return s.runPurge(ctx, sid, progress)
}

// Phases of a purge job.
const (
	purgeInodes = iota // inode versions, their chunk references and chunks
	purgeKeys          // every other key of the session but the header
	purgeEnd           // check that nothing is left; the header and the job go
)

// runPurge carries out (or resumes) the purge job marked on sid.
func (s *Store) runPurge(ctx context.Context, sid SessionID, progress Progress) (*PurgeReceipt, error) {
	s.jobMu.Lock()
	defer s.jobMu.Unlock()
	progress, stop := progress.detach()
	defer stop()
	var r *PurgeReceipt
	dropped := map[Hash]bool{} // a cache: a resumed job starts without it
	err := s.jobStep(ctx, sid, "purge", progress, nil, func(tx kv.Txn, j *jobState) (bool, error) {
		r = j.Purge
		switch j.Phase {
		case purgeInodes:
			return true, purgeInodeBatch(&s.pins, tx, sid, j, dropped)
		case purgeKeys:
			return true, purgeKeyBatch(tx, sid, j)
		}
		return purgeFinish(tx, sid, j)
	})
	s.paths.drop(sid)
	s.dropPruneCache(sid)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = &PurgeReceipt{Session: sid}
	}
	return r, s.compactAfter(sid, "purged from the store", progress)
}

// purgeInodeBatch deletes up to jobBatch keys' worth of inode versions
// from j.Cursor on, each with its chunk references and the chunks nobody
// else references; a version naming more chunks than a batch takes is
// done over several (j.Pos). At the end of the versions it moves j on to
// purgeKeys. It reads one version at a time: a batch out of time after
// its first chunk must not have decoded the hundreds of versions after
// it (a 64 MiB file's version names ~800 chunks; decoding 8 MiB of them
// took a whole batch's time, for one chunk of progress). dropped holds
// the chunks whose reference this job has dropped and whose use it has
// checked: every later version of a file names most of its chunks again,
// and for those the reference's absence (read again: a batch that failed
// deleted nothing) is the whole check.
func purgeInodeBatch(pins *chunkPins, tx kv.Txn, sid SessionID, j *jobState, dropped map[Hash]bool) error {
	prefix := key(pInode, sid[:])
	end := kv.PrefixEnd(prefix)
	start := prefix
	if j.Cursor != nil {
		start = j.Cursor
	}
	budget := jobBatch
	for {
		k, v, err := kv.First(tx, start, end)
		if err != nil {
			return err
		}
		if k == nil {
			j.Phase, j.Cursor, j.Pos = purgeKeys, nil, 0
			return nil
		}
		k = bytes.Clone(k)
		var n Inode
		if err := decode(k, v, &n); err != nil {
			return err
		}
		hs := chunkSet(&n)
		for ; j.Pos < len(hs) && budget > 0 && (budget == jobBatch || !j.late()); j.Pos++ {
			h := hs[j.Pos]
			rk := chunkRefKey(h, sid)
			v, err := tx.Get(rk)
			if err != nil {
				return err
			}
			if v == nil && dropped[h] {
				continue // an earlier version's, done
			}
			if v != nil {
				if err := tx.Delete(rk); err != nil {
					return err
				}
				j.Done++
			}
			// Then the chunk, if no session references it any more.
			if gone, err := deleteChunkIfUnused(pins, tx, h); err != nil {
				return err
			} else if gone {
				j.Done++
			}
			dropped[h] = true
			budget -= 2
		}
		if j.Pos < len(hs) {
			j.Cursor = k // the rest of its chunks in the next batch
			return nil
		}
		if err := tx.Delete(k); err != nil {
			return err
		}
		j.Done++
		j.Pos, j.Cursor = 0, append(k, 0)
		if budget--; budget <= 0 || j.late() {
			return nil
		}
		start = j.Cursor
	}
}

// deleteChunkIfUnused deletes chunk h if no session references it, and
// says whether it did.
func deleteChunkIfUnused(pins *chunkPins, tx kv.Txn, h Hash) (bool, error) {
	if pins.pinned(h) {
		return false, nil // a stream's, not committed yet (stream.go)
	}
	rp := key(pChunkRef, h[:])
	used := false
	if err := tx.Scan(rp, kv.PrefixEnd(rp), func(_, _ []byte) (bool, error) {
		used = true
		return false, nil
	}); err != nil || used {
		return false, err
	}
	ck := chunkKey(h)
	if v, err := tx.Get(ck); err != nil || v == nil {
		return false, err
	}
	return true, tx.Delete(ck)
}

// purgeKeyBatch deletes up to jobBatch keys under the session's prefixes
// but the header, from prefix j.Pos, key j.Cursor on; after the last one
// it moves j on to purgeEnd.
func purgeKeyBatch(tx kv.Txn, sid SessionID, j *jobState) error {
	prefixes := purgePrefixes(sid)
	budget := jobBatch
	for ; j.Pos < len(prefixes); j.Pos, j.Cursor = j.Pos+1, nil {
		p := prefixes[j.Pos]
		if p[0] == pHeader {
			continue // last: it keeps the session marked
		}
		if budget < jobBatch && j.late() {
			return nil // this prefix from its start, in the next batch
		}
		start := p
		if j.Cursor != nil {
			start = j.Cursor
		}
		var ks [][]byte
		if err := tx.Scan(start, kv.PrefixEnd(p), func(k, _ []byte) (bool, error) {
			ks = append(ks, append([]byte(nil), k...))
			return len(ks) < budget, nil
		}); err != nil {
			return err
		}
		for i, k := range ks {
			if i > 0 && j.late() {
				j.Done += int64(i)
				j.Cursor = append(ks[i-1], 0)
				return nil
			}
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		j.Done += int64(len(ks))
		if budget -= len(ks); budget <= 0 {
			j.Cursor = append(ks[len(ks)-1], 0)
			return nil
		}
	}
	j.Phase, j.Cursor, j.Pos = purgeEnd, nil, 0
	return nil
}

// purgeFinish deletes the header and the job record if no other key of
// the session is left (a prune that was running when the purge began may
// have written one since: then the key phase runs again).
func purgeFinish(tx kv.Txn, sid SessionID, j *jobState) (bool, error) {
	for _, p := range purgePrefixes(sid) {
		if p[0] == pHeader {
			continue
		}
		left := false
		if err := tx.Scan(p, kv.PrefixEnd(p), func(_, _ []byte) (bool, error) {
			left = true
			return false, nil
		}); err != nil {
			return false, err
		}
		if left {
			j.Phase, j.Cursor, j.Pos = purgeKeys, nil, 0
			return true, nil
		}
	}
	if err := tx.Delete(headerKey(sid)); err != nil {
		return false, err
	}
	j.Done++
	j.Phase = jobDone
	return false, tx.Delete(jobKey(sid))
}
