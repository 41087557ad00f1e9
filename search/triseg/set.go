package triseg

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/padfs/padfs/search/trigram"
)

// BucketBits is the width of a binary file's trigram buckets: a bucket is
// that many bits of a hash of the folded trigram, so a binary file
// holding a trigram holds its bucket (binary files hold millions of
// distinct trigrams no text has).
const BucketBits = 16

// Bucket is the bucket of folded trigram code c (3 bytes, big endian).
func Bucket(c uint32) uint32 { return (c * 0x9E3779B1) >> (32 - BucketBits) }

// TriKey is the key of folded trigram t (3 bytes) in a text document.
func TriKey(t string) uint32 { return uint32(t[0])<<16 | uint32(t[1])<<8 | uint32(t[2]) }

// BucketKey is the key of bucket b in a binary document.
func BucketKey(b uint32) uint32 { return 1<<24 | b }

// Builder collects one batch: documents and deletions, the last
// operation on a path winning.
type Builder struct {
	paths []string
	kinds []byte
	keys  [][]uint32
	at    map[string]int
	n     int // postings
}

// NewBuilder returns an empty batch.
func NewBuilder() *Builder { return &Builder{at: map[string]int{}} }

// Len is the number of paths the batch names.
func (b *Builder) Len() int { return len(b.paths) }

func (b *Builder) set(path string, kind byte, keys []uint32) {
	if i, ok := b.at[path]; ok {
		b.n -= len(b.keys[i])
		b.kinds[i], b.keys[i] = kind, keys
	} else {
		b.at[path] = len(b.paths)
		b.paths = append(b.paths, path)
		b.kinds = append(b.kinds, kind)
		b.keys = append(b.keys, keys)
	}
	b.n += len(keys)
}

// Add records the document of path: its kind and its distinct keys
// (TriKey for KindText, BucketKey for KindBinary, none for
// KindUnindexed).
func (b *Builder) Add(path string, kind byte, keys []uint32) { b.set(path, kind, keys) }

// Delete records that path has no document.
func (b *Builder) Delete(path string) { b.set(path, kindTomb, nil) }

// sortedPairs returns (key<<32 | doc) for every posting, sorted: a stable
// radix sort on the key's 25 bits of pairs made in document order.
func (b *Builder) sortedPairs() []uint64 {
	pairs := make([]uint64, 0, b.n)
	for d, ks := range b.keys {
		for _, k := range ks {
			pairs = append(pairs, uint64(k)<<32|uint64(d))
		}
	}
	tmp := make([]uint64, len(pairs))
	for _, shift := range []uint{32, 48} {
		var count [1<<16 + 1]int
		for _, p := range pairs {
			count[(p>>shift)&0xffff+1]++
		}
		for i := 1; i < len(count); i++ {
			count[i] += count[i-1]
		}
		for _, p := range pairs {
			c := (p >> shift) & 0xffff
			tmp[count[c]] = p
			count[c]++
		}
		pairs, tmp = tmp, pairs
	}
	return pairs
}

// Set is the segments of one index directory.
type Set struct {
	dir string

	mu       sync.Mutex
	segs     []*Segment // by Lo; ranges disjoint
	next     uint64
	pending  map[uint64]bool   // batch numbers being written
	retired  map[*Segment]bool // merged away, file still open
	snap     *snapshot
	closed   bool
	merging  bool
	stop     chan struct{}
	mergeWG  sync.WaitGroup
	mergeErr func(error)

	// MaxSegments is the segment count above which a merge starts.
	MaxSegments int
}

// ErrMissing: the set's directory does not exist.
var ErrMissing = errors.New("trigram segments missing")

// Open opens the segments in dir (creating dir with create). Temp files
// of a writer that died are removed, and so are the inputs of a merge
// whose output is in place. onMergeErr, if not nil, is told of a failed
// background merge.
func Open(dir string, create bool, onMergeErr func(error)) (*Set, error) {
	if create {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrMissing, dir)
	}
	if err != nil {
		return nil, err
	}
	type file struct {
		name   string
		lo, hi uint64
	}
	var files []file
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".tmp-") {
			_ = os.Remove(filepath.Join(dir, name))
			continue
		}
		var lo, hi uint64
		if n, err := fmt.Sscanf(name, "%016x-%016x.tri", &lo, &hi); err != nil || n != 2 || name != segName(lo, hi) || lo > hi {
			continue
		}
		files = append(files, file{name, lo, hi})
	}
	// By lo, the widest range first: a range inside the one before it is
	// a merge's input left behind.
	slices.SortFunc(files, func(a, b file) int {
		if a.lo != b.lo {
			return cmpU(a.lo, b.lo)
		}
		return cmpU(b.hi, a.hi)
	})
	s := &Set{dir: dir, pending: map[uint64]bool{}, retired: map[*Segment]bool{}, stop: make(chan struct{}), mergeErr: onMergeErr, MaxSegments: 8}
	for _, f := range files {
		p := filepath.Join(dir, f.name)
		if n := len(s.segs); n > 0 && f.lo <= s.segs[n-1].Hi {
			if f.hi <= s.segs[n-1].Hi {
				_ = os.Remove(p)
				continue
			}
			return nil, fmt.Errorf("%w %s: overlaps %s", ErrCorrupt, p, s.segs[n-1].name)
		}
		seg, err := OpenSegment(p, f.lo, f.hi)
		if err != nil {
			return nil, err
		}
		s.segs = append(s.segs, seg)
		s.next = f.hi + 1
	}
	return s, nil
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func segName(lo, hi uint64) string { return fmt.Sprintf("%016x-%016x.tri", lo, hi) }

// Segments is the number of segments.
func (s *Set) Segments() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.segs)
}

// Close stops a merge under way, waits for it and closes the segment
// files, merged ones too (a dropped or redacted index's bytes are freed
// at once); a query still under way on them fails with an error that is
// not ErrCorrupt.
func (s *Set) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	s.mu.Unlock()
	s.mergeWG.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, g := range s.segs {
		g.Close()
	}
	for g := range s.retired {
		g.Close()
		delete(s.retired, g)
	}
}

var errClosed = errors.New("trigram segments closed")

// Add writes b as a new segment, synced, and makes it visible. Call it
// before the batch's other half (bleve) is applied.
func (s *Set) Add(b *Builder) error {
	if b.Len() == 0 {
		return nil
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	n := s.next
	s.next++
	s.pending[n] = true
	s.mu.Unlock()
	seg, err := s.write(n, n, func(wr *writer) error {
		return writeBuilder(wr, b)
	}, b.paths, b.kinds)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pending, n)
	if err != nil {
		return err
	}
	if s.closed {
		seg.Close()
		return errClosed
	}
	i, _ := slices.BinarySearchFunc(s.segs, n, func(g *Segment, n uint64) int { return cmpU(g.Lo, n) })
	s.segs = slices.Insert(s.segs, i, seg)
	s.snap = nil
	s.maybeMergeLocked()
	return nil
}

func writeBuilder(wr *writer, b *Builder) error {
	pairs := b.sortedPairs()
	var docs []uint32
	for i := 0; i < len(pairs); {
		key := uint32(pairs[i] >> 32)
		docs = docs[:0]
		for ; i < len(pairs) && uint32(pairs[i]>>32) == key; i++ {
			docs = append(docs, uint32(pairs[i]))
		}
		if err := wr.add(key, docs); err != nil {
			return err
		}
	}
	return nil
}

// write makes segment lo-hi: a temp file filled by fill, synced, renamed
// into place, the directory synced.
func (s *Set) write(lo, hi uint64, fill func(*writer) error, paths []string, kinds []byte) (*Segment, error) {
	f, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	wr, err := newWriter(f, paths, kinds)
	if err != nil {
		return nil, err
	}
	if err := fill(wr); err != nil {
		return nil, err
	}
	if err := wr.finish(); err != nil {
		return nil, err
	}
	// Once Close returned nothing lands in the directory: its index may
	// be removed, and another made at the same path.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	p := filepath.Join(s.dir, segName(lo, hi))
	if err := os.Rename(f.Name(), p); err != nil {
		return nil, err
	}
	if err := syncDir(s.dir); err != nil {
		os.Remove(p)
		return nil, err
	}
	ok = true
	return newSegment(f, p, lo, hi)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// snapshot is the segments at one time and, computed on first use, each
// one's documents that a newer entry of their path (or a tombstone)
// hides, and its unindexed documents.
type snapshot struct {
	segs  []*Segment
	once  sync.Once
	err   error
	dead  []*roaring.Bitmap
	unidx []*roaring.Bitmap
}

func (s *Set) snapshot() *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.snap == nil {
		s.snap = &snapshot{segs: slices.Clone(s.segs)}
	}
	return s.snap
}

func (sn *snapshot) load() error {
	sn.once.Do(func() {
		seen := map[string]bool{}
		sn.dead = make([]*roaring.Bitmap, len(sn.segs))
		sn.unidx = make([]*roaring.Bitmap, len(sn.segs))
		for i := len(sn.segs) - 1; i >= 0; i-- {
			paths, kinds, err := sn.segs[i].Paths()
			if err != nil {
				sn.err = err
				return
			}
			dead, unidx := roaring.New(), roaring.New()
			for d, p := range paths {
				if seen[p] || kinds[d] == kindTomb {
					dead.Add(uint32(d))
				} else if kinds[d] == KindUnindexed {
					unidx.Add(uint32(d))
				}
				seen[p] = true
			}
			sn.dead[i], sn.unidx[i] = dead, unidx
		}
	})
	return sn.err
}

// result is a set of a segment's documents; all: every one.
type result struct {
	all bool
	bm  *roaring.Bitmap
}

// eval evaluates q in seg, with key mapping a trigram to its key.
func eval(seg *Segment, q *trigram.Query, key func(string) (uint32, bool)) (result, error) {
	switch q.Op {
	case trigram.All:
		return result{all: true}, nil
	case trigram.None:
		return result{bm: roaring.New()}, nil
	}
	and := q.Op == trigram.And
	var acc result
	started := false
	combine := func(r result) {
		switch {
		case !started:
			acc, started = r, true
		case and && r.all, !and && acc.all:
		case and && acc.all, !and && r.all:
			acc = r
		case and:
			acc.bm.And(r.bm)
		default:
			acc.bm.Or(r.bm)
		}
	}
	for _, t := range q.Trigram {
		k, ok := key(t)
		if !ok {
			combine(result{all: true})
			continue
		}
		bm, err := seg.Postings(k)
		if err != nil {
			return result{}, err
		}
		combine(result{bm: bm})
		if and && !acc.all && acc.bm.IsEmpty() {
			return acc, nil
		}
	}
	for _, sub := range q.Sub {
		r, err := eval(seg, sub, key)
		if err != nil {
			return result{}, err
		}
		combine(r)
		if and && !acc.all && acc.bm.IsEmpty() {
			return acc, nil
		}
	}
	if !started {
		return result{all: and, bm: roaring.New()}, nil
	}
	return acc, nil
}

func triKey(t string) (uint32, bool) {
	if len(t) != 3 {
		return 0, false
	}
	return TriKey(t), true
}

func bucketKey(t string) (uint32, bool) {
	if len(t) != 3 {
		return 0, false
	}
	return BucketKey(Bucket(TriKey(t))), true
}

// each calls fn with each segment's live documents among those sel picks.
func (sn *snapshot) each(sel func(i int, seg *Segment) (result, error), fn func(path string)) error {
	if err := sn.load(); err != nil {
		return err
	}
	for i, seg := range sn.segs {
		r, err := sel(i, seg)
		if err != nil {
			return err
		}
		paths, _, _ := seg.Paths()
		bm := r.bm
		if r.all {
			bm = roaring.New()
			bm.AddRange(0, uint64(len(paths)))
		}
		bm.AndNot(sn.dead[i])
		it := bm.Iterator()
		for it.HasNext() {
			fn(paths[it.Next()])
		}
	}
	return nil
}

// Candidates returns the paths of the live documents that may hold a
// match of q: the text documents whose trigrams satisfy it, the binary
// ones whose buckets do, and every unindexed one, in path order.
func (s *Set) Candidates(q *trigram.Query) ([]string, error) {
	var out []string
	sn := s.snapshot()
	err := sn.each(func(i int, seg *Segment) (result, error) {
		tr, err := eval(seg, q, triKey)
		if err != nil || tr.all {
			return tr, err
		}
		br, err := eval(seg, q, bucketKey)
		if err != nil || br.all {
			return br, err
		}
		tr.bm.Or(br.bm)
		tr.bm.Or(sn.unidx[i])
		return tr, nil
	}, func(p string) { out = append(out, p) })
	slices.Sort(out)
	return out, err
}

// WithKey returns the paths of the live documents holding key, in order.
func (s *Set) WithKey(key uint32) ([]string, error) {
	var out []string
	err := s.snapshot().each(func(_ int, seg *Segment) (result, error) {
		bm, err := seg.Postings(key)
		return result{bm: bm}, err
	}, func(p string) { out = append(out, p) })
	slices.Sort(out)
	return out, err
}

// Unindexed returns the paths of the live unindexed documents, in order.
func (s *Set) Unindexed() ([]string, error) {
	var out []string
	sn := s.snapshot()
	err := sn.each(func(i int, _ *Segment) (result, error) {
		return result{bm: sn.unidx[i].Clone()}, nil
	}, func(p string) { out = append(out, p) })
	slices.Sort(out)
	return out, err
}
