package mvcc

import "sync"

// pathCache remembers the paths of directories of each session's latest
// tree, so that naming a file in the commit log does not walk its parent
// chain on every commit (tar -x and git write thousands of files into a
// few directories). Only commits read and fill it, inside the serialized
// write transaction; a commit that moves or removes a directory drops the
// session's entries, and so does a purge.
type pathCache struct {
	mu sync.Mutex
	m  map[SessionID]map[Ino]string
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
}
