package fs

import (
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
)

// Negative entries. A lookup of a name that does not exist answers with a
// negative entry the kernel caches for liveTimeout (go-fuse's
// Options.NegativeTimeout), so that compilers, git and shells probing for
// files that are not there (.gitignore in every directory, $PATH, include
// paths) do not ask again. Names created through the mount replace the
// kernel's negative entries by themselves; for names that appear behind
// its back, the Server remembers which negative entries it handed out
// (until they expire) and InvalidateSession drops them.

// negKey is a negative entry: name in directory dir.
type negKey struct {
	dir  *gofs.Inode
	name string
}

type negEntry struct {
	sid     mvcc.SessionID
	expires time.Time
}

// noNegativeEntry makes a failed lookup uncacheable: go-fuse turns ENOENT
// into a cacheable negative entry only when the lookup left the entry
// timeout at zero, and answers a plain ENOENT otherwise.
func noNegativeEntry(out *fuse.EntryOut) { out.SetEntryTimeout(time.Nanosecond) }

// invalGen is the number of InvalidateSession runs of sid so far; a lookup
// notes it before reading the store, so that one racing with an
// invalidation can tell (see negativeEntry).
func (m *Server) invalGen(sid mvcc.SessionID) uint64 {
	m.negMu.Lock()
	defer m.negMu.Unlock()
	return m.invalGens[sid]
}

// negativeEntry decides about the ENOENT answer of a lookup of name in dir
// that started at invalidation generation gen: it is remembered for
// InvalidateSession and left cacheable, unless an invalidation ran while
// the lookup read the store (the name may exist by now): then it is not
// cacheable.
func (m *Server) negativeEntry(sid mvcc.SessionID, dir *gofs.Inode, name string, gen uint64, out *fuse.EntryOut) {
	now := time.Now()
	m.negMu.Lock()
	defer m.negMu.Unlock()
	if m.invalGens[sid] != gen {
		noNegativeEntry(out)
		return
	}
	if len(m.negs) >= m.negPrune {
		for k, e := range m.negs {
			if now.After(e.expires) {
				delete(m.negs, k)
			}
		}
		m.negPrune = max(1024, 2*len(m.negs))
	}
	// The kernel's clock starts a little later, when the answer arrives.
	m.negs[negKey{dir, name}] = negEntry{sid, now.Add(liveTimeout + time.Second)}
}

// takeNegatives starts an invalidation of sid and returns the negative
// entries of sid the kernel may still hold, forgetting them.
func (m *Server) takeNegatives(sid mvcc.SessionID) []negKey {
	now := time.Now()
	m.negMu.Lock()
	defer m.negMu.Unlock()
	m.invalGens[sid]++
	var out []negKey
	for k, e := range m.negs {
		if e.sid != sid {
			continue
		}
		if now.Before(e.expires) {
			out = append(out, k)
		}
		delete(m.negs, k)
	}
	return out
}
