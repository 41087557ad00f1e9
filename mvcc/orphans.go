package mvcc

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/padfs/padfs/mvcc/kv"
)

// Orphan chunks. PutContent stores a file's chunks before the commit that
// references them, so a commit that then fails (the file was removed
// meanwhile, the session was forgotten, the disk filled) leaves chunks no
// session references. They may hold anyone's bytes, so a hard forget or a
// redaction deletes them too; a commit racing with that deletion notices
// the missing chunk inside its serialized write (PutInode) and stores its
// content again.

// errChunkGone means a chunk was deleted between PutContent and the commit.
var errChunkGone = errors.New("chunk deleted before its commit")

// deleteOrphanChunks deletes, inside tx, every chunk no session
// references, and returns how many it deleted.
func deleteOrphanChunks(tx kv.Txn) (int, error) {
	var orphans [][]byte
	prefix := []byte{pChunk}
	err := tx.Scan(prefix, kv.PrefixEnd(prefix), func(k, _ []byte) (bool, error) {
		orphans = append(orphans, append([]byte(nil), k...))
		return true, nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range orphans {
		rp := key(pChunkRef, k[1:])
		used := false
		if err := tx.Scan(rp, kv.PrefixEnd(rp), func(_, _ []byte) (bool, error) {
			used = true
			return false, nil
		}); err != nil {
			return n, err
		}
		if used {
			continue
		}
		if err := tx.Delete(k); err != nil {
			return n, err
		}
		n++
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
func (s *Store) commitContent(r io.Reader, commit func(*Content) error) error {
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
		return s.PutContent(context.Background(), r) // WriteContent takes no context
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
		if !errors.Is(err, errChunkGone) || attempt == 2 {
			return err
		}
		last = err
	}
}
