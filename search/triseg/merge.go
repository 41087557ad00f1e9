package triseg

import (
	"errors"
	"os"
	"slices"
	"time"
)

// Merging keeps the segment count bounded, LSM style: above MaxSegments,
// the newest segments that together are at least as large as the one
// before them (at least the two newest) are merged into one, so sizes
// grow from newest to oldest and a byte is rewritten about log(n) times.
// A merge streams the inputs' sorted dictionaries key by key (a k-way
// merge), decoding only postings; it holds the dictionaries, not the
// postings, in memory. Only segments older than every batch still being
// written take part, so that the merged range holds no gap.

// maybeMergeLocked starts a background merge if one is due (s.mu held).
func (s *Set) maybeMergeLocked() {
	if s.merging || s.closed || len(s.segs) <= s.MaxSegments {
		return
	}
	s.merging = true
	s.mergeWG.Add(1)
	go func() {
		defer s.mergeWG.Done()
		for {
			merged, err := s.mergeOnce()
			s.mu.Lock()
			// Nothing to merge (the newest are being written): the next
			// Add starts again.
			again := merged && err == nil && !s.closed && len(s.segs) > s.MaxSegments
			if !again {
				s.merging = false
			}
			s.mu.Unlock()
			if err != nil && !errors.Is(err, errClosed) && s.mergeErr != nil {
				s.mergeErr(err)
			}
			if !again {
				return
			}
		}
	}()
}

// pick chooses the run to merge: indexes [i, j) of segs.
func pick(segs []*Segment, pending map[uint64]bool) (i, j int) {
	j = len(segs)
	for p := range pending {
		for j > 0 && segs[j-1].Hi >= p {
			j--
		}
	}
	if j < 2 {
		return 0, 0
	}
	i = j - 2
	sum := segs[j-1].Size() + segs[j-2].Size()
	for i > 0 && segs[i-1].Size() <= sum {
		i--
		sum += segs[i].Size()
	}
	return i, j
}

// mergeOnce merges one run, if any.
func (s *Set) mergeOnce() (bool, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, errClosed
	}
	i, j := pick(s.segs, s.pending)
	run := slices.Clone(s.segs[i:j])
	oldest := i == 0
	s.mu.Unlock()
	if len(run) < 2 {
		return false, nil
	}
	seg, err := s.merge(run, oldest)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	k := slices.Index(s.segs, run[0])
	if s.closed || k < 0 || len(s.segs) < k+len(run) || !slices.Equal(s.segs[k:k+len(run)], run) {
		s.mu.Unlock()
		seg.Close()
		os.Remove(seg.name) // closed meanwhile (only merges replace segments)
		return false, errClosed
	}
	s.segs = slices.Replace(s.segs, k, k+len(run), seg)
	s.snap = nil
	// The inputs' files stay open a while for queries on older snapshots
	// (one still reading then fails, not with ErrCorrupt, and grep reads
	// every file instead); Close closes them at once.
	for _, g := range run {
		s.retired[g] = true
	}
	s.mu.Unlock()
	for _, g := range run {
		os.Remove(g.name)
	}
	time.AfterFunc(retireAfter, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, g := range run {
			if s.retired[g] {
				delete(s.retired, g)
				g.Close()
			}
		}
	})
	return true, nil
}

// retireAfter is how long a merged segment's file stays open.
const retireAfter = time.Minute

// merge writes the segment that replaces run (oldest: it starts the set,
// so its tombstones hide nothing and go).
func (s *Set) merge(run []*Segment, oldest bool) (*Segment, error) {
	keep, paths, kinds, err := mergedDocs(run, oldest)
	if err != nil {
		return nil, err
	}
	fill := func(wr *writer) error { return s.mergePostings(wr, run, keep) }
	return s.write(run[0].Lo, run[len(run)-1].Hi, fill, paths, kinds)
}

// mergedDocs numbers the documents of the merged segment: the newest
// entry of each path wins, numbered in the inputs' order so that a
// posting list's remapped documents stay increasing. keep[r][d] is input
// r's document d's new number, or -1 if it goes.
func mergedDocs(run []*Segment, oldest bool) (keep [][]int32, paths []string, kinds []byte, err error) {
	keep = make([][]int32, len(run))
	seen := map[string]bool{}
	var total int
	for r := len(run) - 1; r >= 0; r-- {
		paths, kinds, err := run[r].Paths()
		if err != nil {
			return nil, nil, nil, err
		}
		keep[r] = make([]int32, len(paths))
		for d, p := range paths {
			keep[r][d] = -1
			if !seen[p] && (kinds[d] != kindTomb || !oldest) {
				keep[r][d] = 0
				total++
			}
			seen[p] = true
		}
	}
	paths = make([]string, 0, total)
	kinds = make([]byte, 0, total)
	for r, g := range run {
		ps, ks, _ := g.Paths() // read above
		for d := range ps {
			if keep[r][d] == 0 {
				keep[r][d] = int32(len(paths))
				paths = append(paths, ps[d])
				kinds = append(kinds, ks[d])
			}
		}
	}
	return keep, paths, kinds, nil
}

// mergePostings writes the union of run's posting lists, key by key in
// order, with the documents renumbered by keep; it stops when the set
// closes.
func (s *Set) mergePostings(wr *writer, run []*Segment, keep [][]int32) error {
	its := make([]*keyIter, len(run))
	live := make([]bool, len(run))
	for r, g := range run {
		its[r] = &keyIter{s: g}
		live[r] = its[r].next()
	}
	var out []uint32
	for n := 0; ; n++ {
		if n%1024 == 0 {
			select {
			case <-s.stop:
				return errClosed
			default:
			}
		}
		var key uint32
		found := false
		for r, it := range its {
			if live[r] && (!found || it.key < key) {
				key, found = it.key, true
			}
		}
		if !found {
			return nil
		}
		out = out[:0]
		for r, it := range its {
			if !live[r] || it.key != key {
				continue
			}
			docs, err := it.docs()
			if err != nil {
				return err
			}
			for _, d := range docs {
				if nd := keep[r][d]; nd >= 0 {
					out = append(out, uint32(nd))
				}
			}
			live[r] = it.next()
		}
		if len(out) > 0 {
			if err := wr.add(key, out); err != nil {
				return err
			}
		}
	}
}
