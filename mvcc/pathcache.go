package mvcc

import (
	"sync"

	"github.com/padfs/padfs/mvcc/kv"
)

// pathCache remembers the paths of directories of each session's latest
// tree, so that naming a file in the commit log does not walk its parent
// chain on every commit (tar -x and git write thousands of files into a
// few directories). Only commits read and fill it, inside the serialized
// write transaction; a commit that moves or removes a directory drops the
// session's entries, and so does a purge.
//
// Another process sharing the store (PostgreSQL) may commit too: when a
// commit finds a high-water mark it did not write, every cached session
// becomes suspect, and the next commit to a suspect session keeps its
// entries only if the session's log still ends at the event we last
// wrote to it.
type pathCache struct {
	mu      sync.Mutex
	m       map[SessionID]map[Ino]string
	seq     map[SessionID]uint64 // the session's last event when its entries were right
	suspect map[SessionID]bool
}

// pathCacheMax bounds the directories remembered per session.
const pathCacheMax = 1 << 16

func (c *pathCache) get(sid SessionID, dir Ino) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[sid][dir]
	return p, ok
}

func (c *pathCache) add(sid SessionID, staged map[Ino]string) {
	if len(staged) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[SessionID]map[Ino]string{}
	}
	m := c.m[sid]
	if m == nil || len(m) > pathCacheMax {
		m = map[Ino]string{}
		c.m[sid] = m
	}
	for ino, p := range staged {
		m[ino] = p
	}
}

func (c *pathCache) drop(sid SessionID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, sid)
	delete(c.seq, sid)
	delete(c.suspect, sid)
}

// setSeq records the event a commit appended to sid.
func (c *pathCache) setSeq(sid SessionID, seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seq == nil {
		c.seq = map[SessionID]uint64{}
	}
	c.seq[sid] = seq
}

// suspectAll marks every cached session as possibly changed by another
// process.
func (c *pathCache) suspectAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.suspect == nil {
		c.suspect = map[SessionID]bool{}
	}
	for sid := range c.m {
		c.suspect[sid] = true
	}
}

// checkLocked drops sid's entries if it is suspect and its log moved on
// since our last commit to it (inside the write transaction r).
func (c *pathCache) checkLocked(r kv.Reader, sid SessionID) error {
	c.mu.Lock()
	suspect, seq := c.suspect[sid], c.seq[sid]
	c.mu.Unlock()
	if !suspect {
		return nil
	}
	ck := countersKey(sid)
	var cn counters
	if v, err := r.Get(ck); err != nil {
		return err
	} else if v != nil {
		if err := decode(ck, v, &cn); err != nil {
			return err
		}
	}
	if cn.NextSeq != seq {
		c.drop(sid)
		return nil
	}
	c.mu.Lock()
	delete(c.suspect, sid)
	c.mu.Unlock()
	return nil
}
