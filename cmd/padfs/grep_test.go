package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/internal/testtrees"
	"github.com/padfs/padfs/mvcc"
)

// grepTestData makes a data directory with one session holding files.
// retryTree is testdata/trees/retry: a.txt and a Go package in src/.
func retryTree(t *testing.T) map[string]string {
	t.Helper()
	files, err := testtrees.Files("retry")
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func grepTestData(t *testing.T, files map[string]string) (dir, sid string) {
	t.Helper()
	dir = t.TempDir()
	st, err := storeopen.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h, err := st.CreateSession("grep", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	dirs := map[string]mvcc.Ino{"": h.Root}
	for _, p := range []string{"a.txt", "src/main.go", "src/util.go"} {
		data, ok := files[p]
		if !ok {
			continue
		}
		parent := ""
		name := p
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			parent, name = p[:i], p[i+1:]
			if _, ok := dirs[parent]; !ok {
				n, err := st.Create(h.ID, h.Root, parent, mvcc.Attr{Mode: syscall.S_IFDIR | 0o755}, "")
				if err != nil {
					t.Fatal(err)
				}
				dirs[parent] = n.Ino
			}
		}
		n, err := st.Create(h.ID, dirs[parent], name, mvcc.Attr{Mode: syscall.S_IFREG | 0o644}, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.WriteContent(context.Background(), h.ID, n.Ino, strings.NewReader(data), 0); err != nil {
			t.Fatal(err)
		}
	}
	return dir, h.ID.String()
}

func runPadfs(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), args, strings.NewReader(""), &out, &errb)
	return out.String(), errb.String(), code
}

// TestGrepSearchReindexCommands runs the three commands with the store
// opened by the command itself (no mount).
func TestGrepSearchReindexCommands(t *testing.T) {
	dir, sid := grepTestData(t, retryTree(t))
	base := []string{"--data", dir, "--session", sid}
	g := func(args ...string) (string, string, int) {
		return runPadfs(t, append(append([]string{"grep"}, base...), args...)...)
	}
	// No index yet: a scan, same answer.
	if out, _, code := g("-rn", "needle"); out != "a.txt:1:alpha needle\n" || code != 0 {
		t.Errorf("grep needle: %q exit %d", out, code)
	}
	if out, errs, code := runPadfs(t, append([]string{"reindex"}, base...)...); code != 0 || !strings.Contains(out, "reindexed session") {
		t.Fatalf("reindex: %q %q exit %d", out, errs, code)
	}
	for _, c := range []struct {
		args []string
		out  string
		code int
	}{
		{[]string{"-rn", "retry"}, "src/main.go:3:func main() { retry(backoff) }\nsrc/util.go:3:// retry with exponential backoff and retry again\nsrc/util.go:4:func retry(f func()) {}\n", 0},
		{[]string{"-c", "retry", "src"}, "src/main.go:1\nsrc/util.go:2\n", 0},
		{[]string{"-l", "-i", "RETRY"}, "src/main.go\nsrc/util.go\n", 0},
		{[]string{"-w", "main"}, "src/main.go:package main\nsrc/main.go:func main() { retry(backoff) }\nsrc/util.go:package main\n", 0},
		{[]string{"-on", "retry", "src/util.go"}, "3:retry\n3:retry\n4:retry\n", 0},
		{[]string{"-n", "-A1", "-m1", "retry", "src/util.go"}, "3:// retry with exponential backoff and retry again\n4-func retry(f func()) {}\n", 0},
		{[]string{"--color=auto", "needle"}, "a.txt:alpha needle\n", 0}, // not a terminal
		{[]string{"--color=always", "needle", "a.txt"}, "alpha \x1b[01;31m\x1b[Kneedle\x1b[m\x1b[K\n", 0},
		{[]string{"-P", `func \w+\(f`, "src"}, "src/util.go:func retry(f func()) {}\n", 0},
		{[]string{"-P", `re(?=try)`}, "", 2},
		{[]string{"nothing-like-this"}, "", 1},
		{[]string{"-E", `(a)\1`}, "", 2},
		{[]string{"x", "no/such/path"}, "", 2},
	} {
		out, errs, code := g(c.args...)
		if out != c.out || code != c.code {
			t.Errorf("grep %q: %q (stderr %q) exit %d, want %q exit %d", c.args, out, errs, code, c.out, c.code)
		}
		if c.code == 2 && errs == "" {
			t.Errorf("grep %q: exit 2 without a message", c.args)
		}
	}
	_, errs, _ := g("-E", `(a)\1`)
	if !strings.Contains(errs, "back-reference") {
		t.Errorf("back-reference error does not name the construct: %q", errs)
	}
	if _, errs, _ := g("-P", `re(?=try)`); !strings.Contains(errs, "look-ahead") {
		t.Errorf("-P look-ahead error does not name the construct: %q", errs)
	}
	out, _, code := runPadfs(t, append(append([]string{"search"}, base...), "--json", "-k", "2", "retry", "backoff")...)
	if code != 0 {
		t.Fatalf("search: exit %d", code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first struct {
		Path     string  `json:"path"`
		Score    float64 `json:"score"`
		Snippet  string  `json:"snippet"`
		Degraded bool    `json:"degraded"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("search --json: %v: %q", err, out)
	}
	if len(lines) != 2 || !strings.HasPrefix(first.Path, "src/") || first.Score <= 0 || !strings.Contains(first.Snippet, "retry") || first.Degraded {
		t.Errorf("search: %q", out)
	}
	if _, _, code := runPadfs(t, append(append([]string{"search"}, base...), "zebra")...); code != 1 {
		t.Errorf("search with no hit: exit %d, want 1", code)
	}
}
