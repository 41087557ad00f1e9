package search

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/padfs/padfs/grep"
	"github.com/padfs/padfs/mvcc"
)

// optFiles is a flat tree for the output options (testdata/grep/opts,
// and two files over 96 KiB made here): overlapping context,
// no trailing newline, CRLF, a binary file (early and late NUL), a line
// with an encoding error, NUL-terminated records, words.
func optFiles(t testing.TB) map[string][]byte {
	files := testdataTree(t, "opts")
	filler := strings.Repeat("filler line of text\n", 7000) // > 96 KiB: the NUL is read late
	files["late.bin"] = []byte("needle early\nctx1\nctx2\n" + filler + "needle late\nctx after\n\x00nul line\nmore\n")
	files["late2.bin"] = []byte("x\n" + filler + "needle late\nctx after\nctx 2\n\x00nul line\nmore\n")
	return files
}

// optCases run over all of optFiles (as operands in name order, or -r in
// a mount); optSingle as given.
var optCases = [][]string{
	{"-o", "needle"}, {"-on", "needle"}, {"-ob", "needle"}, {"-oi", "NEEDLE"}, {"-ow", "foo"},
	{"-onw", "-i", "foo"}, {"-o", "-E", "a|ab|abc"}, {"-o", "fo*"}, {"-o", "-v", "needle"},
	{"-o", "-c", "needle"}, {"-o", "^...."}, {"-o", "-E", "o+"}, {"-o", "x*"}, {"-ox", "-E", "ab.*|z"},
	{"-oF", "-e", "ab", "-e", "abc"}, {"-o", "-v", "-C1", "needle"}, {"-o", "-E", "e.{0,2}"},
	{"-m1", "needle"}, {"-m2", "-n", "needle"}, {"-m1", "-c", "needle"}, {"-m1", "-A2", "needle"},
	{"-m2", "-C1", "-n", "needle"}, {"-m1", "-v", "needle"}, {"-m0", "needle"}, {"-m1", "-l", "needle"},
	{"-m1", "-L", "needle"}, {"-m", "2", "-c", "-v", "needle"}, {"--max-count=1", "-A1", "-o", "needle"},
	{"-m1", "-A3", "-n", "needle"},
	{"-A1", "needle"}, {"-B1", "needle"}, {"-C1", "-n", "needle"}, {"-C2", "-n", "needle"}, {"-2", "-n", "needle"},
	{"-A0", "needle"}, {"-nA1", "-B0", "needle"}, {"-C1", "-v", "needle"}, {"-C1", "--group-separator=::", "needle"},
	{"-C1", "--no-group-separator", "needle"}, {"-C1", "-c", "needle"}, {"-C1", "-o", "-n", "needle"},
	{"-C3", "-m1", "-n", "needle"}, {"-A5", "-n", "needle"}, {"-B4", "-n", "needle"}, {"-A", "1", "-B", "2", "needle"},
	{"--context=1", "-A0", "needle"}, {"-nv", "-A1", "needle"}, {"-A2", "z"},
	{"-c", "-l", "needle"}, {"-l", "-c", "needle"}, {"-L", "-c", "needle"}, {"-c", "-v", "needle"},
	{"-lv", "needle"}, {"-L", "-v", "needle"}, {"-l", "-L", "needle"}, {"-q", "-c", "needle"},
	{"-a", "needle"}, {"-an", "-C1", "needle"}, {"-ab", "needle"}, {"-ao", "needle"},
	{"-b", "needle"}, {"-bn", "needle"}, {"-nT", "needle"}, {"-bT", "-n", "needle"}, {"-T", "needle"},
	{"-hT", "needle"}, {"-nT", "-C1", "needle"}, {"-nT", ""}, {"-b", "-C1", "needle"}, {"-bo", "-E", "o+"},
	{"--color=always", "needle"}, {"--color=always", "-n", "-C1", "needle"}, {"--color=always", "-o", "-b", "needle"},
	{"--color=always", "-c", "needle"}, {"--color=always", "-l", "needle"}, {"--color=always", "-v", "-C1", "needle"},
	{"--color=auto", "needle"}, {"--color", "needle"}, {"--colour=always", "-i", "FOO"}, {"--color=always", "-w", "foo"},
	{"--color=always", "-E", "x*"}, {"--color=always", "-nT", "-b", "needle"}, {"--color=always", "-Z", "needle"},
	{"--color=never", "needle"}, {"--color=always", "-x", "z"},
	{"-Z", "-l", "needle"}, {"-Z", "-n", "needle"}, {"-Zc", "needle"}, {"-ZL", "needle"},
	{"-z", "needle"}, {"-zn", "needle"}, {"-z", "-o", "n.e"}, {"-z", "^rec"}, {"-zc", "two"}, {"-zl", "line"},
	{"-z", "-v", "needle"}, {"-zc", "rec[[:space:]]two"}, {"-zc", "rec\\stwo"}, {"-zc", "rec.two"}, {"-zc", "rec[^x]two"},
	{"-zc", "-P", "rec\\stwo"}, {"-zc", "-P", "rec.two"}, {"-zc", "-P", "rec\\ntwo"}, {"-zc", "-P", "(?s)rec.two"},
	{"-zo", "-P", "c\\s+t"}, {"-zc", "rec\\Stwo"}, {"-zo", "-E", "c.t[a-z]+"}, {"-zn", "-C1", "two"}, {"-zcw", "rec"}, {"-zc", "c[[:cntrl:]]t"}, {"-zc", "c[^[:cntrl:]]t"},
	{"--line-buffered", "-n", "needle"}, {"--line-buffered", "-C1", "needle"},
	{"-P", "\\d+"}, {"-P", "-o", "\\w+dle"}, {"-P", "-i", "NEEDLE\\s"}, {"-Po", "fo+?"}, {"-P", "-w", "foo"}, {"-Pow", "foo"}, {"-Pc", "a. needle"}, {"-Pc", "[^x]{2}needle"}, {"-Pl", "a[^z] "},
	{"-Pao", "a.{0,3}needle"}, {"-Pc", "^a"}, {"-Pc", "d$"}, {"-Pc", "\\bneedle bad"}, {"-Pca", "\\W needle"}, {"-Pc", "-w", "foo"}, {"-Pn", "-x", "-i", "FOO.*"},
	{"-P", "(?i)Needle"}, {"-P", "(?i)(needle|xyzzy)"}, {"-P", "(?i)NEEDLE"}, {"-P", "[^x]{3}dle$"}, {"-Pc", "\\S\\s\\S"}, {"-P", "-x", "ab.*"}, {"-P", "-c", "\\bfoo\\b"}, {"-Pn", "[[:digit:]]|n\\x65e"},
	{"-onT", "needle"}, {"-cZv", "needle"}, {"--color=always", "-A1", "-m1", "needle"}, {"-ob", "-i", "NEEDLE"},
	{"-owinb", "FOO"}, {"-xon", "z"}, {"--no-group-separator", "-A0", "needle"}, {"-o", "-e", "needle", "-e", "two"},
	{"-o", ""}, {"-c", ""}, {"-o", ".$"}, {"-on", "-C2", "-v", "e"}, {"--color=always", "-o", "-v", "-C1", "needle"},
	{"--color=always", "-c", "-Z", "needle"}, {"--color=always", "-L", "needle"}, {"--color=always", "-b", "-o", "-T", "o"},
	{"-T", "-c", "needle"}, {"-bv", "e"}, {"-A1", "-B3", "-m2", "-n", "needle"}, {"-C1", "-m1", "-v", "-n", "z"},
	{"-P", "-o", "\\Qfoo.\\E"}, {"-P", "a\\z"}, {"-P", "-o", "(?:ab|abc)"},
}

var optSingle = [][]string{
	{"-n", "-C1", "needle", "a.txt"},
	{"-o", "needle", "b.txt"},
	{"-c", "-m1", "needle", "a.txt"},
	{"-nT", "-C1", "needle", "a.txt"},
	{"-H", "-A1", "needle", "a.txt", "no-such.txt", "b.txt"},
	{"-C1", "needle", "b.txt", "a.txt"},
}

// optErrors are refused by both, with exit 2.
var optErrors = [][]string{
	{"-A", "x", "needle"}, {"-m", "x", "needle"}, {"-P", "-e", "a", "-e", "b"}, {"-C", "-1", "needle"},
}

// optRefused are what GNU grep evaluates and padfs refuses (exit 2, an
// error naming the construct) rather than answer differently.
var optRefused = [][]string{
	{"-P", "foo(?=bar)"}, {"-P", "(a)\\1"}, {"-P", "a++"}, {"-P", "(?>a)"}, {"-P", "(?<=a)b"},
}

// grepRun is one grep run's whole visible result.
type grepRun struct {
	out, err string
	code     int
}

// gnuGrepRun runs GNU grep (C.UTF-8, default colors) in dir.
func gnuGrepRun(t *testing.T, dir string, args []string) grepRun {
	t.Helper()
	out, errout, code := gnuGrepAll(t, dir, args)
	return grepRun{out, errout, code}
}

// padGrepRun runs padfs grep's request for args; a fatal error is exit 2
// with its message.
func padGrepRun(t *testing.T, ix *Index, sid mvcc.SessionID, args []string) grepRun {
	t.Helper()
	req, err := parseGrepArgs(args)
	if err != nil {
		return grepRun{"", "grep: " + err.Error() + "\n", 2}
	}
	var out, errb bytes.Buffer
	req.Session, req.Out, req.Err, req.ErrPrefix = sid, &out, &errb, "grep"
	stats, err := ix.Grep(context.Background(), req)
	if err != nil {
		return grepRun{out.String(), errb.String() + "grep: " + err.Error() + "\n", 2}
	}
	return grepRun{out.String(), errb.String(), stats.ExitCode(req.Mode == grep.OutQuiet)}
}

func compareRuns(t *testing.T, stage string, args []string, got, want grepRun) {
	t.Helper()
	if got != want {
		t.Errorf("%s: grep %q: exit %d, want %d\nstdout:\n%s\nstderr got %q\n       want %q", stage, args, got.code, want.code,
			diffLines(got.out, want.out), got.err, want.err)
	}
}

func TestGrepOptionsMatchGNUOnPlainDir(t *testing.T) {
	st, _ := openStore(t)
	files := optFiles(t)
	sid := loadSession(t, st, files)
	plain := t.TempDir()
	writeDir(t, plain, files)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	ix, err := OpenWith(t.TempDir(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	check := func(stage string) {
		for _, c := range optCases {
			args := append(append([]string{}, c...), names...)
			compareRuns(t, stage, args, padGrepRun(t, ix, sid, args), gnuGrepRun(t, plain, args))
		}
		for _, args := range optSingle {
			compareRuns(t, stage, args, padGrepRun(t, ix, sid, args), gnuGrepRun(t, plain, args))
		}
		for _, args := range optErrors {
			args := append(append([]string{}, args...), names...)
			got, want := padGrepRun(t, ix, sid, args), gnuGrepRun(t, plain, args)
			if got.code != 2 || want.code != 2 || got.out != "" {
				t.Errorf("%s: grep %q: exit %d (GNU %d), stdout %q: want a refusal", stage, args, got.code, want.code, got.out)
			}
		}
		for _, args := range optRefused {
			args := append(append([]string{}, args...), names...)
			if got := padGrepRun(t, ix, sid, args); got.code != 2 || !strings.Contains(got.err, "unsupported") {
				t.Errorf("%s: grep %q: exit %d, stderr %q: want a refusal naming the construct", stage, args, got.code, got.err)
			}
		}
	}
	check("no index")
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	check("indexed")
}

func TestGrepOptionsMatchGNUOnMount(t *testing.T) {
	st, data := openStore(t)
	h, err := st.CreateSession("mount", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	sid := h.ID
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	mnt := mountSession(t, st, sid, &ix)
	src := t.TempDir()
	writeDir(t, src, optFiles(t))
	bash(t, mnt, "cp -a "+src+"/. .")
	check := func(stage string) {
		for _, c := range optCases {
			args := append([]string{"-r"}, c...)
			compareRuns(t, stage, args, padGrepRun(t, ix, sid, args), gnuGrepRun(t, mnt, args))
		}
		for _, args := range optSingle {
			compareRuns(t, stage, args, padGrepRun(t, ix, sid, args), gnuGrepRun(t, mnt, args))
		}
	}
	check("no index")
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	check("indexed")

	// .grep/NAME reads as grep -rn with the options the name spells.
	for name, args := range map[string][]string{
		"needle":                  {"needle"},
		"-n -C1 -- needle":        {"-C1", "--", "needle"},
		"-c needle":               {"-c", "needle"},
		"-l -i NEEDLE":            {"-l", "-i", "NEEDLE"},
		"-ow foo":                 {"-ow", "foo"},
		"-m 1 -A 1 needle":        {"-m", "1", "-A", "1", "needle"},
		"-- -x here":              {"--", "-x here"},
		"src%2Fmain":              {"src/main"},
		"-E -e a.c -e sixx":       {"-E", "-e", "a.c", "-e", "sixx"},
		"-i --include=*.txt two ": {"-i", "--include=*.txt", "two "},
		"-q needle":               {"-q", "needle"},
		"--color=always -w foo":   {"--color=always", "-w", "foo"},
	} {
		want := gnuGrepRun(t, mnt, append([]string{"-rn"}, args...))
		got, code := shOut(t, mnt, "cat '.grep/"+name+"'")
		if code != 0 || got != want.out+want.err {
			t.Errorf(".grep/%s: exit %d, differs from grep -rn %q:\n%s", name, code, args, diffLines(got, want.out+want.err))
		}
	}
	for _, name := range []string{"--asof=1 -- needle", "-e needle -- extra", "--no-such-option x", "-P (?=a)"} {
		if out, code := shOut(t, mnt, "cat '.grep/"+name+"'"); code == 0 {
			t.Errorf(".grep/%s: read %q, want EINVAL", name, out)
		}
	}
}

// TestGrepPerlRefusalsNameTheConstruct: what RE2 cannot evaluate is
// refused with the construct's name, never answered differently.
func TestGrepPerlRefusalsNameTheConstruct(t *testing.T) {
	for pat, want := range map[string]string{
		"foo(?=bar)": "look-ahead", "foo(?!bar)": "look-ahead", "(?<=a)b": "look-behind", "(?<!a)b": "look-behind",
		"(a)\\1": "back-reference", "(?<n>a)\\k<n>": "back-reference", "a++": "possessive", "a*+": "possessive",
		"(?>a|ab)c": "atomic group", "a\\Kb": "\\K", "(?(1)a|b)": "conditional", "(a(?R)?b)": "recursion",
		"(?x) a b": "inline flag",
	} {
		_, err := grep.Compile([]string{pat}, grep.MatchOptions{Syntax: grep.Perl}, nil)
		var ue *grep.UnsupportedError
		if !errors.As(err, &ue) || !strings.Contains(ue.Construct, want) {
			t.Errorf("-P %q: error %v, want an unsupported %s", pat, err, want)
		}
	}
	for _, pat := range []string{`\d+\s\w`, `(?i)a.*?b`, `(?<name>x)|(?P<n2>y)`, `[\d\s]+`, `\x{263a}\h\v\R\N`, `a{2,}?`} {
		if _, err := grep.Compile([]string{pat}, grep.MatchOptions{Syntax: grep.Perl}, nil); err != nil {
			t.Errorf("-P %q: %v", pat, err)
		}
	}
}

// corpusOptCases run over the main corpus (Go sources, unicode, a late
// NUL, a long line) in a mount.
var corpusOptCases = [][]string{
	{"-rno", "needle"}, {"-rno", "-i", "école"}, {"-rno", "-i", "STRASSE"}, {"-rnow", "foo"}, {"-rnoi", "k"},
	{"-rn", "-C2", "needle"}, {"-rc", "-m3", "func"}, {"-rn", "-m2", "-A1", "func"}, {"-rb", "needle"},
	{"-r", "--color=always", "-n", "needle"}, {"-rnT", "needle"}, {"-rl", "-Z", "needle"}, {"-rn", "-a", "needle"},
	{"-rnP", "\\bfunc\\s+\\w+\\("}, {"-rnoP", "\\d{3,}"}, {"-rz", "needle"}, {"-rn", "-A3", "needle"},
	{"-rn", "-B3", "needle after"}, {"-rnv", "-m5", "-C1", "e"}, {"-rno", "-E", "[[:upper:]]{3,}"},
	{"-rn", "--color=always", "-i", "-w", "foo"}, {"-rnob", "caf."}, {"-rn", "-m1", "-A2", "needle early"},
	{"-rno", "\\bfoo\\b"}, {"-rno", "\\<foo"}, {"-rn", "--color=always", "foo\\>"}, {"-rno", "-i", "\\bk"},
	{"-rno", "\\Bfoo"}, {"-rnow", "^foo"}, {"-rn", "--color=always", "-w", "foo$"}, {"-rnow", "\\bfoo"},
	{"-rnow", "-i", "^[a-z]*"}, {"-rnow", "-E", "foo\\b|bar"}, {"-rnoPw", "^\\w+"}, {"-rno", "-E", "\\b\\w+é\\b"},
	{"-rc", "-A1", "needle"}, {"-rno", "-x", "short needle"}, {"-rn", "-A1", "no trailing"}, {"-rn", "needle early"},
}

func TestGrepOptionsMatchGNUOnCorpusMount(t *testing.T) {
	st, data := openStore(t)
	h, err := st.CreateSession("mount", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	sid := h.ID
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	mnt := mountSession(t, st, sid, &ix)
	src := t.TempDir()
	writeDir(t, src, corpus(t))
	bash(t, mnt, "cp -a "+src+"/. .")
	check := func(stage string) {
		for _, args := range corpusOptCases {
			compareRuns(t, stage, args, padGrepRun(t, ix, sid, args), gnuGrepRun(t, mnt, args))
		}
	}
	check("no index")
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	check("indexed")
}
