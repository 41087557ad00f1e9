package postgres

import (
	"sync"

	"github.com/tidwall/btree"
)

// The cache: this process's copy of the parts of the keyspace it has read
// or written, so that most reads need no round trip.
//
// It holds spans, ranges [lo, hi) of keys whose every row it knows, and
// the rows inside them. It describes the database as of one generation:
// every commit, of any process, is one generation, numbered in
// padfs_changes (gen, parts) with the key prefixes ("partitions") it
// wrote or deleted:
//
//	partition of a key = its first 17 bytes for the session-keyed prefixes
//	                     (kind byte + session id: H Z N K E D I X S P L W),
//	                     else its first byte (M meta, C chunks, R chunk refs)
//
// A transaction learns its generation in its first round trip, in the
// same snapshot (a View's REPEATABLE READ snapshot; an Update's reads under
// the writer lock, where nothing commits beside it), together with the
// rows of padfs_changes after the cache's generation. Before it reads the
// cache, the cache drops every span of the partitions those commits
// touched and moves to the transaction's generation: what is left is
// exactly what the database held at that generation. This process's own
// commits do not drop anything: their writes go into the cache as they
// commit (apply), so that a process working alone reads almost only its
// cache. Another process's commit, be it a write, a prune, a purge, a
// hard forget or a redaction, drops what it touched before this process
// reads it again: the cache can never serve a row another host deleted or
// miss one it wrote, and a transaction sees one generation throughout,
// from its cache and its queries alike.
//
// Writers that do not know this protocol (an older padfs, or SQL typed by
// hand) are caught by a statement trigger on padfs_kv: any statement of a
// transaction that did not log its own change appends a change of
// partition "" (everything).
//
// A transaction whose generation is not the cache's (the cache moved on
// while it ran, or is behind a snapshot it cannot be brought to) reads
// the database only. The cache is bounded (Options.CacheBytes): when full,
// it is emptied.
type cache struct {
	mu    sync.Mutex
	gen   int64 // the generation the cache describes
	nonce int64 // its change's nonce
	trees
	bytes   int
	max     int
	pending map[int64]*batch // our commits sent but not yet applied: gen -> batch
	// Snapshots still reading trees the cache shares with them: the
	// cache copies its trees for them (copy on write) only when it is
	// about to change them (detachLocked), so that a View that ends
	// before the next commit, as most do, costs the commit no copy.
	live map[*snapshot]struct{}
}

// trees are the cache's rows and spans; a snapshot (cache.snapshot) is a
// copy-on-write copy of them that the cache's later changes leave alone.
type trees struct {
	ents  *btree.BTreeG[row]  // the rows of the spans
	spans *btree.BTreeG[span] // disjoint, never adjacent
}

// snapshot is the cache as of one generation, for a lease-local View. Its
// trees are the cache's until the cache changes (then a copy of them as
// they were): read them with the cache's lock held (lookup, seek).
type snapshot struct {
	c *cache
	trees
	gen, nonce int64
}

// span is the range [lo, hi) (inf: no upper bound) whose rows the cache
// holds every one of.
type span struct {
	lo, hi string
	inf    bool
}

func spanLess(a, b span) bool { return a.lo < b.lo }
func rowLess(a, b row) bool   { return string(a.k) < string(b.k) }

// maxCachedValue keeps large values (content chunks) out of the cache.
const maxCachedValue = 16 << 10

func newCache(max int) *cache {
	c := &cache{max: max, pending: map[int64]*batch{}, live: map[*snapshot]struct{}{}}
	c.reset()
	return c
}

// detachLocked gives the live snapshots a copy of the trees, which the
// cache is about to change.
func (c *cache) detachLocked() {
	if len(c.live) == 0 {
		return
	}
	cp := trees{ents: c.ents.Copy(), spans: c.spans.Copy()}
	for sn := range c.live {
		sn.trees = cp
	}
	clear(c.live)
}

func (c *cache) reset() {
	// New trees: the old ones, which live snapshots may share, are left
	// alone.
	clear(c.live)
	c.ents = btree.NewBTreeGOptions(rowLess, btree.Options{NoLocks: true})
	c.spans = btree.NewBTreeGOptions(spanLess, btree.Options{NoLocks: true})
	c.bytes = 0
}

// partOf is the partition of key k.
func partOf(k []byte) []byte {
	if len(k) >= 17 && sessionKind(k[0]) {
		return k[:17]
	}
	if len(k) == 0 {
		return k
	}
	return k[:1]
}

// sessionKind reports whether keys of kind b are a session's: the kind
// byte, then the session's 16-byte id (the mvcc key layout).
func sessionKind(b byte) bool {
	return guardedKind(b) || b == 'E' || b == 'N' || b == 'K'
}

// guardedKind reports whether keys of kind b are those of a session that
// only its lease holder may change, and so reads lease-local: all of a
// session's kinds but its log (E events, N counters) and its checkpoint
// names (K). A commit of those alone, a checkpoint, changes no file, no
// content and no metadata, so any host may make it while another holds
// the lease; the holder reads them with a check, as it reads other keys.
// The guard (padfs_guard; guardedSessions for a commit's own check) knows
// the same list.
func guardedKind(b byte) bool {
	switch b {
	case 'H', 'Z', 'D', 'I', 'X', 'S', 'P', 'L', 'W':
		return true
	}
	return false
}

// widenEnd is where a read that misses at pos may read ahead to (the end
// of pos's partition) for the metadata prefixes, whose neighbours are
// read next (a directory's entries, the inodes listed after it).
func widenEnd(pos string) (string, bool) {
	if len(pos) >= 17 {
		switch pos[0] {
		case 'D', 'I', 'X':
			if e := prefixEnd(pos[:17]); e != "" {
				return e, true
			}
		}
	}
	return "", false
}

func prefixEnd(p string) string {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		b[i]++
		if b[i] != 0 {
			return string(b[:i+1])
		}
	}
	return ""
}

// change is one row of padfs_changes. The nonce tells a generation from
// another with its number (a database restored, or one that lost its last
// commits in a crash with synchronous_commit off).
type change struct {
	gen   int64
	nonce int64
	parts [][]byte
}

// advance brings the cache to generation g (nonce: its change's), given
// the changes from the cache's generation on (as it was when they were
// read; they may end before g: then the cache cannot tell what changed
// and empties). An Update's view is authoritative (it holds the writer
// lock): a generation older than the cache's means the database went
// back, and the cache empties; a View's older generation only means it
// began before the cache moved on. It reports whether the cache is at g.
func (c *cache) advance(g, nonce int64, changes []change, authoritative bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen > g {
		if authoritative {
			c.reset()
			c.gen, c.nonce = g, nonce
		}
		return authoritative
	}
	i := 0
	for i < len(changes) && changes[i].gen < c.gen {
		i++
	}
	if c.gen > 0 && (i == len(changes) || changes[i].gen != c.gen || changes[i].nonce != c.nonce) {
		// The cache's own generation is gone or is another one.
		c.reset()
		c.gen, c.nonce = g, nonce
		return true
	}
	if c.gen > 0 {
		i++
	}
	next := c.gen + 1
	for ; i < len(changes) && changes[i].gen <= g; i++ {
		ch := changes[i]
		if ch.gen != next {
			break // a gap: rows trimmed
		}
		if b := c.pending[ch.gen]; b != nil && b.nonce == ch.nonce {
			// Our own commit, which the database shows committed before
			// its committer came back to apply it.
			c.applyLocked(b)
		} else {
			for _, p := range ch.parts {
				c.dropLocked(p)
			}
		}
		next++
	}
	if next != g+1 {
		c.reset()
	}
	c.gen, c.nonce = g, nonce
	return true
}

// dropLocked forgets every span and row of partition p ("" : all).
func (c *cache) dropLocked(p []byte) {
	if len(p) == 0 {
		c.reset()
		return
	}
	lo, hi := string(p), prefixEnd(string(p))
	c.uncoverLocked(lo, hi, hi == "")
}

// uncoverLocked removes [lo, hi) (inf: to the end) from the spans and its
// rows from the cache.
func (c *cache) uncoverLocked(lo, hi string, inf bool) {
	c.detachLocked()
	var hit []span
	if s, ok := c.spanBefore(lo); ok && (s.inf || s.hi > lo) {
		hit = append(hit, s)
	}
	c.spans.Ascend(span{lo: lo}, func(s span) bool {
		if !inf && s.lo >= hi {
			return false
		}
		hit = append(hit, s)
		return true
	})
	for _, s := range hit {
		c.spans.Delete(s)
		if s.lo < lo {
			c.spans.Set(span{lo: s.lo, hi: lo})
		}
		if !inf && (s.inf || s.hi > hi) {
			c.spans.Set(span{lo: hi, hi: s.hi, inf: s.inf})
		}
	}
	var dead []row
	c.ents.Ascend(row{k: []byte(lo)}, func(r row) bool {
		if !inf && string(r.k) >= hi {
			return false
		}
		dead = append(dead, r)
		return true
	})
	for _, r := range dead {
		c.ents.Delete(r)
		c.bytes -= len(r.k) + len(r.v)
	}
}

// spanBefore returns the span starting at or before k.
func (c *trees) spanBefore(k string) (span, bool) {
	var out span
	var ok bool
	c.spans.Descend(span{lo: k}, func(s span) bool {
		out, ok = s, true
		return false
	})
	return out, ok
}

// covering returns the span holding k.
func (c *trees) covering(k string) (span, bool) {
	s, ok := c.spanBefore(k)
	if ok && (s.inf || k < s.hi) {
		return s, true
	}
	return span{}, false
}

// coverLocked adds [lo, hi) to the spans, merging it with the spans it
// overlaps or touches.
func (c *cache) coverLocked(lo, hi string, inf bool) {
	if !inf && hi <= lo {
		return
	}
	s, ok := c.spanBefore(lo)
	if ok && (s.inf || !inf && s.hi >= hi) {
		return // covered already: a commit's key in a range read before
	}
	c.detachLocked()
	if ok && (s.inf || s.hi >= lo) {
		c.spans.Delete(s)
		lo = s.lo
		if s.inf || !inf && s.hi > hi {
			hi, inf = s.hi, s.inf
		}
	}
	var absorbed []span
	c.spans.Ascend(span{lo: lo}, func(s span) bool {
		if !inf && s.lo > hi {
			return false
		}
		absorbed = append(absorbed, s)
		return true
	})
	for _, s := range absorbed {
		c.spans.Delete(s)
		if s.inf || !inf && s.hi > hi {
			hi, inf = s.hi, s.inf
		}
	}
	c.spans.Set(span{lo: lo, hi: hi, inf: inf})
}

func (c *cache) setLocked(k string, v []byte) {
	c.detachLocked()
	if old, ok := c.ents.Set(row{k: []byte(k), v: v}); ok {
		c.bytes -= len(old.k) + len(old.v)
	}
	c.bytes += len(k) + len(v)
}

func (c *cache) deleteLocked(k string) {
	c.detachLocked()
	if old, ok := c.ents.Delete(row{k: []byte(k)}); ok {
		c.bytes -= len(old.k) + len(old.v)
	}
}

// get looks key k up as of generation g: covered false if the cache cannot
// tell.
func (c *cache) get(g int64, k []byte) (v []byte, found, covered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != g {
		return nil, false, false
	}
	return c.lookup(k)
}

// lookup is get in the trees, whatever their generation.
func (c *trees) lookup(k []byte) (v []byte, found, covered bool) {
	if _, ok := c.covering(string(k)); !ok {
		return nil, false, false
	}
	r, ok := c.ents.Get(row{k: k})
	return r.v, ok, true
}

// next returns the first row in [pos, end) (end nil: unbounded) as of
// generation g, as far as the spans tell: found, or known that there is
// none; else (known false) the cache does not cover pos, which moves to
// the first key it cannot tell about.
func (c *cache) next(g int64, pos *string, end []byte) (k, v []byte, found, known bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != g {
		return nil, nil, false, false
	}
	return c.seek(pos, end)
}

// seek is next in the trees, whatever their generation.
func (c *trees) seek(pos *string, end []byte) (k, v []byte, found, known bool) {
	for {
		s, ok := c.covering(*pos)
		if !ok {
			return nil, nil, false, false
		}
		c.ents.Ascend(row{k: []byte(*pos)}, func(r row) bool {
			if !s.inf && string(r.k) >= s.hi || end != nil && string(r.k) >= string(end) {
				return false
			}
			k, v, found = r.k, r.v, true
			return false
		})
		if found {
			return k, v, true, true
		}
		if s.inf || end != nil && s.hi >= string(end) {
			return nil, nil, false, true
		}
		*pos = s.hi
	}
}

// fill records what a query at generation g read: every row of [lo, hi)
// (inf: to the end) is in rows. It reports whether the cache took it.
func (c *cache) fill(g int64, lo, hi string, inf bool, rows []row) bool {
	for _, r := range rows {
		if len(r.v) > maxCachedValue {
			return false
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != g {
		return false
	}
	for _, r := range rows {
		c.setLocked(string(r.k), r.v)
	}
	c.coverLocked(lo, hi, inf)
	if c.bytes > c.max {
		c.reset()
		return false
	}
	return true
}

// snapshot returns the cache as it is now (its generation and rows),
// which the cache's later changes leave alone (copy on write, from the
// first change on) until release. It returns nil if the cache is older
// than generation min.
func (c *cache) snapshot(min int64) *snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen < min {
		return nil
	}
	sn := &snapshot{c: c, trees: c.trees, gen: c.gen, nonce: c.nonce}
	c.live[sn] = struct{}{}
	return sn
}

// release ends sn's use: the cache need not copy its trees for it.
func (sn *snapshot) release() {
	sn.c.mu.Lock()
	delete(sn.c.live, sn)
	sn.c.mu.Unlock()
}

// lookup is trees.lookup in the snapshot.
func (sn *snapshot) lookup(k []byte) (v []byte, found, covered bool) {
	sn.c.mu.Lock()
	defer sn.c.mu.Unlock()
	return sn.trees.lookup(k)
}

// seek is trees.seek in the snapshot.
func (sn *snapshot) seek(pos *string, end []byte) (k, v []byte, found, known bool) {
	sn.c.mu.Lock()
	defer sn.c.mu.Unlock()
	return sn.trees.seek(pos, end)
}

// begin registers batch b, about to commit as generation g, so that a
// transaction that sees g committed first applies b's writes rather than
// dropping its partitions.
func (c *cache) begin(g int64, b *batch) {
	c.mu.Lock()
	c.pending[g] = b
	c.mu.Unlock()
}

// committed applies batch b (generation g) after its COMMIT, or with ok
// false forgets it (its fate unknown: the next transaction's changes tell).
func (c *cache) committed(g int64, b *batch, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, g)
	if ok && c.gen == g-1 {
		c.applyLocked(b)
		c.gen, c.nonce = g, b.nonce
	}
}

// applyLocked writes batch b's rows into the cache: each key it wrote is
// now known (a value, or absent).
func (c *cache) applyLocked(b *batch) {
	b.ov.Scan(func(e entry) bool {
		switch {
		case e.del:
			c.deleteLocked(e.k)
			c.coverLocked(e.k, e.k+"\x00", false)
		case len(e.v) > maxCachedValue:
			c.uncoverLocked(e.k, e.k+"\x00", false)
		default:
			c.setLocked(e.k, e.v)
			c.coverLocked(e.k, e.k+"\x00", false)
		}
		return true
	})
	if c.bytes > c.max {
		c.reset()
	}
}
