package mvcc

import (
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
//  2. Purge(sid, token) recomputes the receipt inside its write transaction
//     and refuses (ErrToken) unless the token matches, so a stale receipt
//     (the session changed, or a fork started sharing its chunks) purges
//     nothing. Then it deletes every key of the session (header, state,
//     counters, checkpoints, events, entries, inodes with their inline
//     content), the session's chunk references, and every chunk no other
//     session references, in one transaction; and compacts the storage so
//     that no freed page still holds the bytes.
//
// Chunks shared with another session (a fork, or equal bytes written
// there) stay: they are that session's content too. The receipt counts them.

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
	err := s.View(func(t *ReadTx) error {
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
// PlanPurge returns now (else ErrToken, and nothing changed), then compacts
// the storage so no byte of it remains in the store's files. It returns
// the receipt it carried out. Other layers keep their own copies (the
// search index): the caller purges those too.
func (s *Store) Purge(sid SessionID, token string, progress Progress) (*PurgeReceipt, error) {
	progress, stop := progress.detach()
	defer stop()
	var r *PurgeReceipt
	err := s.kv.Update(func(tx kv.Txn) error {
		t := &ReadTx{s: s, r: tx}
		var del []Hash
		var err error
		if r, del, err = t.planPurge(sid); err != nil {
			return err
		}
		if strings.TrimSpace(token) != r.Token {
			return fmt.Errorf("%w: session %s", ErrToken, sid)
		}
		s.paths.drop(sid)
		s.dropPruneCache(sid)
		total, done := int64(r.Keys), int64(0)
		progress.report("purge", 0, total)
		step := func() {
			if done++; done%4096 == 0 || done == total {
				progress.report("purge", done, total)
			}
		}
		// Chunk references first (they are found through the inodes).
		chunks, err := t.sessionChunks(sid)
		if err != nil {
			return err
		}
		for _, h := range sortedHashes(chunks) {
			if err := tx.Delete(chunkRefKey(h, sid)); err != nil {
				return err
			}
			step()
		}
		for _, h := range del {
			if err := tx.Delete(chunkKey(h)); err != nil {
				return err
			}
			step()
		}
		for _, p := range sessionPrefixes(sid) {
			if err := scanKeys(tx, p, func(k, _ []byte) error {
				step()
				return tx.Delete(k)
			}); err != nil {
				return err
			}
		}
		if _, err := deleteOrphanChunks(tx); err != nil {
			return err
		}
		progress.report("purge", total, total)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.compactKV(func(done, total int64) { progress.report("compact", done, total) }); err != nil {
		return r, fmt.Errorf("session %s was purged from the store, but compacting its files failed (deleted bytes may remain on disk until a compaction succeeds): %w", sid, err)
	}
	return r, nil
}
