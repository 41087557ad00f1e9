package session

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzUnifiedEqualsGNUDiff: for any two texts, Unified never panics, its
// hunks turn a into b (patch(1) applies them), and it changes as few lines
// as GNU diff -u: the same count of - and + lines. Where several diffs are
// that short, GNU's and padfs's may pick different lines.
//
//	go test ./session -run '^$' -fuzz FuzzUnifiedEqualsGNUDiff -fuzztime 5m
func FuzzUnifiedEqualsGNUDiff(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n")
	f.Add("", "x")
	f.Add("}\n\n}\n\n}\n", "}\n\nx\n}\n")
	f.Add("a\nb\na\nb\n", "b\na\nb\na\n")
	f.Add("x\r\ny\n", "x\ny\r\n")
	gnu, _ := exec.LookPath("diff")
	f.Fuzz(func(t *testing.T, a, b string) {
		if len(a) > 2000 || len(b) > 2000 || strings.ContainsRune(a+b, 0) {
			return
		}
		got, err := Unified("a", "b", a, b)
		if err != nil {
			t.Fatalf("Unified: %v", err)
		}
		if gnu == "" {
			return
		}
		want := gnuDiff(t, a, b)
		gm, gp := changedLines(hunks(got))
		if wm, wp := changedLines(want); gm != wm || gp != wp {
			t.Fatalf("a=%q b=%q: padfs removes %d and adds %d lines, GNU diff -u %d and %d\n--- padfs\n%s\n--- GNU\n%s",
				a, b, gm, gp, wm, wp, hunks(got), want)
		}
		if got != "" {
			if applied := patchText(t, a, got); applied != b {
				t.Fatalf("a=%q b=%q: patch(1) of padfs's hunks gives %q\n%s", a, b, applied, got)
			}
		}
	})
}

// changedLines counts the - and + lines of hunks.
func changedLines(hunks string) (minus, plus int) {
	for _, l := range strings.Split(hunks, "\n") {
		switch {
		case strings.HasPrefix(l, "@@"):
		case strings.HasPrefix(l, "-"):
			minus++
		case strings.HasPrefix(l, "+"):
			plus++
		}
	}
	return minus, plus
}

// patchText applies a unified diff to text with patch(1).
func patchText(t *testing.T, text, diff string) string {
	t.Helper()
	if _, err := exec.LookPath("patch"); err != nil {
		t.Skip("patch(1) not installed")
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "a")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("patch", "-s", "-t", "-p0", "--no-backup-if-mismatch", f)
	cmd.Stdin = strings.NewReader(diff)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("patch: %v\n%s\n%s", err, out, diff)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
