package mvcc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// Orphan chunks. PutContent stores a file's chunks before the commit that
// references them, so a commit that then fails (the file was removed
// meanwhile, the session was forgotten, the disk filled) leaves chunks no
// session references. They may hold anyone's bytes. A hard forget or a
// redaction looks only at the chunks the versions it removes or rewrites
// named (its cost is the session's, not the store's), so it does not find
// these; Compact (padfs compact) sweeps them first, in short batches. A
// commit racing with that deletion notices the missing chunk inside its
// serialized write (PutInode) and stores its content again.

// errChunkGone means a chunk was deleted between PutContent and the commit.
var errChunkGone = errors.New("chunk deleted before its commit")

// sweepOrphanChunks deletes every chunk no session references, reading
// the chunk keys in pages and deleting each page's orphans in a short
// transaction of its own (paced as a prune's batches); it returns how many
// it deleted.
func (s *Store) sweepOrphanChunks() (int, error) {
	end := kv.PrefixEnd([]byte{pChunk})
	pos := []byte{pChunk}
	n := 0
	for pos != nil {
		var cand []Hash
		err := s.kv.View(func(r kv.Reader) error {
			var keys [][]byte
			err := r.Scan(pos, end, func(k, _ []byte) (bool, error) {
				keys = append(keys, append([]byte(nil), k...))
				return len(keys) < jobBatch, nil
			})
			if err != nil {
				return err
			}
			pos = nil
			if len(keys) == jobBatch {
				pos = append(keys[len(keys)-1], 0)
			}
			for _, k := range keys {
				if len(k) != 1+len(Hash{}) {
					return fmt.Errorf("%w: chunk key %q", ErrCorrupt, k)
				}
				rp := key(pChunkRef, k[1:])
				used := false
				if err := r.Scan(rp, kv.PrefixEnd(rp), func(_, _ []byte) (bool, error) {
					used = true
					return false, nil
				}); err != nil {
					return err
				}
				if !used {
					var h Hash
					copy(h[:], k[1:])
					cand = append(cand, h)
				}
			}
			return nil
		})
		if err != nil || len(cand) == 0 {
			if err != nil {
				return n, err
			}
			continue
		}
		t0 := time.Now()
		if err := s.kv.Update(func(tx kv.Txn) error {
			for _, h := range cand {
				gone, err := deleteChunkIfUnused(&s.pins, tx, h) // again: a commit may have taken it up
				if err != nil {
					return err
				}
				if gone {
					n++
				}
			}
			return nil
		}); err != nil {
			return n, err
		}
		pace(t0)
	}
	return n, nil
}

// checkChunkLocked returns errChunkGone if chunk h is not stored.
func checkChunkLocked(tx kv.Reader, h Hash) error {
	v, err := tx.Get(chunkKey(h))
	if err != nil {
		return err
	}
	if v == nil {
		return fmt.Errorf("%w: %x", errChunkGone, h)
	}
	return nil
}

// commitContent stores r's content and runs commit with it; if a hard
// forget or redaction deleted the stored chunks as orphans before the
// commit took them, it stores them again (r must then be an io.Seeker).
func (s *Store) commitContent(ctx context.Context, r io.Reader, commit func(*Content) error) error {
	sk, canRetry := r.(io.Seeker)
	return s.commitPut(func(attempt int) (*Content, error) {
		if attempt > 0 {
			if !canRetry {
				return nil, errNoRetry
			}
			if _, err := sk.Seek(0, io.SeekStart); err != nil {
				return nil, err
			}
		}
		return s.putContent(ctx, r, true)
	}, commit)
}

// errNoRetry: the content cannot be stored again (see commitPut).
var errNoRetry = errors.New("content cannot be read again")

// commitPut is commitContent with put storing the content (attempt 0, 1,
// 2); put returning errNoRetry ends it with the commit's error.
func (s *Store) commitPut(put func(attempt int) (*Content, error), commit func(*Content) error) error {
	var last error
	for attempt := 0; ; attempt++ {
		c, err := put(attempt)
		if errors.Is(err, errNoRetry) {
			return last
		}
		if err != nil {
			return err
		}
		err = commit(c)
		c.release()
		if !errors.Is(err, errChunkGone) || attempt == 2 {
			return err
		}
		last = err
	}
}
