package mvcc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Redaction erases a string from every version of a session, in two steps
// like hard forget (PlanRedact, then Redact with the receipt's token).
//
// It is the one deliberate rewrite in place of padfs: every inode version
// whose content, symlink target or inline xattr values contain the needle,
// and every xattr version whose value does, is rewritten UNDER ITS OWN KEY, so the history keeps its structure (the same
// versions, HLCs, paths and event sequence) and only the bytes change.
// Writing new versions instead would leave the old ones, which is the very
// thing a leaked secret must not survive; rewriting a version's key would
// change the history's HLCs, which .asof/ links, checkpoints and the event
// log refer to. The rewritten versions get new content (new chunks for
// chunked files; ContentHLC set to the redaction's commit so caches keyed on
// it drop the old bytes), events that recorded the old content's size and
// hash (or a symlink target) are updated the same way, and chunks no
// version of the session uses any more lose its reference and are deleted
// when no other session references them. One new event, session.redact,
// records how many versions changed, never the needle. Then the storage is
// compacted so no freed page keeps the old bytes.
//
// Scope: file content (inline and chunked), symlink targets and xattr
// values, in every version. Names are keys of the history (file names in
// directory entries and inode records, paths in the log, xattr names,
// checkpoint names, the session name): a needle found in any of them makes
// the plan fail with ErrInvalid, changing nothing, because erasing it would
// change the history's paths. Hard forget (Purge) is the tool for those.
// Content that other sessions share (a fork's chunks or inline copies) is
// theirs too and stays until they are redacted as well; the receipt names
// the sessions that hold needle-bearing chunks.

// DefaultRedaction replaces the needle when no replacement is given.
const DefaultRedaction = "[REDACTED]"

// MinNeedle is the shortest needle, in bytes. Shorter strings occur by
// chance in any binary record (hashes, HLCs, lengths), so "nowhere in the
// data directory's bytes" could not be promised for them.
const MinNeedle = 4

// RedactReceipt describes what a redaction rewrites.
type RedactReceipt struct {
	Session SessionID `json:"session"`
	LastSeq uint64    `json:"last_seq"`
	LastHLC HLC       `json:"-"`
	// Files counts the inodes with at least one version to rewrite;
	// Versions the versions rewritten; Occurrences the needles replaced
	// in them (content, targets and xattr values).
	Files       int `json:"files"`
	Versions    int `json:"versions"`
	Occurrences int `json:"occurrences"`
	// Events counts log entries updated (content hash and size, symlink
	// targets).
	Events int `json:"events"`
	// Chunks are deleted (no session uses them afterwards); SharedChunks
	// lose this session's reference but stay for Others.
	Chunks       int         `json:"chunks"`
	SharedChunks int         `json:"shared_chunks"`
	Others       []SessionID `json:"others,omitempty"`
	Token        string      `json:"token"`
}

// redactPlan is a receipt plus what the rewrite needs.
type redactPlan struct {
	r        *RedactReceipt
	versions [][]byte          // inode version keys to rewrite
	xattrs   [][]byte          // xattr version keys to rewrite
	contents map[string]*Inode // content key -> a version holding it (content to redact)
	unref    []Hash            // chunks the session stops using
	del      map[Hash]bool     // ... of which no other session uses
}

func checkNeedle(needle, repl string) error {
	switch {
	case len(needle) < MinNeedle:
		return fmt.Errorf("%w: the text to redact must be at least %d bytes (shorter strings occur by chance in binary records)", ErrInvalid, MinNeedle)
	case strings.Contains(repl, needle):
		return fmt.Errorf("%w: the replacement contains the text to redact", ErrInvalid)
	}
	return nil
}

// redactBytes replaces every occurrence of needle, repeating while a
// replacement joined with its neighbours forms a new occurrence.
func redactBytes(data []byte, needle, repl string) ([]byte, int, error) {
	n, r := []byte(needle), []byte(repl)
	total := 0
	for i := 0; i < 16; i++ {
		c := bytes.Count(data, n)
		if c == 0 {
			return data, total, nil
		}
		total += c
		data = bytes.ReplaceAll(data, n, r)
	}
	return nil, 0, fmt.Errorf("%w: replacing the text keeps forming it anew from its neighbours; choose another replacement", ErrInvalid)
}

// contentKey identifies equal content (one read and one rewrite for every
// version sharing it).
func contentKey(k []byte, n *Inode) string {
	if len(n.ContentHash) == 0 {
		return "key:" + string(k)
	}
	return fmt.Sprintf("%x:%d", n.ContentHash, n.Size)
}

// PlanRedact returns the receipt of redacting needle (replaced by repl) in
// session sid. It changes nothing.
func (s *Store) PlanRedact(sid SessionID, needle, repl string) (*RedactReceipt, error) {
	var p *redactPlan
	err := s.View(func(t *ReadTx) error {
		var err error
		p, err = t.planRedact(sid, needle, repl)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p.r, nil
}

func (t *ReadTx) planRedact(sid SessionID, needle, repl string) (*redactPlan, error) {
	if err := checkNeedle(needle, repl); err != nil {
		return nil, err
	}
	h, err := t.Header(sid)
	if err != nil {
		return nil, err
	}
	r := &RedactReceipt{Session: sid}
	if r.LastSeq, r.LastHLC, err = t.LastEvent(sid); err != nil {
		return nil, err
	}
	p := &redactPlan{r: r, contents: map[string]*Inode{}, del: map[Hash]bool{}}
	var names []string // where the needle was found in a name
	nameHit := func(where string) {
		if len(names) < 5 {
			names = append(names, where)
		}
	}
	if strings.Contains(h.Name, needle) {
		nameHit("the session name")
	}

	type verdict struct {
		hit    bool
		count  int
		chunks []Hash // of the redacted content
	}
	seen := map[string]verdict{}
	files := map[Ino]bool{}
	keep := map[Hash]bool{} // chunks the session still uses afterwards
	old := map[Hash]bool{}  // chunks of the content being rewritten
	err = scanKeys(t.r, key(pInode, sid[:]), func(k, v []byte) error {
		var n Inode
		if err := decode(k, v, &n); err != nil {
			return err
		}
		if strings.Contains(n.Name, needle) {
			nameHit(fmt.Sprintf("file name of inode %d", n.Ino))
		}
		hits := 0
		for name, val := range n.Xattrs {
			if strings.Contains(name, needle) {
				nameHit(fmt.Sprintf("xattr name of inode %d", n.Ino))
			}
			hits += strings.Count(string(val), needle)
		}
		hits += strings.Count(n.Target, needle)
		contentHit := false
		if n.IsRegular() && n.Size > 0 {
			ck := contentKey(k, &n)
			vd, ok := seen[ck]
			if !ok {
				data, err := t.Content(&n)
				if err != nil {
					return fmt.Errorf("inode %d version %s: %w", n.Ino, hlcFromInv(k), err)
				}
				if bytes.Contains(data, []byte(needle)) {
					red, c, err := redactBytes(data, needle, repl)
					if err != nil {
						return err
					}
					vd = verdict{hit: true, count: c, chunks: chunkHashes(red)}
					p.contents[ck] = &n
				}
				seen[ck] = vd
			}
			if vd.hit {
				contentHit = true
				hits += vd.count
				for _, h := range vd.chunks {
					keep[h] = true
				}
			}
		}
		for _, e := range n.Extents {
			if e.Chunk == nil {
				continue
			}
			var h Hash
			copy(h[:], e.Chunk)
			if contentHit {
				old[h] = true
			} else {
				keep[h] = true
			}
		}
		if hits > 0 {
			p.versions = append(p.versions, append([]byte(nil), k...))
			files[n.Ino] = true
			r.Occurrences += hits
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Keyed xattrs: their versions are rewritten under their own keys too.
	err = scanKeys(t.r, key(pXattr, sid[:]), func(k, v []byte) error {
		ino, name, err := splitXattrKey(k)
		if err != nil {
			return err
		}
		if strings.Contains(name, needle) {
			nameHit(fmt.Sprintf("xattr name of inode %d", ino))
		}
		var x xattrVersion
		if err := decode(k, v, &x); err != nil {
			return err
		}
		if c := bytes.Count(x.Value, []byte(needle)); c > 0 {
			p.xattrs = append(p.xattrs, append([]byte(nil), k...))
			files[ino] = true
			r.Occurrences += c
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.Files, r.Versions = len(files), len(p.versions)+len(p.xattrs)

	// Names: directory entries, the log, checkpoints.
	dp := key(pDentry, sid[:])
	if err := scanKeys(t.r, dp, func(k, _ []byte) error {
		if len(k) >= len(dp)+8+9 && bytes.Contains(k[len(dp)+8:len(k)-9], []byte(needle)) {
			nameHit("a file name")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if err := t.Events(sid, 0, func(ev Event) bool {
		if strings.Contains(ev.Path, needle) || strings.Contains(ev.Detail, needle) ||
			ev.Op != OpSymlink && strings.Contains(ev.Path2, needle) {
			nameHit(fmt.Sprintf("the path or detail of event %d (%s)", ev.Seq, ev.Op))
		}
		if ev.Op == OpSymlink && strings.Contains(ev.Path2, needle) {
			r.Events++
		}
		return true
	}); err != nil {
		return nil, err
	}
	if err := t.Checkpoints(sid, func(name string, _ HLC) bool {
		if strings.Contains(name, needle) {
			nameHit("a checkpoint name")
		}
		return true
	}); err != nil {
		return nil, err
	}
	if len(names) > 0 {
		return nil, fmt.Errorf("%w: the text occurs in names (%s): redaction rewrites content, symlink targets and xattr values only, since names are the keys of the history; use a hard forget of the session instead",
			ErrInvalid, strings.Join(names, "; "))
	}

	// Events recording the content being replaced.
	oldHashes := map[string]bool{}
	for _, n := range p.contents {
		oldHashes[n.HashHex()] = true
	}
	if len(oldHashes) > 0 {
		if err := t.Events(sid, 0, func(ev Event) bool {
			if ev.Hash != "" && oldHashes[ev.Hash] {
				r.Events++
			}
			return true
		}); err != nil {
			return nil, err
		}
	}

	// Chunks the session stops using.
	others := map[SessionID]bool{}
	for _, h := range sortedHashSet(old) {
		if keep[h] {
			continue
		}
		p.unref = append(p.unref, h)
		users, err := t.chunkUsers(h, sid)
		if err != nil {
			return nil, err
		}
		if len(users) == 0 {
			p.del[h] = true
			r.Chunks++
			continue
		}
		r.SharedChunks++
		for _, u := range users {
			if !others[u] {
				others[u] = true
				r.Others = append(r.Others, u)
			}
		}
	}
	needleSum := sha256.Sum256([]byte(needle))
	replSum := sha256.Sum256([]byte(repl))
	r.Token = receiptToken("redact", sid.String(), r.LastSeq, uint64(r.LastHLC), hex.EncodeToString(needleSum[:]),
		hex.EncodeToString(replSum[:]), r.Files, r.Versions, r.Occurrences, r.Events, r.Chunks, r.SharedChunks)
	return p, nil
}

func sortedHashSet(m map[Hash]bool) []Hash {
	mm := make(map[Hash]uint32, len(m))
	for h := range m {
		mm[h] = 0
	}
	return sortedHashes(mm)
}

// chunkHashes returns the chunk hashes PutContent would store data under
// (none for inline content or holes).
func chunkHashes(data []byte) []Hash {
	if len(data) <= InlineMax {
		return nil
	}
	var out []Hash
	_ = eachChunk(bytes.NewReader(data), func(c []byte, hole bool) error {
		if !hole {
			out = append(out, Hash(sha256.Sum256(c)))
		}
		return nil
	})
	return out
}

// Redact replaces needle by repl (DefaultRedaction if repl is nil) in
// every version of session sid, if token matches the receipt PlanRedact
// returns now (else ErrToken, and nothing changed); then it compacts the
// storage. It returns the receipt it carried out. The search index keeps its
// own copy: the caller re-indexes the session.
func (s *Store) Redact(sid SessionID, needle string, repl *string, token string, progress Progress) (*RedactReceipt, error) {
	progress, stop := progress.detach()
	defer stop()
	rp := DefaultRedaction
	if repl != nil {
		rp = *repl
	}
	var plan *redactPlan
	if err := s.View(func(t *ReadTx) error {
		var err error
		plan, err = t.planRedact(sid, needle, rp)
		return err
	}); err != nil {
		return nil, err
	}
	if strings.TrimSpace(token) != plan.r.Token {
		return nil, fmt.Errorf("%w: session %s", ErrToken, sid)
	}
	if plan.r.Versions == 0 {
		return plan.r, nil // nothing to rewrite: no commit, no event
	}

	// New content first, outside the commit (as PutContent always is).
	total := int64(len(plan.contents) + len(plan.versions) + len(plan.xattrs))
	var done int64
	progress.report("redact", 0, total)
	repl2 := map[string]*Content{}
	for ck, n := range plan.contents {
		var data []byte
		if err := s.View(func(t *ReadTx) error {
			var err error
			data, err = t.Content(n)
			return err
		}); err != nil {
			return nil, err
		}
		red, _, err := redactBytes(data, needle, rp)
		if err != nil {
			return nil, err
		}
		c, err := s.PutContent(context.Background(), bytes.NewReader(red))
		if err != nil {
			return nil, err
		}
		repl2[ck] = c
		done++
		progress.report("redact", done, total)
	}

	var r *RedactReceipt
	_, err := s.commit(sid, commitAny, func(t *WriteTx) error {
		p, err := t.planRedact(sid, needle, rp)
		if err != nil {
			return err
		}
		if p.r.Token != plan.r.Token {
			return fmt.Errorf("%w: session %s changed while its new content was being written", ErrToken, sid)
		}
		r = p.r
		// Every new chunk must still be there (a concurrent purge of another
		// session could have deleted a chunk PutContent found present).
		for _, c := range repl2 {
			for _, e := range c.Extents {
				if e.Chunk == nil {
					continue
				}
				if v, err := t.w.Get(key(pChunk, e.Chunk)); err != nil {
					return err
				} else if v == nil {
					return fmt.Errorf("mvcc: chunk %x vanished during the redaction; run it again", e.Chunk)
				}
			}
		}
		newHash := map[string]*Content{} // old content hash (hex) -> new content
		for _, k := range p.versions {
			v, err := t.w.Get(k)
			if err != nil {
				return err
			}
			if v == nil {
				return fmt.Errorf("%w: version %q vanished", ErrCorrupt, k)
			}
			var n Inode
			if err := decode(k, v, &n); err != nil {
				return err
			}
			if n.IsRegular() && n.Size > 0 {
				if c, ok := repl2[contentKey(k, &n)]; ok {
					newHash[n.HashHex()] = c
					c.Apply(&n)
					n.ContentHLC = t.hlc
				}
			}
			if strings.Contains(n.Target, needle) {
				red, _, err := redactBytes([]byte(n.Target), needle, rp)
				if err != nil {
					return err
				}
				n.Target, n.Size = string(red), uint64(len(red))
			}
			for name, val := range n.Xattrs {
				if bytes.Contains(val, []byte(needle)) {
					red, _, err := redactBytes(append([]byte(nil), val...), needle, rp)
					if err != nil {
						return err
					}
					n.Xattrs[name] = red
				}
			}
			if err := t.putChunkRefs(&n); err != nil {
				return err
			}
			if err := t.put(k, &n); err != nil {
				return err
			}
			done++
			progress.report("redact", done, total)
		}
		for _, k := range p.xattrs {
			v, err := t.w.Get(k)
			if err != nil {
				return err
			}
			var x xattrVersion
			if err := decode(k, v, &x); err != nil {
				return err
			}
			if x.Value, _, err = redactBytes(x.Value, needle, rp); err != nil {
				return err
			}
			if err := t.put(k, &x); err != nil {
				return err
			}
			done++
			progress.report("redact", done, total)
		}
		// The log: content hashes and sizes, symlink targets.
		var evKeys [][]byte
		var evs []Event
		if err := t.Events(sid, 0, func(ev Event) bool {
			changed := false
			if c, ok := newHash[ev.Hash]; ok && ev.Hash != "" {
				ev.Hash, ev.Size, changed = hex.EncodeToString(c.Hash), int64(c.Size), true
			}
			if ev.Op == OpSymlink && strings.Contains(ev.Path2, needle) {
				if red, _, err := redactBytes([]byte(ev.Path2), needle, rp); err == nil {
					ev.Path2, changed = string(red), true
				}
			}
			if changed {
				evKeys = append(evKeys, eventKey(sid, ev.Seq))
				evs = append(evs, ev)
			}
			return true
		}); err != nil {
			return err
		}
		for i := range evs {
			if err := t.put(evKeys[i], &evs[i]); err != nil {
				return err
			}
		}
		// Chunks the session no longer uses.
		for _, h := range p.unref {
			if err := t.w.Delete(chunkRefKey(h, sid)); err != nil {
				return err
			}
			if p.del[h] {
				if err := t.w.Delete(chunkKey(h)); err != nil {
					return err
				}
			}
		}
		// Versions were rewritten in place: count the references afresh.
		if err := recountChunkRefsLocked(t.w, sid, nil); err != nil {
			return err
		}
		if _, err := deleteOrphanChunks(t.w); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpRedact, Path: ".",
			Detail: fmt.Sprintf("%d versions of %d files rewritten (%d occurrences)", r.Versions, r.Files, r.Occurrences)})
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := s.compactKV(func(done, total int64) { progress.report("compact", done, total) }); err != nil {
		return r, fmt.Errorf("session %s was redacted, but compacting the store failed (old bytes may remain on disk until a compaction succeeds): %w", sid, err)
	}
	return r, nil
}
