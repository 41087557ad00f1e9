package search

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search/query"
	"github.com/padfs/padfs/mvcc"
)

// TestOnlyDocsScoresAsFilter: the second round of a ranked search scores
// the candidates through a conjunction with their ids (onlyDocs), which
// must give every candidate the score the filter it replaced (a boolean
// query filtered by the ids) gave, and the same candidates. Equal to the
// last bit or two: a disjunction of more than 10 terms sums its terms in
// heap order, which advancing can change (at most a tie within 1e-15
// could swap two hits). Real Go sources, real bleve, the rankers' own
// queries.
func TestOnlyDocsScoresAsFilter(t *testing.T) {
	// Scorch, as every session index (bleve's memory-only index is
	// upside_down, which reads what scorch does not: a term's TokenFreq.Term).
	bl, err := bleve.NewUsing(t.TempDir(), indexMapping(), scorch.Name, scorch.Name, scorchConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer bl.Close()
	b := bl.NewBatch()
	ino := mvcc.Ino(1)
	for p, data := range corpus(t) {
		doc, _ := fileDoc(p, ino, data)
		if err := b.IndexAdvanced(doc); err != nil {
			t.Fatal(err)
		}
		ino++
	}
	if err := bl.Batch(b); err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, q := range []rankQuery{
		{Text: "buffered reader", Size: 5},
		{Text: "regexp syntax parse", Size: 10},
		{Text: "func (b *Builder) WriteString", Size: 3},
		{Text: "utf8 rune decode", Size: 8, Prefix: "go/unicode"},
		{Text: "sort stable insertion", Size: 4},
		{Text: "needle", Size: 2},
		{Text: "func (re *Regexp) FindAllStringSubmatchIndex(s string, n int) [][]int", Size: 5},
	} {
		qs := q.bleveQueries()
		first, err := searchAll(context.Background(), bl, qs, func(int) int { return q.Size }, nil)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		var ids []string
		for _, r := range first {
			for _, h := range r.Hits {
				if !seen[h.ID] {
					seen[h.ID] = true
					ids = append(ids, h.ID)
				}
			}
		}
		filtered := make([]query.Query, len(qs))
		for r := range qs {
			bq := query.NewBooleanQuery([]query.Query{qs[r]}, nil, nil)
			bq.AddFilter(query.NewDocIDQuery(ids))
			filtered[r] = bq
		}
		all := func(int) int { return len(ids) }
		want, err := searchAll(context.Background(), bl, filtered, all, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := searchAll(context.Background(), bl, onlyDocs(qs, ids), all, nil)
		if err != nil {
			t.Fatal(err)
		}
		for r := range qs {
			w, g := scoresOf(want[r]), scoresOf(got[r])
			if len(w) != len(g) {
				t.Errorf("%q ranker %d: %d hits by the filter, %d by onlyDocs", q.Text, r, len(w), len(g))
			}
			for id, ws := range w {
				gs, ok := g[id]
				if !ok || math.Abs(gs-ws) > 1e-12*math.Abs(ws) {
					t.Errorf("%q ranker %d, %s: score %v by the filter, %v (found %v) by onlyDocs", q.Text, r, id, ws, gs, ok)
				}
				compared++
			}
		}
	}
	if compared < 50 {
		t.Fatalf("only %d scores compared: the corpus does not exercise the second round", compared)
	}
}

func scoresOf(r *bleve.SearchResult) map[string]float64 {
	m := map[string]float64{}
	for _, h := range r.Hits {
		m[h.ID] = h.Score
	}
	return m
}

// TestSearchCancelled: a search whose context is done stops with the
// context's error (a control-socket client gone, a FUSE interrupt), with
// the index worker (a mount's backend) and with bleve in this process.
func TestSearchCancelled(t *testing.T) {
	for _, bg := range []bool{false, true} {
		st, dir := openStore(t)
		sid := loadSession(t, st, corpus(t))
		ix, err := OpenWith(dir, st, Options{Background: bg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ix.Close() })
		if hits, err := ix.Search(context.Background(), sid, "buffered reader", 5); err != nil || len(hits) == 0 {
			t.Fatalf("background=%v: search: %d hits, %v", bg, len(hits), err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		hits, err := ix.Search(ctx, sid, "buffered reader", 5)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("background=%v: cancelled search: %d hits, err %v; want context.Canceled", bg, len(hits), err)
		}
		hits, err = ix.SearchWith(ctx, sid, "buffered reader", 5, SearchOptions{AsOf: mvcc.HLC(math.MaxInt64)})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("background=%v: cancelled --asof search: %d hits, err %v; want context.Canceled", bg, len(hits), err)
		}
	}
}

// TestLowerASCII: the eight-bytes-at-a-time lowercasing equals the byte
// loop for every byte value, at every offset of a word and in the tail.
func TestLowerASCII(t *testing.T) {
	ref := func(b []byte) []byte {
		out := make([]byte, len(b))
		for i, c := range b {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out[i] = c
		}
		return out
	}
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	// Every value next to every other in some word: a carry between
	// bytes would show.
	for c := range 256 {
		all = append(all, byte(c), byte(255-c), byte(c), 'Z', '@', '[', 'A', 0x80|'A')
	}
	for start := range 9 {
		for end := len(all) - 9; end <= len(all); end++ {
			in := all[start:end]
			if got, want := lowerASCII(in), ref(in); !bytes.Equal(got, want) {
				t.Fatalf("lowerASCII(all[%d:%d]) differs from the byte loop", start, end)
			}
		}
	}
	if got := lowerASCII([]byte("Hello, WORLD! ÀÉ_Zz@[`{")); string(got) != "hello, world! ÀÉ_zz@[`{" {
		t.Errorf("lowerASCII: %q", got)
	}
}

// TestOccurrenceRankersAsBefore: the proximity and comment rankers, from
// the needles' occurrences found once (rankocc.go), score every file as
// the bytes.Index scans they replaced did (refProxScore, refDocScore,
// refIsDeprecated, kept here as they were), for queries of one word, many, overlapping
// needles and non-ASCII ones, over the test corpus (Go sources, odd
// files) and made-up content.
func TestOccurrenceRankersAsBefore(t *testing.T) {
	files := corpus(t)
	files["made/overlap.go"] = []byte("// aaaa aaa baaa a-aa\n/* xaa aa */\nvar aaa = `\naa\n\naab` // aa\n")
	files["made/README"] = []byte("Ünïcode wörds here\n\nand ÜNÏCODE again, über alles\n")
	files["made/old.go"] = []byte("// Deprecated: use New.\nfunc Old() {}\n/** @deprecated */ x\n// @Deprecated: y\n\tdeprecated: z\n// see deprecated:\n@deprecated")
	files["made/x.py"] = []byte("# reader buffer\ndef f():\n    \"\"\"Buffered reader\n    reads\"\"\"\n")
	queries := []string{"needle", "buffered reader", "regexp syntax parse", "aa", "aaa aa", "a-aa",
		"func (b *Builder) WriteString", "utf8 rune decode invalid", "über ünïcode", "sort stable insertion merge",
		"split after separator", "the", "Reader Read bytes buffer", "compile regexp machine onepass backtrack"}
	compared, nonzero := 0, 0
	for _, q := range queries {
		r, err := parseQuery(q, "")
		if err != nil {
			continue // only stop words
		}
		for p, data := range files {
			if isBinary(data) {
				continue
			}
			for _, low := range [][]byte{r.lower(data), bytes.ToLower(data)} {
				o := r.occurrences(low)
				if got, want := proxScore(low, o, r), refProxScore(low, r); got != want {
					t.Errorf("%q %s: proximity %v, was %v", q, p, got, want)
				}
				got, want := docScoreOcc(p, data, low, o, r), refDocScore(p, data, low, r)
				if got != want {
					t.Errorf("%q %s: comments %v, was %v", q, p, got, want)
				}
				for _, decls := range []int{1, 2, 7} {
					if got, want := isDeprecated(low, decls), refIsDeprecated(low, decls); got != want {
						t.Errorf("%s, %d declarations: deprecated %v, was %v", p, decls, got, want)
					}
				}
				compared++
				if want > 0 {
					nonzero++
				}
			}
		}
	}
	if compared < 1000 || nonzero < 100 {
		t.Fatalf("%d files scored, %d with comment scores: the corpus does not exercise the rankers", compared, nonzero)
	}
}

// refProxScore is proxScore as it was: the proximity ranker over lowercased content: the share
// of the query's words found together in one window (squared), and a
// bonus for the whole query as a phrase.
func refProxScore(low []byte, r *rq) float64 {
	type occ struct{ at, word int }
	var occs []occ
	for i, nd := range r.needles {
		b := []byte(nd)
		off, cnt := 0, 0
		for cnt < maxOccurrences {
			j := bytes.Index(low[off:], b)
			if j < 0 {
				break
			}
			occs = append(occs, occ{off + j, i})
			off += j + len(b)
			cnt++
		}
	}
	if len(occs) == 0 {
		return 0
	}
	sort.Slice(occs, func(a, b int) bool { return occs[a].at < occs[b].at })
	in := make([]int, len(r.needles))
	distinct, best := 0, 0
	lo := 0
	for _, o := range occs {
		if in[o.word]++; in[o.word] == 1 {
			distinct++
		}
		for o.at-occs[lo].at > proxWindow {
			if in[occs[lo].word]--; in[occs[lo].word] == 0 {
				distinct--
			}
			lo++
		}
		best = max(best, distinct)
	}
	f := float64(best) / float64(len(r.needles))
	s := 0.8 * f * f
	for _, p := range r.phrases {
		if bytes.Contains(low, p) {
			s += 0.2
			break
		}
	}
	if len(r.phrases) == 0 {
		s = 1 // one word: found
	}
	return s
}

// refDocScore is docScore as it was: the comment ranker (re-rank): the largest share of the
// query's words that one comment block holds, each word at the start of
// a word of the comment (its stem: "goroutines" for goroutine), squared,
// 0.8 of it; and 0.2 for the number of blocks that hold half the words
// or more (at least two), saturated at five: a file about the query
// discusses it in many comments, one that mentions it in one. low is the
// file's content lowercased (the same offsets as data).
func refDocScore(p string, data, low []byte, r *rq) float64 {
	if len(r.needles) == 0 {
		return 0
	}
	if len(low) != len(data) {
		// Lowercasing changed lengths (some non-ASCII letters): fold
		// ASCII only, so that offsets into data hold.
		low = lowerASCII(data)
	}
	best, good := 0, 0
	half := (len(r.needles) + 1) / 2
	commentBlocks(p, data, func(start, end int) {
		lb := low[start:end]
		n := 0
		for _, nd := range r.needles {
			if refHasWordPrefix(lb, []byte(nd)) {
				n++
			}
		}
		best = max(best, n)
		if n >= half && n >= 2 {
			good++
		}
	})
	f := float64(best) / float64(len(r.needles))
	return 0.8*f*f + 0.2*min(1, float64(good)/5)
}

// refHasWordPrefix reports whether nd occurs in b at the start of a word.
func refHasWordPrefix(b, nd []byte) bool {
	off := 0
	for {
		i := bytes.Index(b[off:], nd)
		if i < 0 {
			return false
		}
		at := off + i
		if at == 0 || !isASCIIAlnum(b[at-1]) {
			return true
		}
		off = at + 1
	}
}

// refIsDeprecated is isDeprecated as it was.
func refIsDeprecated(low []byte, decls int) bool {
	if decls == 0 {
		return false
	}
	n := bytes.Count(low, []byte("@deprecated"))
	for off := 0; ; {
		i := bytes.Index(low[off:], []byte("deprecated:"))
		if i < 0 {
			break
		}
		at := off + i
		line := low[bytes.LastIndexByte(low[:at], '\n')+1 : at]
		if len(bytes.Trim(line, " \t/#*")) == 0 {
			n++
		}
		off = at + 1
	}
	return 2*n >= decls
}

// TestKindRankerFilter: the kind ranker keeps to the files of the
// query's kinds by the index's kind field: a Go file in a directory named
// like a kind (bash/, md/) is none of them, a one-letter extension (.s)
// and a prose name (README.vendor) are. It failed before the kind field:
// the paths' words let bash/runner.go and md/runner.go in.
func TestKindRankerFilter(t *testing.T) {
	body := []byte("// run the tests of the tree in order\n")
	ix, _, sid := rankIndex(t, map[string][]byte{
		"bash/runner.go":   append([]byte("package bash\n"), body...),
		"md/runner.go":     append([]byte("package md\n"), body...),
		"tools/run.bash":   append([]byte("#!/bin/bash\n"), body...),
		"doc/tests.md":     body,
		"x/README.vendor":  body,
		"x/run_amd64.s":    body,
		"x/run_amd64.go":   append([]byte("package x\n"), body...),
		"x/runner_test.go": append([]byte("package x\n"), body...),
	})
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"run the tests in order", []string{"doc/tests.md", "tools/run.bash", "x/README.vendor"}}, // no kind named: prose and scripts
		{"bash script to run the tests", []string{"tools/run.bash"}},
		{"run the tests amd64 assembly", []string{"x/run_amd64.s"}},
		{"markdown notes on running tests", []string{"doc/tests.md", "x/README.vendor"}},
	} {
		res, err := ix.be.search(context.Background(), sid, rankQuery{Text: c.q, Size: candidatesPerRanker})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range res {
			if h.scores[rankKind] > 0 {
				got = append(got, h.id)
			}
		}
		sort.Strings(got)
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("%q: the kind ranker found %q, want %q", c.q, got, c.want)
		}
	}
}

// TestRankPooledBuffers: the re-rankers' buffers are pooled (getBuf,
// putBuf) and reused by the next query; concurrent queries, in another
// order, must give every hit, score, line and snippet the first ones did
// one at a time: a buffer returned while in use, or handed to two
// queries, would show as another snippet or score.
func TestRankPooledBuffers(t *testing.T) {
	ix, _, sid := rankIndex(t, corpus(t))
	queries := []string{"buffered reader", "regexp syntax parse", "func (b *Builder) WriteString", "utf8 rune decode",
		"sort stable insertion", "needle", "split after separator", "compile regexp machine onepass", "path clean join", "unicode letter"}
	// One at a time, then concurrently, then one at a time again. The
	// index's background merges can move BM25's statistics, and so every
	// score, between two searches; a round counts only if the searches
	// one at a time before and after it agree.
	sequential := func() map[string][]Hit {
		got := map[string][]Hit{}
		for _, q := range queries {
			hits, err := ix.Search(context.Background(), sid, q, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) == 0 || hits[0].Snippet == "" {
				t.Fatalf("%q: %d hits, first snippet %q", q, len(hits), hits[0].Snippet)
			}
			got[q] = hits
		}
		return got
	}
	var errs []error
	for attempt := 0; ; attempt++ {
		want := sequential()
		errs = concurrentSearches(ix, sid, queries, want)
		if reflect.DeepEqual(sequential(), want) {
			break
		}
		if attempt == 9 {
			t.Fatal("the hits of searches one at a time changed in each of 10 attempts")
		}
		t.Logf("attempt %d: the searches one at a time changed meanwhile (the index moved); again", attempt)
	}
	for _, err := range errs {
		t.Error(err)
	}
	for _, n := range []int{0, 1, 4096, 4097, 1 << 20} {
		b := getBuf(n)
		if len(b) != n || cap(b) < n {
			t.Errorf("getBuf(%d): len %d cap %d", n, len(b), cap(b))
		}
		putBuf(b)
	}
	if b := getBuf(1<<20 + 1); cap(b) != 1<<20+1 {
		t.Errorf("getBuf beyond the classes: cap %d", cap(b))
	}
}

// concurrentSearches runs the queries three times over, concurrently and
// in reverse order, and returns how their hits differ from want.
func concurrentSearches(ix *Index, sid mvcc.SessionID, queries []string, want map[string][]Hit) []error {
	errs := make(chan error, len(queries)*3)
	var wg sync.WaitGroup
	for round := range 3 {
		for i := range queries {
			q := queries[len(queries)-1-i]
			wg.Add(1)
			go func() {
				defer wg.Done()
				hits, err := ix.Search(context.Background(), sid, q, 10)
				if err != nil {
					errs <- err
					return
				}
				if !reflect.DeepEqual(hits, want[q]) {
					errs <- fmt.Errorf("round %d %q: hits %q differ from the first search's %q", round, q, paths(hits), paths(want[q]))
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}
