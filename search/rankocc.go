package search

import (
	"bytes"
	"slices"
	"sort"
	"sync"
)

// The re-rankers find the query's words in each candidate's lowercased
// content: the proximity ranker all of them, the comment ranker those in
// each comment block. occurrences finds them once per word (a third of a
// query's CPU was bytes.Index over the same megabyte, once per word for
// the proximity ranker and once per word and block for the comment one).

// occs are the offsets of each of the query's needles in a file's
// lowercased content, overlapping ones included (ascending): all[i] for
// needle i, and ws[i] those that start a word.
type occs struct {
	all, ws [][]int
	none    bool // no needle occurs
}

// occurrences finds every needle of r in low.
func (r *rq) occurrences(low []byte) *occs {
	o := &occs{all: make([][]int, len(r.needles)), ws: make([][]int, len(r.needles)), none: true}
	for i, nd := range r.needles {
		b := []byte(nd)
		rare := rarestByte(b)
		for off := 0; ; {
			j := indexFrom(low, b, off, rare)
			if j < 0 {
				break
			}
			o.all[i] = append(o.all[i], j)
			if j == 0 || !isASCIIAlnum(low[j-1]) {
				o.ws[i] = append(o.ws[i], j)
			}
			off = j + 1
		}
		o.none = o.none && len(o.all[i]) == 0
	}
	return o
}

// inBlock reports whether needle i (n bytes long) occurs in
// low[start:end] at the start of a word there: at start, or after a byte
// that is not a letter or digit (hasWordPrefix of the block).
func (o *occs) inBlock(i, n, start, end int) bool {
	all := o.all[i]
	if _, ok := slices.BinarySearch(all, start); ok && start+n <= end {
		return true
	}
	ws := o.ws[i]
	j, _ := slices.BinarySearch(ws, start)
	return j < len(ws) && ws[j]+n <= end
}

// nonOverlapping are the offsets bytes.Index finds stepping past each
// match (what the proximity ranker counts), at most max of them.
func nonOverlapping(all []int, n, max int) []int {
	var out []int
	next := 0
	for _, at := range all {
		if len(out) == max {
			break
		}
		if at >= next {
			out = append(out, at)
			next = at + n
		}
	}
	return out
}

// indexFrom is the offset of the first occurrence of nd in s at or after
// off (-1: none), found by looking for nd's rarest byte, nd[rare], in
// code: bytes.Index looks for its first byte, often a common letter, and
// tries each, which made it the ranking's hottest loop.
func indexFrom(s, nd []byte, off, rare int) int {
	if len(nd) == 0 {
		return -1
	}
	c := nd[rare]
	for off+len(nd) <= len(s) {
		j := bytes.IndexByte(s[off+rare:len(s)-len(nd)+rare+1], c)
		if j < 0 {
			return -1
		}
		at := off + j
		if bytes.Equal(s[at:at+len(nd)], nd) {
			return at
		}
		off = at + 1
	}
	return -1
}

// rarestByte is the index of nd's byte least frequent in code
// (byteFreqOrder), the first of equals.
func rarestByte(nd []byte) int {
	best := 0
	for i := range nd {
		if byteRank[nd[i]] > byteRank[nd[best]] {
			best = i
		}
	}
	return best
}

// byteFreqOrder is the bytes of Go's src tree (.go, .s and .md files,
// lowercased) from the most frequent on; bytes not listed are rarer.
const byteFreqOrder = " et\tran0si\nox,clfdpum1/.()gb2:hv\"=4y_36{}8\\kw597[]*-qz!+&<;%|j>'$`#^?@~"

// byteRank is each byte's place in byteFreqOrder (higher: rarer).
var byteRank = func() (r [256]byte) {
	for i := range r {
		r[i] = 255
	}
	for i := range len(byteFreqOrder) {
		r[byteFreqOrder[i]] = byte(i)
	}
	return r
}()

// proxScore is the proximity ranker over lowercased content low, given
// the needles' occurrences in it: the share of the query's words found
// together in one window (squared), and a bonus for the whole query as a
// phrase.
func proxScore(low []byte, o *occs, r *rq) float64 {
	type occ struct{ at, word int }
	var list []occ
	for i, nd := range r.needles {
		for _, at := range nonOverlapping(o.all[i], len(nd), maxOccurrences) {
			list = append(list, occ{at, i})
		}
	}
	if len(list) == 0 {
		return 0
	}
	// The window's best count does not depend on the order of equal
	// offsets.
	sort.Slice(list, func(a, b int) bool { return list[a].at < list[b].at })
	in := make([]int, len(r.needles))
	distinct, best := 0, 0
	lo := 0
	for _, oc := range list {
		if in[oc.word]++; in[oc.word] == 1 {
			distinct++
		}
		for oc.at-list[lo].at > proxWindow {
			if in[list[lo].word]--; in[list[lo].word] == 0 {
				distinct--
			}
			lo++
		}
		best = max(best, distinct)
	}
	f := float64(best) / float64(len(r.needles))
	s := 0.8 * f * f
	for _, p := range r.phrases {
		if indexFrom(low, p, 0, rarestByte(p)) >= 0 {
			s += 0.2
			break
		}
	}
	if len(r.phrases) == 0 {
		s = 1 // one word: found
	}
	return s
}

// bufs pool the re-rankers' buffers (a file's content and its lowercased
// copy) by size class, powers of two from 4 KiB to MaxTextSize: a query
// reads and lowercases about a megabyte, which allocated afresh each time
// made the mount's process collect garbage for it.
var bufs [bufClasses]sync.Pool

const (
	minBufShift = 12
	bufClasses  = 20 - minBufShift + 1 // up to 1 MiB, MaxTextSize
)

// bufClass is the class of a buffer of n bytes (-1: none).
func bufClass(n int) int {
	for c := range bufClasses {
		if n <= 1<<(c+minBufShift) {
			return c
		}
	}
	return -1
}

// getBuf returns a buffer of n bytes, pooled if n is in a class.
func getBuf(n int) []byte {
	c := bufClass(n)
	if c < 0 {
		return make([]byte, n)
	}
	if p, ok := bufs[c].Get().(*[]byte); ok {
		return (*p)[:n]
	}
	return make([]byte, n, 1<<(c+minBufShift))
}

// putBuf returns b to its pool, if getBuf made it (any other buffer is
// left to the garbage collector).
func putBuf(b []byte) {
	c := bufClass(cap(b))
	if c < 0 || cap(b) != 1<<(c+minBufShift) {
		return
	}
	b = b[:0]
	bufs[c].Put(&b)
}
