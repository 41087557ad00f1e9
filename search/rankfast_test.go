package search

import (
	"context"
	"errors"
	"math"
	"testing"

	"github.com/blevesearch/bleve/v2"
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
	bl, err := bleve.NewMemOnly(indexMapping())
	if err != nil {
		t.Fatal(err)
	}
	defer bl.Close()
	b := bl.NewBatch()
	ino := mvcc.Ino(1)
	for p, data := range corpus(t) {
		if err := b.IndexAdvanced(fileDoc(p, ino, data)); err != nil {
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
