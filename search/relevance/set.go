// Package relevance measures how well `padfs search` ranks: a set of
// queries, each with the file a developer means, is asked of a searcher
// and scored by reciprocal rank, recall at 1 and at k, and latency.
//
// It knows nothing of how the ranker works: a Searcher returns paths best
// first (what `padfs search -k K --json` prints) and a degraded flag per
// hit, nothing more, so the same set measures every ranker.
package relevance

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"
)

// Query is one line of a query set.
type Query struct {
	Text string
	// Want holds the expected path first, then the acceptable
	// alternatives, relative to the corpus root.
	Want []string
	// Kind is the "#kind:" section the query is in (concept, identifier,
	// declaration, non-go), "" before the first.
	Kind string
	Line int
}

// ParseSet reads a query set: QUERY<TAB>EXPECTED[<TAB>ALT,ALT...] per
// line; "#kind: NAME" sets the kind of the lines below it; other lines
// starting with "#" and empty lines are comments.
func ParseSet(r io.Reader) ([]Query, error) {
	var qs []Query
	kind := ""
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if k, ok := strings.CutPrefix(line, "#kind:"); ok {
			kind = strings.TrimSpace(k)
			continue
		}
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("line %d: want QUERY<TAB>PATH[<TAB>ALTERNATIVES], got %d fields", n, len(f))
		}
		q := Query{Text: strings.TrimSpace(f[0]), Want: []string{strings.TrimSpace(f[1])}, Kind: kind, Line: n}
		if len(f) == 3 {
			for _, alt := range strings.Split(f[2], ",") {
				if alt = strings.TrimSpace(alt); alt != "" {
					q.Want = append(q.Want, alt)
				}
			}
		}
		if q.Text == "" || q.Want[0] == "" {
			return nil, fmt.Errorf("line %d: empty query or path", n)
		}
		qs = append(qs, q)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return qs, nil
}

// LoadSet reads the query set in file path.
func LoadSet(path string) ([]Query, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	qs, err := ParseSet(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return qs, nil
}
