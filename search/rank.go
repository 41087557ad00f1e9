package search

import (
	"bytes"
	"errors"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/padfs/padfs/mvcc"
)

// Hit is one result of a ranked search.
type Hit struct {
	Path    string  `json:"path"`
	Score   float64 `json:"score"`
	Line    int     `json:"line,omitempty"`
	Snippet string  `json:"snippet"`
	// Degraded: the file changed after the index last saw it; its score is
	// the index's older view (or an estimate for a file it has not seen).
	Degraded bool `json:"degraded"`
}

// Search returns up to k files of session sid ranked by BM25 relevance to
// the words of q, each with a snippet from its current content. Files the
// index has not caught up with are still found (by reading them) and
// marked Degraded.
func (ix *Index) Search(sid mvcc.SessionID, q string, k int) ([]Hit, error) {
	if k <= 0 {
		k = 10
	}
	terms := queryTerms(q)
	if len(terms) == 0 {
		return nil, errors.New("empty query")
	}
	var lastSeq uint64
	var at mvcc.HLC
	if err := ix.st.View(func(t *mvcc.ReadTx) error {
		if _, err := t.Header(sid); err != nil {
			return err
		}
		var err error
		lastSeq, at, err = t.LastEvent(sid)
		return err
	}); err != nil {
		return nil, err
	}
	// Without a usable index (worker down, damaged index) every file is
	// read and scored roughly: degraded, not failed.
	pos, err := ix.be.position(sid)
	seq := pos.Seq
	if err != nil {
		ix.log.Warn("search: index unusable; scoring by reading files", "session", sid.String(), "err", err)
		seq = 0
	}
	ch := newChanges()
	if seq < lastSeq {
		if seq == 0 {
			ch.full = true
		} else if err := ix.st.View(func(t *mvcc.ReadTx) error {
			return t.Events(sid, seq, func(ev mvcc.Event) bool { ch.add(ev); return !ch.full })
		}); err != nil {
			return nil, err
		}
	}
	var hits []Hit
	seen := map[string]bool{}
	if seq > 0 {
		res, err := ix.be.search(sid, q, 4*k+16)
		if err != nil {
			ix.log.Warn("search: index unusable; scoring by reading files", "session", sid.String(), "err", err)
			ch.full = true
			res = nil
		}
		for _, h := range res {
			n, err := ix.st.Walk(sid, h.id, at)
			if err != nil || !n.IsRegular() {
				continue // gone since
			}
			data, err := ix.st.ReadAll(n)
			if err != nil {
				return nil, err
			}
			line, snip := snippet(data, terms)
			hits = append(hits, Hit{Path: h.id, Score: h.score, Line: line, Snippet: snip, Degraded: ch.affects(h.id)})
			seen[h.id] = true
		}
	}
	// Files the index has not seen yet: read them, keep those with a query
	// word, score them by term frequency (marked degraded).
	if ch.full || len(ch.paths) > 0 || len(ch.subtrees) > 0 || len(ch.inos) > 0 {
		var files []fileRef
		if ch.full {
			if err := ix.walk(sid, "", at, func(f fileRef) { files = append(files, f) }); err != nil {
				return nil, err
			}
		} else {
			for p := range ch.paths {
				if n, err := ix.st.Walk(sid, p, at); err == nil && n.IsRegular() {
					files = append(files, fileRef{p, n})
				}
			}
			for p := range ch.subtrees {
				_ = ix.walk(sid, p, at, func(f fileRef) { files = append(files, f) })
			}
		}
		for _, f := range files {
			if seen[f.path] || f.n.Size > MaxTextSize {
				continue
			}
			seen[f.path] = true
			data, err := ix.st.ReadAll(f.n)
			if err != nil {
				return nil, err
			}
			if isBinary(data) {
				continue
			}
			score := roughScore(data, terms)
			if score == 0 {
				continue
			}
			line, snip := snippet(data, terms)
			hits = append(hits, Hit{Path: f.path, Score: score, Line: line, Snippet: snip, Degraded: true})
		}
	}
	sort.SliceStable(hits, func(i, j int) bool { return hits[i].Score > hits[j].Score })
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

// queryTerms lowercases the words of q (letters and digits), as the
// standard analyzer sees them.
func queryTerms(q string) []string {
	return strings.FieldsFunc(strings.ToLower(q), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

func roughScore(data []byte, terms []string) float64 {
	low := bytes.ToLower(data)
	var s float64
	for _, t := range terms {
		if c := bytes.Count(low, []byte(t)); c > 0 {
			s += 1 + float64(c)/(float64(c)+1.2)
		}
	}
	return s
}

// snippet picks the line with the most distinct query words (then the
// most occurrences) and returns its number and text, trimmed.
func snippet(data []byte, terms []string) (int, string) {
	bestLine, bestScore, bestNum := []byte(nil), 0, 0
	num := 0
	for len(data) > 0 {
		num++
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		low := bytes.ToLower(line)
		score := 0
		for _, t := range terms {
			if c := bytes.Count(low, []byte(t)); c > 0 {
				score += 1000 + c
			}
		}
		if score > bestScore {
			bestLine, bestScore, bestNum = line, score, num
		}
	}
	if bestLine == nil {
		return 0, ""
	}
	s := strings.TrimSpace(string(bytes.ToValidUTF8(bestLine, []byte("\uFFFD"))))
	if len(s) > 160 {
		cut := 160
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return bestNum, s
}
