package mvcc

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
)

// Redaction erases a string from every version of a session, in two steps
// like hard forget (PlanRedact, then Redact with the receipt's token).
//
// It is the one deliberate rewrite in place of padfs: every inode version
// whose content, symlink target or inline xattr values contain the needle,
// and every xattr version whose value does, is rewritten UNDER ITS OWN KEY,
// so the history keeps its structure (the same versions, HLCs, paths and
// event sequence) and only the bytes change. Writing new versions instead
// would leave the old ones, which is the very thing a leaked secret must
// not survive; rewriting a version's key would change the history's HLCs,
// which .asof/ links, checkpoints and the event log refer to. The
// rewritten versions get new content (new chunks for chunked files;
// ContentHLC set to the HLC of the redaction's mark so caches keyed on it
// drop the old bytes), events that recorded the old content's size and
// hash (or a symlink target) are updated the same way, and the chunks the
// rewritten versions stopped naming (only those are checked) are deleted
// when no version of any session names them any more. One new event,
// session.redact, records how many versions changed, never the needle.
// Then the storage is compacted so no freed page keeps the old bytes.
//
// It runs as a job (job.go): the mark (the session is invisible until the
// end), then batches of at most jobBatch versions, xattr versions, events
// and chunks, each its own transaction (the new content of a batch is
// stored before it, outside, as PutContent always is); cut short, it
// resumes where it stopped (FinishJob, or Redact with the same token). The
// job record holds the needle until the end, like the content it is
// erased from.
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

// redactPlan is a receipt plus what computing it found.
type redactPlan struct {
	r            *RedactReceipt
	needle, repl string
	names        nameHits
	contents     map[string]*Inode // content key -> a version holding it (content to redact)
	keep         map[Hash]bool     // chunks the session still uses afterwards
	old          map[Hash]bool     // chunks of the content being rewritten
	files        map[Ino]bool
	keys         int64  // inode and xattr versions and events: the job's progress total
	buf          []byte // content read, reused: a plan reads every content once
}

// nameHits collects where the needle was found in a name (a few, for the
// message).
type nameHits []string

func (nh *nameHits) add(where string) {
	if len(*nh) < 5 {
		*nh = append(*nh, where)
	}
}

func (nh nameHits) err() error {
	if len(nh) == 0 {
		return nil
	}
	return fmt.Errorf("%w: the text occurs in names (%s): redaction rewrites content, symlink targets and xattr values only, since names are the keys of the history; use a hard forget of the session instead",
		ErrInvalid, strings.Join(nh, "; "))
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
	switch {
	case len(n.ContentHash) > 0:
		return fmt.Sprintf("%x:%d", n.ContentHash, n.Size)
	case n.Extents != nil:
		// No whole-file hash (more than one chunk, or holes): equal
		// extents are equal bytes.
		h := sha256.New()
		var l [9]byte
		for _, e := range n.Extents {
			l[0] = byte(len(e.Chunk)) // 0: a hole
			binary.BigEndian.PutUint64(l[1:], e.Len)
			h.Write(l[:])
			h.Write(e.Chunk)
		}
		return fmt.Sprintf("ext:%x:%d", h.Sum(nil), n.Size)
	}
	return "key:" + string(k)
}

// PlanRedact returns the receipt of redacting needle (replaced by repl) in
// session sid. It changes nothing.
func (s *Store) PlanRedact(sid SessionID, needle, repl string) (*RedactReceipt, error) {
	var p *redactPlan
	err := s.planRetry(sid, func(t *ReadTx) error {
		var err error
		p, err = t.planRedact(sid, needle, repl)
		return err
	})
	if err != nil {
		return nil, err
	}
	return p.r, nil
}

// planRedact computes the receipt of a redaction (changing nothing): the
// versions and occurrences, the names that refuse it, the log entries and
// the chunks concerned, and the token bound to all of that.
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
	p := &redactPlan{r: r, needle: needle, repl: repl, contents: map[string]*Inode{},
		keep: map[Hash]bool{}, old: map[Hash]bool{}, files: map[Ino]bool{}}
	if strings.Contains(h.Name, needle) {
		p.names.add("the session name")
	}
	if err := t.planInodes(sid, p); err != nil {
		return nil, err
	}
	if err := t.planXattrs(sid, p); err != nil {
		return nil, err
	}
	r.Files = len(p.files)
	if err := t.planNames(sid, p); err != nil {
		return nil, err
	}
	if err := p.names.err(); err != nil {
		return nil, err
	}
	if err := t.planEvents(sid, p); err != nil {
		return nil, err
	}
	if err := t.planChunks(sid, p); err != nil {
		return nil, err
	}
	needleSum := sha256.Sum256([]byte(needle))
	replSum := sha256.Sum256([]byte(repl))
	r.Token = receiptToken("redact", sid.String(), r.LastSeq, uint64(r.LastHLC), hex.EncodeToString(needleSum[:]),
		hex.EncodeToString(replSum[:]), r.Files, r.Versions, r.Occurrences, r.Events, r.Chunks, r.SharedChunks)
	return p, nil
}

// contentVerdict is whether one content holds the needle.
type contentVerdict struct {
	hit    bool
	count  int
	chunks []Hash // of the redacted content
}

// planInodes looks at every inode version: content (each distinct content
// read once), symlink target and inline xattrs; file and xattr names.
func (t *ReadTx) planInodes(sid SessionID, p *redactPlan) error {
	seen := map[string]contentVerdict{}
	return scanKeys(t.r, key(pInode, sid[:]), func(k, v []byte) error {
		p.keys++
		var n Inode
		if err := decode(k, v, &n); err != nil {
			return err
		}
		if strings.Contains(n.Name, p.needle) {
			p.names.add(fmt.Sprintf("file name of inode %d", n.Ino))
		}
		hits := inlineHits(&n, p.needle, &p.names)
		contentHit := false
		if n.IsRegular() && n.Size > 0 {
			ck := contentKey(k, &n)
			vd, ok := seen[ck]
			if !ok {
				var err error
				if vd, err = t.contentVerdict(k, &n, p); err != nil {
					return err
				}
				if vd.hit {
					p.contents[ck] = &n
				}
				seen[ck] = vd
			}
			if vd.hit {
				contentHit = true
				hits += vd.count
				for _, h := range vd.chunks {
					p.keep[h] = true
				}
			}
		}
		for _, h := range chunkSet(&n) {
			if contentHit {
				p.old[h] = true
			} else {
				p.keep[h] = true
			}
		}
		if hits > 0 {
			p.files[n.Ino] = true
			p.r.Occurrences += hits
			p.r.Versions++
		}
		return nil
	})
}

// inlineHits counts the needles in a version's symlink target and inline
// xattr values, and notes xattr names holding it.
func inlineHits(n *Inode, needle string, names *nameHits) int {
	hits := strings.Count(n.Target, needle)
	for name, val := range n.Xattrs {
		if strings.Contains(name, needle) {
			names.add(fmt.Sprintf("xattr name of inode %d", n.Ino))
		}
		hits += strings.Count(string(val), needle)
	}
	return hits
}

// contentVerdict reads the content of version k and says whether, and how
// often, it holds the needle, and which chunks its redaction will have.
func (t *ReadTx) contentVerdict(k []byte, n *Inode, p *redactPlan) (contentVerdict, error) {
	data, err := t.ContentInto(n, p.buf)
	if err != nil {
		return contentVerdict{}, fmt.Errorf("inode %d version %s: %w", n.Ino, hlcFromInv(k), err)
	}
	p.buf = data
	if !bytes.Contains(data, []byte(p.needle)) {
		return contentVerdict{}, nil
	}
	red, c, err := redactBytes(data, p.needle, p.repl)
	if err != nil {
		return contentVerdict{}, err
	}
	return contentVerdict{hit: true, count: c, chunks: chunkHashes(red)}, nil
}

// planXattrs looks at the keyed xattr versions (rewritten under their own
// keys too) and their names.
func (t *ReadTx) planXattrs(sid SessionID, p *redactPlan) error {
	return scanKeys(t.r, key(pXattr, sid[:]), func(k, v []byte) error {
		p.keys++
		ino, name, err := splitXattrKey(k)
		if err != nil {
			return err
		}
		if strings.Contains(name, p.needle) {
			p.names.add(fmt.Sprintf("xattr name of inode %d", ino))
		}
		var x xattrVersion
		if err := decode(k, v, &x); err != nil {
			return err
		}
		if c := bytes.Count(x.Value, []byte(p.needle)); c > 0 {
			p.r.Versions++
			p.files[ino] = true
			p.r.Occurrences += c
		}
		return nil
	})
}

// planNames looks for the needle in the names the history is keyed by:
// directory entries, the log's paths and details, checkpoints. It counts
// the symlink events whose target it rewrites.
func (t *ReadTx) planNames(sid SessionID, p *redactPlan) error {
	needle := []byte(p.needle)
	dp := key(pDentry, sid[:])
	if err := scanKeys(t.r, dp, func(k, _ []byte) error {
		if len(k) >= len(dp)+8+9 && bytes.Contains(k[len(dp)+8:len(k)-9], needle) {
			p.names.add("a file name")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := t.Events(sid, 0, func(ev Event) bool {
		p.keys++
		if strings.Contains(ev.Path, p.needle) || strings.Contains(ev.Detail, p.needle) ||
			ev.Op != OpSymlink && strings.Contains(ev.Path2, p.needle) {
			p.names.add(fmt.Sprintf("the path or detail of event %d (%s)", ev.Seq, ev.Op))
		}
		if ev.Op == OpSymlink && strings.Contains(ev.Path2, p.needle) {
			p.r.Events++
		}
		return true
	}); err != nil {
		return err
	}
	return t.Checkpoints(sid, func(name string, _ HLC) bool {
		if strings.Contains(name, p.needle) {
			p.names.add("a checkpoint name")
		}
		return true
	})
}

// planEvents counts the events that recorded the content being replaced.
func (t *ReadTx) planEvents(sid SessionID, p *redactPlan) error {
	oldHashes := map[string]bool{}
	for _, n := range p.contents {
		oldHashes[n.HashHex()] = true
	}
	if len(oldHashes) == 0 {
		return nil
	}
	return t.Events(sid, 0, func(ev Event) bool {
		if ev.Hash != "" && oldHashes[ev.Hash] {
			p.r.Events++
		}
		return true
	})
}

// planChunks sorts the chunks the session stops using into those deleted
// and those other sessions keep.
func (t *ReadTx) planChunks(sid SessionID, p *redactPlan) error {
	others := map[SessionID]bool{}
	for _, h := range sortedHashSet(p.old) {
		if p.keep[h] {
			continue
		}
		users, err := t.chunkUsers(h, sid)
		if err != nil {
			return err
		}
		if len(users) == 0 {
			p.r.Chunks++
			continue
		}
		p.r.SharedChunks++
		for _, u := range users {
			if !others[u] {
				others[u] = true
				p.r.Others = append(p.r.Others, u)
			}
		}
	}
	return nil
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
