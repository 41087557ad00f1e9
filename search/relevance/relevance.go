package relevance

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Hit is one result of a search: its path relative to the corpus root
// (a leading "/" is ignored) and whether the index had caught up with it.
type Hit struct {
	Path     string
	Degraded bool
}

// Searcher answers query q with at most k hits, best first.
type Searcher func(q string, k int) ([]Hit, error)

// Result is one query's outcome.
type Result struct {
	Query Query
	// Rank is the 1-based rank of the first hit that is an acceptable
	// path; 0 when none is in the first k.
	Rank    int
	Hits    []Hit
	Latency []time.Duration // one per round
	Err     error
}

// Report is the outcome of a run over a query set.
type Report struct {
	K       int
	Rounds  int
	Results []Result
}

// Run asks every query of qs of search with k hits, rounds times (the
// ranking is taken from the first round; later rounds only add latency
// samples, so a cache warmed by round one shows in the median).
func Run(qs []Query, k, rounds int, search Searcher) *Report {
	rounds = max(rounds, 1)
	rep := &Report{K: k, Rounds: rounds, Results: make([]Result, len(qs))}
	for i, q := range qs {
		rep.Results[i].Query = q
	}
	for r := 0; r < rounds; r++ {
		for i := range rep.Results {
			res := &rep.Results[i]
			start := time.Now()
			hits, err := search(res.Query.Text, k)
			res.Latency = append(res.Latency, time.Since(start))
			if r > 0 {
				continue
			}
			res.Hits, res.Err = hits, err
			res.Rank = rankOf(hits, res.Query.Want, k)
		}
	}
	return rep
}

// rankOf is the 1-based rank of the first hit among the first k whose
// path is one of want, 0 if none.
func rankOf(hits []Hit, want []string, k int) int {
	for i, h := range hits {
		if i >= k {
			break
		}
		if slices.Contains(want, cleanPath(h.Path)) {
			return i + 1
		}
	}
	return 0
}

func cleanPath(p string) string { return strings.TrimPrefix(p, "/") }

// Metrics summarizes a set of results.
type Metrics struct {
	Queries  int
	MRR      float64 // mean reciprocal rank at K (0 for a miss)
	Top1     float64 // share of queries whose file came first
	TopK     float64 // share of queries whose file is in the first K
	Median   time.Duration
	P95      time.Duration
	Errors   int // queries that failed
	Degraded int // hits marked degraded
}

// Metrics computes the metrics over the results whose kind is kind, or
// all of them for "".
func (rep *Report) Metrics(kind string) Metrics {
	var m Metrics
	var lat []time.Duration
	for _, res := range rep.Results {
		if kind != "" && res.Query.Kind != kind {
			continue
		}
		m.Queries++
		lat = append(lat, res.Latency...)
		if res.Err != nil {
			m.Errors++
		}
		for _, h := range res.Hits {
			if h.Degraded {
				m.Degraded++
			}
		}
		if res.Rank > 0 {
			m.MRR += 1 / float64(res.Rank)
			m.TopK++
			if res.Rank == 1 {
				m.Top1++
			}
		}
	}
	if m.Queries > 0 {
		n := float64(m.Queries)
		m.MRR, m.Top1, m.TopK = m.MRR/n, m.Top1/n, m.TopK/n
	}
	m.Median, m.P95 = percentile(lat, 50), percentile(lat, 95)
	return m
}

// percentile is the nearest-rank p-th percentile of ds.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Kinds lists the query kinds in the order they first appear.
func (rep *Report) Kinds() []string {
	var ks []string
	for _, res := range rep.Results {
		if k := res.Query.Kind; k != "" && !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	return ks
}

// WriteTable prints one line per query: its rank ('-' for a miss), the
// first hit, and the query.
func (rep *Report) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "%4s  %-11s  %-50s  %s\n", "rank", "kind", "query", "first hit (expected, if not first)")
	for _, res := range rep.Results {
		rank := "-"
		if res.Rank > 0 {
			rank = fmt.Sprint(res.Rank)
		}
		first := "(none)"
		if len(res.Hits) > 0 {
			first = cleanPath(res.Hits[0].Path)
			if res.Hits[0].Degraded {
				first += " (degraded)"
			}
		}
		if res.Err != nil {
			first = "error: " + res.Err.Error()
		}
		if res.Rank != 1 {
			first += "  (want " + res.Query.Want[0] + ")"
		}
		fmt.Fprintf(w, "%4s  %-11s  %-50s  %s\n", rank, res.Query.Kind, res.Query.Text, first)
	}
}

// WriteSummary prints the metrics over all queries and per kind.
func (rep *Report) WriteSummary(w io.Writer) {
	line := func(name string, m Metrics) {
		fmt.Fprintf(w, "%-12s %4d queries  MRR@%d %.3f  top-1 %.3f  top-%d %.3f  latency median %v p95 %v",
			name, m.Queries, rep.K, m.MRR, m.Top1, rep.K, m.TopK, m.Median.Round(10*time.Microsecond), m.P95.Round(10*time.Microsecond))
		if m.Errors > 0 {
			fmt.Fprintf(w, "  errors %d", m.Errors)
		}
		if m.Degraded > 0 {
			fmt.Fprintf(w, "  degraded hits %d", m.Degraded)
		}
		fmt.Fprintln(w)
	}
	line("all", rep.Metrics(""))
	for _, k := range rep.Kinds() {
		line(k, rep.Metrics(k))
	}
}
