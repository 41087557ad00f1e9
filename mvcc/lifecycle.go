package mvcc

// Session lifecycle: helpers shared by checkpoint.go, fork.go, forget.go,
// purge.go, redact.go and diff.go (issue 4). The tree operations of tree.go
// change a session through Store.Update; the operations here also need a
// commit on a forgotten session (forget itself, redaction), a consistent walk
// of a whole tree as of an HLC, and the whole content of a version.

import (
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/padfs/padfs/mvcc/kv"
)

// ErrToken means a hard-forget or redaction confirmation token does not
// match the receipt the store would print now: it is wrong, or something
// changed since the receipt was printed. Nothing was changed.
var ErrToken = errors.New("confirmation token does not match (wrong, or stale: the session changed since the receipt)")

func errCorruptf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, args...)...)
}

// counters returns a session's counters (zero if it never committed).
func (t *ReadTx) counters(sid SessionID) (counters, error) {
	var c counters
	k := countersKey(sid)
	v, err := t.r.Get(k)
	if err != nil || v == nil {
		return c, err
	}
	err = decode(k, v, &c)
	return c, err
}

// LastEvent returns the sequence number and HLC of a session's newest event
// (0, 0 for none).
func (t *ReadTx) LastEvent(sid SessionID) (uint64, HLC, error) {
	c, err := t.counters(sid)
	return c.NextSeq, c.LastHLC, err
}

// TreeEntry is one name of a session's tree as of some HLC.
type TreeEntry struct {
	Path   string // relative to the session root, "/"-separated
	Parent Ino
	Name   string
	Node   *Inode
}

// maxDepth bounds a tree walk; deeper means a corrupt parent chain.
const maxDepth = 4096

// WalkTree calls fn for every name below the session root as of at,
// directories before their contents, names in byte order within a
// directory. Hard-linked files are reported once per name.
func (t *ReadTx) WalkTree(sid SessionID, at HLC, fn func(TreeEntry) error) error {
	h, err := t.Header(sid)
	if err != nil {
		return err
	}
	return t.walkDir(sid, h.Root, "", at, 0, fn)
}

func (t *ReadTx) walkDir(sid SessionID, dir Ino, prefix string, at HLC, depth int, fn func(TreeEntry) error) error {
	if depth > maxDepth {
		return fmt.Errorf("%w: directory tree deeper than %d at %q", ErrCorrupt, maxDepth, prefix)
	}
	var ents []Dentry
	if err := t.ReadDir(sid, dir, at, func(d Dentry) bool { ents = append(ents, d); return true }); err != nil {
		return err
	}
	for _, d := range ents {
		n, err := t.Inode(sid, d.Ino, at)
		if err != nil {
			return fmt.Errorf("%s%s: %w", prefix, d.Name, err)
		}
		e := TreeEntry{Path: prefix + d.Name, Parent: dir, Name: d.Name, Node: n}
		if err := fn(e); err != nil {
			return err
		}
		if n.IsDir() {
			if err := t.walkDir(sid, n.Ino, e.Path+"/", at, depth+1, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// Content returns the whole content of one inode version.
func (t *ReadTx) Content(n *Inode) ([]byte, error) { return t.ContentInto(n, nil) }

// ContentInto is Content reading into buf when it has the capacity (a
// caller reading many files recycles its buffers).
func (t *ReadTx) ContentInto(n *Inode, buf []byte) ([]byte, error) {
	if n.Size > MaxInMemory {
		return nil, fmt.Errorf("%w: inode %d is %d bytes, more than %d to read at once", ErrTooBig, n.Ino, n.Size, MaxInMemory)
	}
	if uint64(cap(buf)) < n.Size {
		buf = make([]byte, n.Size)
	}
	buf = buf[:n.Size]
	c, err := t.ReadAt(n, buf, 0)
	if errors.Is(err, io.EOF) && uint64(c) == n.Size {
		err = nil
	}
	return buf[:c], err
}

// scanKeys calls fn with every key (and value) starting with prefix, in
// batches copied out of the scan, so that fn may write to the transaction.
func scanKeys(r kv.Reader, prefix []byte, fn func(k, v []byte) error) error {
	end := kv.PrefixEnd(prefix)
	pos := append([]byte(nil), prefix...)
	const batch = 1024
	for {
		type kvp struct{ k, v []byte }
		var got []kvp
		err := r.Scan(pos, end, func(k, v []byte) (bool, error) {
			got = append(got, kvp{append([]byte(nil), k...), append([]byte(nil), v...)})
			return len(got) < batch, nil
		})
		if err != nil {
			return err
		}
		for _, p := range got {
			if err := fn(p.k, p.v); err != nil {
				return err
			}
		}
		if len(got) < batch {
			return nil
		}
		pos = append(got[len(got)-1].k, 0) // the next key after the last one
	}
}

// sessionChunks returns the chunks referenced by any inode version of sid.
func (t *ReadTx) sessionChunks(sid SessionID) (map[Hash]uint32, error) {
	out := map[Hash]uint32{}
	err := scanKeys(t.r, key(pInode, sid[:]), func(k, v []byte) error {
		var n Inode
		if err := decode(k, v, &n); err != nil {
			return err
		}
		for _, e := range n.Extents {
			if e.Chunk != nil {
				var h Hash
				copy(h[:], e.Chunk)
				out[h] = uint32(e.Len) // a chunk: at most chunkMax
			}
		}
		return nil
	})
	return out, err
}

// chunkUsers returns the sessions other than sid that reference chunk h.
func (t *ReadTx) chunkUsers(h Hash, sid SessionID) ([]SessionID, error) {
	var out []SessionID
	prefix := key(pChunkRef, h[:])
	err := t.r.Scan(prefix, kv.PrefixEnd(prefix), func(k, _ []byte) (bool, error) {
		if len(k) != len(prefix)+16 {
			return false, fmt.Errorf("%w: chunk reference key %q", ErrCorrupt, k)
		}
		var other SessionID
		copy(other[:], k[len(prefix):])
		if other != sid {
			out = append(out, other)
		}
		return true, nil
	})
	return out, err
}

func sortedHashes(m map[Hash]uint32) []Hash {
	out := make([]Hash, 0, len(m))
	for h := range m {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return string(out[i][:]) < string(out[j][:]) })
	return out
}

// compactKV rewrites the storage files so that no freed page still holds
// deleted bytes. Drivers that cannot do it are an error: hard forget and
// redaction promise that the bytes are gone.
func (s *Store) compactKV(progress func(done, total int64)) error {
	c, ok := s.kv.(kv.Compactor)
	if !ok {
		return fmt.Errorf("storage driver %T cannot compact its files: deleted bytes may remain on disk", s.kv)
	}
	s.compacting.Store(true)
	defer s.compacting.Store(false)
	return c.Compact(progress)
}
