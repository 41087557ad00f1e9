package session

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// gnuDiff runs GNU diff -u on two texts and returns its hunks (everything
// after the --- / +++ header).
func gnuDiff(t *testing.T, a, b string) string {
	t.Helper()
	dir := t.TempDir()
	pa, pb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	os.WriteFile(pa, []byte(a), 0o644)
	os.WriteFile(pb, []byte(b), 0o644)
	out, err := exec.Command("diff", "-u", pa, pb).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("diff -u: %v", err)
		}
	}
	return hunks(string(out))
}

// hunks drops a unified diff's two header lines.
func hunks(u string) string {
	lines := strings.SplitAfter(u, "\n")
	if len(lines) < 2 {
		return ""
	}
	return strings.Join(lines[2:], "")
}

// editText applies n random line edits (insert, delete, change) to a.
func editText(r *rand.Rand, a string, n int) string {
	lines := strings.SplitAfter(a, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i := 0; i < n; i++ {
		pos := r.Intn(len(lines) + 1)
		switch r.Intn(3) {
		case 0:
			lines = append(lines[:pos], append([]string{fmt.Sprintf("inserted %d\n", r.Intn(1000))}, lines[pos:]...)...)
		case 1:
			if pos < len(lines) {
				lines = append(lines[:pos], lines[pos+1:]...)
			}
		case 2:
			if pos < len(lines) {
				lines[pos] = fmt.Sprintf("changed %d\n", r.Intn(1000))
			}
		}
	}
	return strings.Join(lines, "")
}

func TestUnifiedHunksEqualGNUDiff(t *testing.T) {
	if _, err := exec.LookPath("diff"); err != nil {
		t.Skip("GNU diff not installed")
	}
	r := rand.New(rand.NewSource(1))
	var base strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&base, "line %d: %s\n", i, strings.Repeat("x", r.Intn(20)))
	}
	cases := [][2]string{
		{"", "one\ntwo\n"},
		{"one\ntwo\n", ""},
		{"no newline", "no newline\n"},
		{"a\nb\nc\n", "a\nB\nc"},
		{"same\n", "same\n"},
	}
	for i := 0; i < 40; i++ {
		a := base.String()
		cases = append(cases, [2]string{a, editText(r, a, 1+r.Intn(8))})
	}
	// Code-like text with many equal lines ("}", blank), where a diff has
	// several equally short answers.
	var code strings.Builder
	for i := 0; i < 60; i++ {
		fmt.Fprintf(&code, "func f%d() {\n\treturn %d\n}\n\n", i, i%3)
	}
	for i := 0; i < 40; i++ {
		a := code.String()
		cases = append(cases, [2]string{a, editText(r, a, 1+r.Intn(6))})
	}
	for i, c := range cases {
		got, err := Unified("a", "b", c[0], c[1])
		if err != nil {
			t.Fatal(err)
		}
		if want := gnuDiff(t, c[0], c[1]); hunks(got) != want {
			t.Errorf("case %d: hunks differ from GNU diff -u\n--- padfs\n%s\n--- GNU\n%s", i, hunks(got), want)
		}
	}
}
