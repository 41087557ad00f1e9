package relevance

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
)

// goSrcSet is the benchmark's query set over $(go env GOROOT)/src.
var goSrcSet = filepath.Join("..", "..", "testdata", "relevance", "gosrc.tsv")

// heldOutSet is a second set over the same tree, written after the ranker
// was tuned on goSrcSet by someone who had not seen the ranker: its
// figures say whether goSrcSet's carry over.
var heldOutSet = filepath.Join("..", "..", "testdata", "relevance", "heldout.tsv")

// goSrcSets are the sets over GOROOT/src that the rules below check.
var goSrcSets = []string{goSrcSet, heldOutSet}

// plainStems are the only file stems a query may contain as a word: plain
// English words a developer types anyway (see the set's header).
var plainStems = map[string]bool{"client": true, "escape": true, "stack": true}

// goroot is `go env GOROOT` (runtime.GOROOT names the root the test
// binary was built with, not the toolchain's).
func goroot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

func loadSet(t testing.TB, set string) []Query {
	t.Helper()
	qs, err := LoadSet(set)
	if err != nil {
		t.Fatal(err)
	}
	return qs
}

func loadGoSrcSet(t testing.TB) []Query { return loadSet(t, goSrcSet) }

// TestQuerySetPathsExist: every expected and alternative path of the sets
// is a regular file of this machine's GOROOT/src (the sets were written for
// go1.26; another release may have moved files).
func TestQuerySetPathsExist(t *testing.T) {
	src := filepath.Join(goroot(t), "src")
	for _, set := range goSrcSets {
		for _, q := range loadSet(t, set) {
			for _, p := range q.Want {
				fi, err := os.Stat(filepath.Join(src, p))
				if err != nil || !fi.Mode().IsRegular() {
					t.Errorf("%s line %d %q: %s is not a file of %s: %v", set, q.Line, q.Text, p, src, err)
				}
			}
		}
	}
}

// TestQuerySetRules checks each set's mechanical rules: its size and mix,
// no duplicate, and no query that names its file.
func TestQuerySetRules(t *testing.T) {
	for _, set := range goSrcSets {
		t.Run(filepath.Base(set), func(t *testing.T) { checkSetRules(t, loadSet(t, set)) })
	}
}

// TestHeldOutSetIsFresh: no held-out query repeats a gosrc.tsv query
// (case and spacing aside), so the held-out figures are not the tuned ones.
func TestHeldOutSetIsFresh(t *testing.T) {
	norm := func(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }
	tuned := map[string]int{}
	for _, q := range loadGoSrcSet(t) {
		tuned[norm(q.Text)] = q.Line
	}
	for _, q := range loadSet(t, heldOutSet) {
		if l, ok := tuned[norm(q.Text)]; ok {
			t.Errorf("heldout.tsv line %d: query %q repeats gosrc.tsv line %d", q.Line, q.Text, l)
		}
	}
}

func checkSetRules(t *testing.T, qs []Query) {
	t.Helper()
	if len(qs) < 60 {
		t.Errorf("%d queries, want at least 60", len(qs))
	}
	kinds := map[string]int{}
	seen := map[string]int{}
	for _, q := range qs {
		kinds[q.Kind]++
		key := strings.ToLower(q.Text)
		if l, ok := seen[key]; ok {
			t.Errorf("line %d: query %q repeats line %d", q.Line, q.Text, l)
		}
		seen[key] = q.Line
		for _, p := range q.Want {
			if why := namesFile(q.Text, p); why != "" {
				t.Errorf("line %d: query %q names %s: %s", q.Line, q.Text, p, why)
			}
		}
	}
	for _, k := range []string{"concept", "identifier", "declaration", "non-go"} {
		if kinds[k] < 5 {
			t.Errorf("%d queries of kind %q, want at least 5", kinds[k], k)
		}
	}
	if n := kinds["non-go"]; n*100 < 8*len(qs) {
		t.Errorf("%d non-Go queries of %d, want about a tenth", n, len(qs))
	}
	for _, q := range qs {
		if q.Kind == "non-go" && strings.HasSuffix(q.Want[0], ".go") {
			t.Errorf("line %d: non-go query %q expects the Go file %s", q.Line, q.Text, q.Want[0])
		}
	}
}

// namesFile says how query q names file p literally, or "".
func namesFile(q, p string) string {
	lq := strings.ToLower(q)
	lp := strings.ToLower(p)
	base := path.Base(lp)
	stem := base
	if i := strings.IndexByte(base[1:], '.'); i >= 0 {
		stem = base[:i+1]
	}
	switch {
	case strings.Contains(lq, lp):
		return "its path"
	case strings.Contains(lp, "/") && strings.Contains(lq, path.Dir(lp)) && strings.Contains(path.Dir(lp), "/"):
		return "its directory path"
	case strings.Contains(lq, base):
		return "its file name"
	case strings.ContainsAny(stem, "_-") && strings.Contains(lq, stem):
		return "its stem"
	}
	joined := strings.NewReplacer("_", "", "-", "").Replace(stem)
	for _, w := range strings.FieldsFunc(lq, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		if w == joined && !plainStems[w] {
			return "its stem as a word"
		}
	}
	return ""
}

func TestNamesFile(t *testing.T) {
	for _, c := range []struct {
		q, p string
		bad  bool
	}{
		{"regalloc", "cmd/compile/internal/ssa/regalloc.go", true},
		{"register allocation", "cmd/compile/internal/ssa/regalloc.go", false},
		{"handshake_client", "crypto/tls/handshake_client.go", true},
		{"HandshakeClient", "crypto/tls/handshake_client.go", true},
		{"tls handshake client", "crypto/tls/handshake_client.go", false},
		{"RWMutex RLock", "sync/rwmutex.go", true},
		{"http client timeout", "net/http/client.go", false},
		{"net/http timeout", "net/http/client.go", true},
		{"edit make.bash", "make.bash", true},
		{"how std vendors packages", "README.vendor", false},
		{"the readme", "README.vendor", true},
		{"abi-internal", "cmd/compile/abi-internal.md", true},
	} {
		if got := namesFile(c.q, c.p) != ""; got != c.bad {
			t.Errorf("namesFile(%q, %q) = %v, want %v", c.q, c.p, got, c.bad)
		}
	}
}
