package search

import (
	"sort"
	"strings"
	"testing"
)

// grepCases are command lines run both by GNU grep (in a plain directory
// or a mount) and by padfs grep (on the store); stdout and exit codes must
// be equal.
var grepCases = [][]string{
	{"-rn", "needle"},
	{"-rn", "func Index"},
	{"-rn", "func [A-Z][a-z]*Rune("},
	{"-rn", "-E", "func (Index|LastIndex)Byte\\("},
	{"-rn", "-i", "NEEDLE"},
	{"-rn", "-i", "école"},
	{"-rn", "-i", "kelvin k"},
	{"-rn", "-i", "STRASSE"},
	{"-rn", "-i", "s long"},
	{"-rn", "-w", "foo"},
	{"-rnw", "foo.bar"},
	{"-rn", "-w", "-i", "foo"},
	{"-rn", "-x", "short needle"},
	{"-rl", "needle"},
	{"-rL", "needle"},
	{"-rc", "needle"},
	{"-rc", "utf8"},
	{"-rn", "-F", "a+b a*b"},
	{"-rn", "-F", "(a)"},
	{"-rn", "a+b"},
	{"-rn", "a\\+b"},
	{"-rn", "-E", "a+b"},
	{"-rn", "a\\{,2\\}"},
	{"-rn", "-E", "x\\{1\\}y"},
	{"-rn", "\\(a\\)"},
	{"-rn", "-E", "\\(a\\)"},
	{"-rn", "[[:upper:]]\\{5,\\}"},
	{"-rn", "-E", "^[[:space:]]*//.*TODO"},
	{"-rn", "-E", "[[:alpha:]]+ [[:digit:]]{3}"},
	{"-rn", "[\\]"},
	{"-rn", "a|b"},
	{"-rn", "-E", "a|b"},
	{"-rn", "a\\|b c"},
	{"-rn", "^needle"},
	{"-rn", "needle$"},
	{"-rn", "^$"},
	{"-rn", "-c", "^"},
	// Short required literals (no trigram) as the line prefilter.
	{"-rn", "-E", "[0-9]+\\.[0-9]+"},
	{"-rn", "-E", "[a-z]+[0-9]+_[a-z]+"},
	{"-rn", "-E", "(ab|cd)[0-9]"},
	{"-rnw", "-E", "[a-z]=[0-9]"},
	{"-rc", "-E", "é[a-z]"},
	// Line-start patterns run line by line without (?m).
	{"-rn", "-E", "^[[:space:]]+[a-z]{2}[0-9]{2}[[:space:]]*$"},
	{"-rn", "-E", "^[[:space:]]+return [a-z]+$"},
	{"-rn", "-E", "^(func|type) [A-Z]|^package"},
	{"-rn", "-i", "^PACKAGE"},
	{"-rnv", "^$"},
	{"-rc", "-v", "^[[:space:]]"},
	{"-rn", "-x", "-E", "[a-z]+"},
	{"-rn", "-E", "^.{0,3}$"},
	{"-rn", "^.*é"},
	{"-rn", "-E", "caf."},
	{"-rn", "caf"},
	{"-rn", "中文"},
	{"-rn", "wörld\\|naïve"},
	{"-rn", "last"},
	{"-rn", "windows line.$"},
	{"-rn", "no trailing"},
	{"-rn", "needle after"},
	{"-rn", "more needle"},
	{"-rn", "big file"},
	{"-rn", "end of a long line"},
	// odd/long.txt, no candidate, grows GNU's buffer before the candidate
	// odd/nullate.txt: its NUL is then read at once.
	{"-rn", "with needle early"},
	{"-rn", "zzzz-no-such-text-zzzz"},
	{"-rn", "-E", "a{1,x}"},
	{"-rn", "-E", "*needle"},
	{"-rn", "-E", "(|needle dash)"},
	{"-rn", "-E", "needle (dot|dash)"},
	{"-rn", "-E", "[0-9]{4}-[0-9]{2}"},
	{"-rn", "-v", "e"},
	{"-rn", "-e", "needle dot", "-e", "needle dash"},
	{"-rn", "needle dot\nneedle dash"},
	{"-rn", "-h", "needle dash"},
	{"-rn", "needle", "odd/a.txt"},
	{"-rn", "needle", "odd/a.txt", "odd/a-b.txt"},
	{"-rn", "needle", "odd/", "go/sort"},
	{"-rn", "needle", "./odd"},
	{"-rn", "needle", "odd/no-such"},
	{"-rn", "needle", "--include=*.txt"},
	{"-rn", "needle", "--exclude-dir=a"},
	{"-rn", "needle", "--exclude=a*"},
	{"-rn", "-E", "("},
	{"-rn", "a\\{1"},
	{"-rn", "[[:nope:]]"},
	{"-rn", "-q", "needle"},
	// Operands, one missing (exit 2, the others still searched in order).
	{"-rn", "needle", "odd", "no-such-dir", "go"},
	{"-rc", "func", "no-such-file", "odd"},
	{"-rl", "-i", "needle", "go", "odd"},
	{"-rnH", "needle dash", "odd/a-b.txt"},
	{"-rn", "-i", "[[:upper:]]ELLO"},
	{"-rn", "-E", "(foo|bar)+baz"},
	{"-rn", "\\bfoo\\b"},
	{"-rn", "\\<foo"},
	{"-rn", "-w", "foo_bar\\|foo2"},
	{"-rn", "-E", "\\w+_\\w+"},
	{"-rn", "\\s\\S"},
	{"-rnF", "-i", "FOO"},
	{"-rnF", "-w", "foo"},
	{"-rnF", "-x", "last\r"},
	{"-rn", "."},
}

func TestGrepMatchesGNUOnPlainDir(t *testing.T) {
	st, _ := openStore(t)
	files := corpus(t)
	// A plain directory lists in hash order, and GNU grep's read buffer
	// (grown by a long line) carries over from file to file: leave out
	// the long line here (the mount test keeps it, in name order).
	delete(files, "odd/long.txt")
	sid := loadSession(t, st, files)
	plain := t.TempDir()
	writeDir(t, plain, files)
	ix, err := OpenWith(t.TempDir(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	check := func(stage string) {
		for _, args := range grepCases {
			want, wantCode := gnuGrep(t, plain, args)
			got, gotCode, _ := padGrep(t, ix, sid, args)
			// A plain directory lists in hash order; the mount (and
			// padfs) in name order: compare per file.
			want, got = byFile(want), byFile(got)
			if got != want || gotCode != wantCode {
				t.Errorf("%s: grep %q: exit %d, want %d\n%s", stage, args, gotCode, wantCode, diffLines(got, want))
			}
		}
	}
	check("no index")
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	check("indexed")
}

// byFile stably sorts output lines by their file name prefix.
func byFile(out string) string {
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	sort.SliceStable(lines, func(i, j int) bool {
		a, _, _ := strings.Cut(lines[i], ":")
		b, _, _ := strings.Cut(lines[j], ":")
		return a < b
	})
	return strings.Join(lines, "\n")
}

func diffLines(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	var b strings.Builder
	n := 0
	for i := 0; i < max(len(g), len(w)) && n < 8; i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			b.WriteString("  line " + itoa(i+1) + ":\n    got:  " + trunc(gl) + "\n    want: " + trunc(wl) + "\n")
			n++
		}
	}
	return b.String()
}

func trunc(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

func itoa(i int) string {
	return strings.TrimSpace(strings.Repeat(" ", 0) + func() string { return fmtInt(i) }())
}

func fmtInt(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
