package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
)

// TestSearchExplainPathAsOf: --explain prints each ranker's part under
// every hit, --json carries the same, --path restricts, --asof ranks a
// past state by reading it.
func TestSearchExplainPathAsOf(t *testing.T) {
	dir, sid := grepTestData(t, retryTree(t))
	base := []string{"--data", dir, "--session", sid}
	search := func(args ...string) (string, string, int) {
		return runPadfs(t, append(append([]string{"search"}, base...), args...)...)
	}
	if out, errs, code := runPadfs(t, append([]string{"reindex"}, base...)...); code != 0 {
		t.Fatalf("reindex: %q %q exit %d", out, errs, code)
	}

	out, errs, code := search("--explain", "retry")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 4 {
		t.Fatalf("search --explain: %q %q exit %d, want two hits of two lines", out, errs, code)
	}
	if !strings.Contains(lines[0], "  src/util.go:3: // retry with") {
		t.Errorf("first hit %q, want the declaration in src/util.go", lines[0])
	}
	for _, l := range []string{lines[1], lines[3]} {
		for _, r := range []string{"text ", "decl ", "path ", "prox ", "def ", "doc "} {
			if !strings.HasPrefix(l, "         ") || !strings.Contains(l, r) {
				t.Errorf("explain line %q lacks %q", l, r)
			}
		}
	}
	if !regexp.MustCompile(`def [0-9.]+ \(raw 1\.000 #1,`).MatchString(lines[1]) {
		t.Errorf("the declaring file's explanation %q: want def's full raw score, first", lines[1])
	}

	out, _, code = search("--json", "retry")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("search --json: %q exit %d", out, code)
	}
	var h struct {
		Path    string  `json:"path"`
		Score   float64 `json:"score"`
		Explain []struct {
			Ranker string  `json:"ranker"`
			Raw    float64 `json:"raw"`
			Rank   int     `json:"rank"`
			Weight float64 `json:"weight"`
			Score  float64 `json:"score"`
		} `json:"explain"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &h); err != nil {
		t.Fatalf("search --json: %v: %q", err, lines[0])
	}
	var sum float64
	var names []string
	for _, c := range h.Explain {
		sum += c.Score
		names = append(names, c.Ranker)
	}
	if h.Path != "src/util.go" || strings.Join(names, ",") != "text,decl,path,prox,def,doc" || sum < h.Score-1e-6 || sum > h.Score+1e-6 {
		t.Errorf("search --json: %+v", h)
	}

	out, _, code = search("--path", "src/main.go", "retry")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.Contains(out, "src/main.go:3:") {
		t.Errorf("search --path src/main.go: %q exit %d", out, code)
	}
	if out, _, code := search("--path", "nowhere", "retry"); code != 1 || out != "" {
		t.Errorf("search --path nowhere: %q exit %d, want nothing, exit 1", out, code)
	}

	// A checkpoint, then a change the index has not seen.
	if out, errs, code := runPadfs(t, "checkpoint", "--data", dir, "--session", sid, "before"); code != 0 {
		t.Fatalf("checkpoint: %q %q exit %d", out, errs, code)
	}
	st, err := storeopen.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	id, err := mvcc.ParseSessionID(sid)
	if err != nil {
		t.Fatal(err)
	}
	n, err := st.Walk(id, "src/util.go", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteContent(context.Background(), id, n.Ino, strings.NewReader("package main\n"), 0); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if out, _, code := search("exponential"); code != 1 {
		t.Errorf("search now: %q exit %d, want nothing, exit 1", out, code)
	}
	out, errs, code = search("--asof", "before", "exponential")
	if code != 0 || !strings.Contains(out, "src/util.go:3: // retry with exponential backoff") || strings.Count(out, "\n") != 1 {
		t.Errorf("search --asof before: %q %q exit %d", out, errs, code)
	}
	if _, errs, code := search("--asof", "no-such-checkpoint", "retry"); code == 0 || !strings.Contains(errs, "--asof") {
		t.Errorf("search --asof with a bad point in time: %q exit %d", errs, code)
	}
}
