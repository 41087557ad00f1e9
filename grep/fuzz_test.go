package grep

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzGrepMatchesGNU: a pattern is user input. For any pattern and text,
// Compile and Grep must not panic or hang; MayMatch (the trigram filter
// grep runs before the regexp) must never rule out a file that has a
// match; and where GNU grep is installed, the selected lines and the
// verdict on a malformed pattern must be GNU grep's (LC_ALL=C.UTF-8).
// Patterns padfs reports as unsupported are left out. Text is kept to
// valid UTF-8 without NUL bytes, where GNU grep prints lines, not a
// "binary file matches".
//
//	go test ./grep -run '^$' -fuzz FuzzGrepMatchesGNU -fuzztime 5m
func FuzzGrepMatchesGNU(f *testing.F) {
	text := "foo bar\nFoo_Bar baz\nfoofoo\n\nab+c a{2} (x)\nété café\nend$ ^start\nx.y xzy\n"
	for _, s := range []struct {
		pat   string
		flags uint8
	}{
		{"foo", 0}, {"^foo", 0}, {"foo$", 0}, {`fo\+`, 0}, {`\(foo\)\1`, 0}, {"a{2}", 0}, {`a\{2\}`, 0},
		{"fo+", 1}, {"(foo|bar)+", 1}, {"a{2}", 1}, {"^$", 1}, {"x.y", 2}, {"ab+c", 2}, {"caf[eé]", 1},
		{"[[:upper:]]", 0}, {"[[:alpha:]_]+", 1}, {`\bbar\b`, 1}, {`\<foo`, 0}, {"foo", 4}, {"FOO", 8},
		{"bar", 16}, {"foo", 32}, {"*a", 0}, {"*a", 1}, {"a**", 1}, {"[", 0}, {"(", 1}, {`\(`, 0},
		{"a{1", 1}, {`a\{1`, 0}, {"x{2,1}", 1}, {`\d+`, 3}, {`(?i)foo`, 3}, {"é", 8}, {"[^a-z ]", 1},
		{"[ -0-0]", 1}, {"[a-c-]", 0}, {"[--0]", 1}, {"[[:alpha:]-z]", 0}, {"[a-[:alpha:]]", 1}, {"[[.a.]-c-e]", 0},
		{"[a-a-a]", 1}, {"[%--]", 0}, {"[%--a]", 1}, {"[!--]", 0}, {"[[:digit:]-]", 1}, {"[z-a]", 0},
		{"[..]", 3}, {"[==]", 3}, {"[::]", 3}, {"[:alpha:]", 3}, {"[[.a.]]", 3}, {"[[=a=]]", 3}, {"[[:alpha:]]", 3},
		{"0{,,", 1}, {"0{,", 1}, {"0{", 1}, {"0{,1", 1}, {"a{}", 1}, {"a{1,2,3}", 1}, {"a{,}", 1}, {"a{1x}", 1},
		{"a{,1x}", 1}, {"a{1,x,}", 1}, {"{,,", 1}, {"{1,2,3}", 1}, {"^{2,1}", 1}, {"({2,1})", 1}, {"a*{,,", 1}, {"a{2,1}", 1}, {"{}", 1}, {`a\{,,\}`, 0}, {`a\{\}`, 0}, {`a\{x\}`, 0}, {`a\{1`, 0}, {`a\{,\}`, 0},
		{"[:0:]", 0}, {"[:alpha:]", 1}, {"[:]", 0}, {"[::]", 1}, {"[:a]", 0}, {"[^:a:]", 0}, {"[:-::]", 1}, {"[:[.a.]:]", 0},
		{"[:[:alpha:]:]", 1}, {"x[:a:]", 0},
		{"${}", 1}, {"a${}", 1}, {"^{2,1}", 1}, {"a^{2,1}", 1}, {"(^{})", 1}, {"(${})", 1}, {"x|${}", 1}, {`\'{}`, 1},
		{"a|^{}", 1}, {`\<{}`, 1}, {`\B{}`, 1}, {"(^){}", 1}, {`\` + "`{}", 1}, {`x\>{1}`, 1},
		{`x\>\{1\}`, 0}, {`\b\{x`, 0}, {`\B\{\}`, 0}, {`$\{1\}`, 0}, {`^\{\}`, 0}, {`a\<*`, 0}, {`\<\{1`, 0},
		{"[a-A]", 4}, {"[b-A]", 4}, {"[a-Z]", 5}, {"[A-z]", 4}, {"[_-A]", 4}, {"[Z-_]", 4}, {"[B-a]", 4}, {"[B-a]", 0}, {"[a-B]", 36},
		{"[[:alpha:]-0]", 3}, {`[\d-z]`, 3}, {`[a-\d]`, 3}, {`[\w-]`, 3}, {`[-\w]`, 3}, {"[[:digit:]-]", 3}, {"[%-[:digit:]]", 3},
		{"[a-c-e]", 3}, {`[^-\d]`, 3}, {"[]-a]", 3}, {`[\x41-\d]`, 3}, {`[\]-a]`, 3}, {`[a\-\d]`, 3},
		{`\B*2+`, 1}, {`\<*a`, 1}, {"^*a", 1}, {"$*", 1}, {"a^*", 1}, {`a\b*`, 1}, {"^+x", 1}, {`^\B?a`, 1}, {"x|$*", 1}, {"(^*x)", 1},
		{"{{}", 1}, {"{{1}", 1}, {"a{{}", 1}, {"{{", 1}, {"({{})", 1}, {"{}{}", 1}, {"{a{}", 1}, {"^{{}", 1}, {"{{{}", 1},
		{"0{1001}", 3}, {"0{1000}", 3},
		{"{70000,}", 1}, {"{70000}", 1}, {"^{70000,}", 1}, {"a{70000,}", 1}, {"x|{70000}", 1}, {"{32768}", 1}, {"{32767}", 1},
		{"{1,70000}", 1}, {"(){70000}", 1}, {"{,70000}", 1}, {"({70000})", 1}, {"{40000,1}", 1}, {"a^{70000}", 1},
		{"a^{70000,}", 1}, {"^{1001}", 1}, {"{1001}", 1}, {"a${2000}", 1}, {"(^){40000}", 1}, {"^{40000}", 1}, {"^{0,2}a", 1}, {"^{2,3}x", 1},
		{`0{\,,`, 1}, {`0{\1`, 1}, {`0{1\,2}`, 1}, {`a{\}`, 1},
		{`X\S`, 7}, {`\W`, 3}, {`\D`, 3}, {`^\S+$`, 3}, {`[\S]`, 3}, {`[^\s]`, 3}, {`\H`, 3},
		{"0{00}", 3}, {"0{01}", 3}, {"0{1,02}", 3}, {"a{007}", 3}, {"a{2,}", 3}, {"a{1}?", 3}, {"a{1}+", 3},
		{"{0}", 13}, {"{1}a", 9}, {"^{1}", 1},
		{`\e`, 3}, {`[\e]`, 3}, {`\o{101}`, 3}, {`\o{}`, 3}, {`\o`, 3}, {`\o{8}`, 3}, {`\i`, 3},
		{"{00}", 3}, {"{0}", 59}, {"a|{1}", 3}, {"({1})", 3}, {"{,1}", 3}, {"{x}", 3}, {"a{1}", 3},
		{`[\1]`, 3}, {`[\01]`, 3}, {`[\101]`, 3}, {`[\8]`, 3}, {`\101`, 3}, {`\0`, 3}, {`\01`, 3}, {`[\18]`, 3},
		{`\é`, 7}, {`[\é]`, 3}, {`a\€b`, 3},
		{")(", 11}, {")(", 3}, {"a)|(b", 19},
		{`\a`, 44}, {`\A`, 12}, {`x\y`, 12}, {`\é`, 12}, {`\a`, 4},
		{`\x`, 3}, {`\x4`, 3}, {`\x414`, 3}, {`a\xg`, 3}, {`[\x]`, 3}, {`\x{}`, 3}, {`\x{zz}`, 3},
		{"0$*{}", 1}, {"0^+{,,", 1},
		{"|)", 57}, {"|)", 1}, {"a)", 17}, {"(a))", 9},
		{`\c0`, 3}, {`\ca`, 3}, {`\c`, 3}, {`\c€`, 3}, {`[\c0]`, 3}, {`\c\`, 3}, {`x\c `, 3},
		{"{", 9}, {"{", 1}, {"^{x", 9}, {"a{", 9},
		{"[[.é.]0]", 0}, {"[[=é=]]", 1}, {"[[.space.]]", 0}, {"[[.a.]]", 1}, {"[[=a=]]", 0},
		{"[0-˞]", 1}, {"[a-é]", 0}, {"[é-z]", 5}, {"[-é]", 1}, {"[[.é.]-z]", 0},
		{`0\B\{`, 0}, {`0\b\{x`, 0}, {`0\<\{1`, 0}, {`\B\{`, 0}, {`0^\{`, 0},
		{"({)", 1}, {"({))", 1}, {"(a{)", 1}, {"({1)", 1}, {"({{)", 1}, {"({*)", 1}, {"(*{)", 1},
		{"(*)", 1}, {"(a|+)", 1}, {"(^*)", 1}, {"(*))", 1}, {"(*)a)", 1}, {"((*))", 1}, {"(*)|x)", 1}, {"(a|*b)", 1}, {`(\<*)`, 1}, {"(**)", 1},
		{"[[:]:]", 3}, {"[[:]x]", 3}, {"[[=]=]", 3}, {"[a[:]", 3},
		{"$*", 3}, {`\b+`, 3}, {"^{2}", 3}, {"^{,2}", 3}, {"(?:$)*", 3}, {`\B{2}`, 3}, {"${", 3}, {`\A?`, 3}, {"a$??", 3},
		{`[\b]`, 3}, {`a[\bx]b`, 3}, {`[\B]`, 3}, {`[\A]`, 3}, {`[\z]`, 3}, {`[\Z]`, 3}, {`[\G]`, 3}, {`[\K]`, 3}, {`[\N]`, 3},
		{`[\C]`, 3}, {`[\g]`, 3}, {`[\k]`, 3}, {`[\X]`, 3}, {`[\R]`, 3}, {`[\E]g]`, 3}, {`[\Eg]`, 3}, {`[\Qx]\E]`, 3},
		{`[\H]`, 3}, {`[\V]`, 3}, {`[^\H]`, 3}, {`[a\Hb]`, 3},
		{"[[:^alpha:] ]", 3}, {"[[:a]", 3}, {"[.a]", 3}, {"[a.]", 3}, {`[[:a\]:]]`, 3}, {"[[:foo:]]", 3}, {"[^:a:]", 3},
	} {
		f.Add(s.pat, s.flags, text)
	}
	// Word edges where \b alone is not exact: \< before, or \> after,
	// something other than word characters (edges.go).
	edgeText := "foo bar\n foo\n-x y\nfoo- \nab\n_a_\né a\nxé\n(x)\n a-b \nx\n\n-\n"
	for _, pat := range []string{`\< `, ` \>`, `\<-`, `-\>`, `\<.`, `.\>`, `\<\(x\|-\)`, `\(\<\|-\)a`,
		`a\>`, `\>a`, `a\<`, `\<`, `\>`, `\<\>`, `x\>-`, `\(a\|\)\>`, `\<[a-]`, `[-a]\>`, `\<a*`, `a*\>`,
		`\<\<a`, `a\>\>`, `\<\(-\)*`, `\(\<\)*x`, `\<\(a\|b\)`, `\(a\|-\)\>`, `\<é`, `é\>`, `\<[[:alpha:]]`, `a\b`} {
		for _, flags := range []uint8{0, 4, 8, 16, 32} {
			f.Add(pat, flags, edgeText)
		}
	}
	for _, pat := range []string{`(\<)?-`, `\<(a|-)`, `(-|\<)x`, `(\<|\>) `, `\< +`, ` +\>`, `\<x?`, `(\>)+`} {
		f.Add(pat, uint8(1), edgeText)
		f.Add(pat, uint8(1|8), edgeText)
	}
	// -w (BRE, ERE) as GNU's regex loop: an empty match is a whole word
	// only where it is the longest at its start; at the cut of a
	// shorter match \' holds, $ does not, a split character matches
	// nothing. Two literal patterns run as -F, without the loop.
	for _, s := range []struct {
		pat, text string
	}{
		{` \|`, " 0\n 0 \na  b\n0 \n"}, {`x*`, "x0 \n \nx\n"}, {`\(a\|\)b*`, "ab_ \nab_\n a \n"},
		{`a--\|a-\'`, "a--x\na-\n"}, {`a[^x]*`, "aéx\naé\n"}, {`a.\?`, "aéx\n"}, {`\bx*`, "x0 \n é\n"},
	} {
		f.Add(s.pat, uint8(8), s.text)
		f.Add(s.pat, uint8(8|32), s.text)
	}
	// Where GNU's dfa and glibc's regex read an ERE otherwise (^{0}a is a
	// to the dfa, "^0}a" to glibc), -w runs glibc's loop on the lines the
	// dfa's bare pattern selects.
	twoText := "ab\nxab\na^b\n1}a\n0}\nx{a\n{a\n x {y\na{2}\n a b\n"
	for _, pat := range []string{"^{0}a", "^{0,1}x", "^{1}{1}a", "^*{1}", "{1}a", "^*a", "a$?b", "{a", "x|{a", "{", "{{", "({a)", "{0}", "^++a", "{*a"} {
		f.Add(pat, uint8(1), twoText)
		f.Add(pat, uint8(1|8), twoText)
	}
	// With a word anchor, \w, a negated bracket, a range or a class GNU's
	// dfa cannot decide in UTF-8: glibc's regex selects in its reading,
	// on the lines the dfa's superset passes (-i \B\a matches nothing).
	for _, pat := range []string{`\B\a`, `\bfoo\d`, `\<\a`, `x\>\a*`} {
		f.Add(pat, uint8(4), "0A\na b\nfood\n a\n")
		f.Add(pat, uint8(4|32), "0A\na b\nfood\n a\n")
	}
	for _, pat := range []string{`x\b|{a`, `{.\b`, `{é\b`, `\b^*a`, `x|\b{0}`, `\bé{0}`, "{0}[^a] ", "{0}[b-c]", `{0}\w`, "{[a-c]",
		"{0}[[:alpha:]]", `^*a\w`, "{0}[b]", "{0}[é]", "{[^x]*b", `{\W`, "[[:alpha:]]${1{0}", "a${1{0}"} {
		f.Add(pat, uint8(1), "{a\nx {a\né{a b\n a\n0}\n")
		f.Add(pat, uint8(1|16), "{a\nx {a\né{a b\n a\n0}\n")
		f.Add(pat, uint8(1|8), "{a\nx {a\né{a b\n a\n0}\n{ b\n")
	}
	for _, pat := range []string{`[\H]`, `[\V]`, `[\S]`, `[^\S]`, `[\D]`, `[\W]`, `x[\H\V]`} {
		f.Add(pat, uint8(3), "\x0b\n\t\n \na\n\u00a0\n\u2028\n")
	}
	gnu, _ := exec.LookPath("grep")
	f.Fuzz(func(t *testing.T, pat string, flags uint8, data string) {
		if !utf8.ValidString(pat) || strings.ContainsAny(pat, "\n\x00") || len(pat) > 200 ||
			!utf8.ValidString(data) || strings.ContainsRune(data, 0) || len(data) > 4096 {
			return
		}
		o := MatchOptions{Syntax: Syntax(flags & 3), IgnoreCase: flags&4 != 0, Word: flags&8 != 0,
			Line: flags&16 != 0, Invert: flags&32 != 0}
		m, err := Compile([]string{pat}, o, nil)
		var unsupported *UnsupportedError
		if errors.As(err, &unsupported) {
			return
		}
		var got []int
		if err == nil {
			res, err := m.Grep([]byte(data), ModeLines)
			if err != nil {
				t.Fatalf("Grep(%q): %v", pat, err)
			}
			for _, l := range res.Lines {
				got = append(got, l.Num)
			}
			if len(got) > 0 && !o.Invert && !m.MayMatch([]byte(data)) {
				t.Fatalf("pattern %q (flags %d): MayMatch rules out a text with matching lines %v", pat, flags, got)
			}
		}
		if gnu == "" {
			return
		}
		want, code := gnuLines(t, gnu, pat, o, data)
		switch {
		case code == 2 && err == nil:
			t.Fatalf("pattern %q (flags %d): GNU grep rejects it, padfs compiled it", pat, flags)
		case code != 2 && err != nil:
			t.Fatalf("pattern %q (flags %d): padfs: %v; GNU grep accepts it", pat, flags, err)
		case code != 2 && !slices.Equal(got, want):
			t.Fatalf("pattern %q (flags %d) on %q:\npadfs selects lines %v\nGNU grep selects %v", pat, flags, data, got, want)
		}
	})
}

// gnuLines runs GNU grep with o's flags on data and returns the numbers
// of the lines it selects and its exit status.
func gnuLines(t *testing.T, gnu, pat string, o MatchOptions, data string) ([]int, int) {
	args := []string{"-n", [...]string{"-G", "-E", "-F", "-P"}[o.Syntax]}
	for _, f := range []struct {
		on   bool
		flag string
	}{{o.IgnoreCase, "-i"}, {o.Word, "-w"}, {o.Line, "-x"}, {o.Invert, "-v"}} {
		if f.on {
			args = append(args, f.flag)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gnu, append(args, "-e", pat)...)
	cmd.Env = []string{"LC_ALL=C.UTF-8"}
	cmd.Stdin = strings.NewReader(data)
	out, err := cmd.Output()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run GNU grep: %v", err)
	}
	if ctx.Err() != nil {
		t.Skipf("GNU grep took over 10 s on %q", pat)
	}
	var nums []int
	for _, l := range bytes.Split(out, []byte("\n")) {
		if i := bytes.IndexByte(l, ':'); i > 0 {
			n, err := strconv.Atoi(string(l[:i]))
			if err != nil {
				t.Fatalf("GNU grep printed %q", l)
			}
			nums = append(nums, n)
		}
	}
	return nums, code
}

// FuzzParseFileName: a .grep/ file name and a padfs grep command line are
// user input. Parsing any of them, and compiling what parses, returns
// options or an error, never a panic.
func FuzzParseFileName(f *testing.F) {
	for _, s := range []string{"needle", "-i -C2 -- needle", "-l -w foo bar", "-m 5 x", "--include=*.go func",
		"-e", "-C", "--", "-- -x", "-P (?i)a", "-E a{1", "--data=x y", "--color=always z", "-A -1 x", "%2Fetc%2f",
		"-rnoiwx -e a -e b", "-z -P a\\nb", "--binary-files=text x", "-f", "--exclude-dir= a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if len(name) > 512 {
			return
		}
		for _, parse := range []func() (*Options, error){
			func() (*Options, error) { o, err := ParseFileName(name); return &o, err },
			func() (*Options, error) { c, err := ParseCommandLine(strings.Fields(name)); return &c.Options, err },
		} {
			o, err := parse()
			if err != nil {
				if strings.Contains(err.Error(), "\n") {
					t.Fatalf("%q: error of more than one line: %q", name, err)
				}
				continue
			}
			if r, err := NewRun(o, nil); err == nil && r == nil {
				t.Fatalf("%q: NewRun returned neither a run nor an error", name)
			}
		}
	})
}

// fuzzOptions are the options FuzzGrepOutputMatchesGNU picks from, a bit
// of its opts argument each.
var fuzzOptions = []string{"-n", "-o", "-c", "-l", "-L", "-i", "-w", "-x", "-v", "-b", "-H", "-A1", "-B1", "-C2",
	"-m2", "-a", "-z", "-h", "--color=always", "-I", "-T", "-Z", "--line-buffered", "-E", "-F", "-P"}

// FuzzGrepOutputMatchesGNU: for any pattern, text (binary and invalid
// UTF-8 too) and set of output options, padfs's grep prints to stdout and
// stderr what GNU grep prints when it reads that text on standard input.
//
//	go test ./grep -run '^$' -fuzz FuzzGrepOutputMatchesGNU -fuzztime 5m
func FuzzGrepOutputMatchesGNU(f *testing.F) {
	text := []byte("foo bar\nFoo_Bar baz\nfoofoo\n\nété café\nx foo y\nlast foo")
	bin := []byte("foo bar\n\xff\xfe foo\nx\x00foo\nlast foo")
	invalid := []byte("foo\nbar \xc3 foo\n\xc3\nlast foo\n")
	for _, s := range []struct {
		pat  string
		opts uint32
	}{
		{"foo", 0}, {"foo", 1 | 2}, {"o", 2 | 1<<9}, {"foo", 4}, {"foo", 8}, {"bar", 16}, {"foo", 32 | 64},
		{"foo", 1<<11 | 1}, {"foo", 1<<12 | 1<<13}, {"foo", 1 << 14}, {"foo", 1 << 15}, {"foo", 1 << 16},
		{"foo", 1<<1 | 1<<6 | 1<<7}, {"foo", 1<<1 | 1<<6 | 1<<7 | 1<<18 | 1}, {"f.o", 1<<1 | 1<<6 | 1<<7 | 1<<16},
		{"foo", 1<<1 | 1<<6 | 1<<7 | 1<<24}, {"foo", 1<<1 | 1<<6 | 1<<7 | 1<<25 | 1<<8 | 1<<13},
		{"", 1 | 1<<19}, {"foo", 1 << 19}, {"foo", 1<<19 | 1<<15}, {"foo", 1<<19 | 1<<2},
		{"", 1<<1 | 1<<6 | 1<<7 | 1}, {"foo", 1<<6 | 1<<7 | 1<<18 | 1}, {"", 1<<6 | 1<<7 | 1<<18},
		{"", 1<<1 | 1<<6 | 1<<7 | 1<<8 | 1<<9 | 1<<12 | 1<<15 | 1<<16 | 1<<18},
		{"foo", 1<<23 | 1<<24}, {"foo", 1<<24 | 1<<25}, {"f.o", 1<<18 | 2}, {"é", 1<<19 | 1}, {"o+", 1<<23 | 2}, {"(?i)FOO", 1 << 25}, {"", 1}, {"x", 1 << 20},
		{`\< `, 1 << 1}, {` \>`, 1<<1 | 1<<5}, {`\<.`, 1<<1 | 1<<18}, {`.\>`, 1<<1 | 1<<6}, {`\(\<\|-\)a`, 1 << 18}, {`\<..`, 1<<1 | 1<<6 | 1<<5},
	} {
		f.Add(s.pat, s.opts, text)
		f.Add(s.pat, s.opts, bin)
		f.Add(s.pat, s.opts, invalid)
	}
	// Boundaries next to an encoding error: glibc reads the byte as the
	// code point of its value (\xc3 a word character, \x80 none).
	for _, pat := range []string{`\b0`, `\ba`, `x\B`, `\bé`, `\<0`, `a\>`} {
		f.Add(pat, uint32(1<<0), []byte("\xc30 1\n\xe9\x80a\nx\xc3\n\xffé\na\xc3\n"))
		f.Add(pat, uint32(1<<6|1<<2), []byte("\xc30 1\n\xe9\x80a\nx\xc3\n\xffé\na\xc3\n"))
	}
	// -w with a boundary on a line with non-ASCII text: a match that is
	// no whole word is not printed.
	f.Add(`\bfoo`, uint32(1<<1|1<<6), []byte("é foo_bar foo\n"))
	f.Add(`foo\b`, uint32(1<<1|1<<6|1<<18), []byte("é xfoo foo\n"))
	// Trailing context after a line GNU cannot print (an encoding error)
	// starts at its buffer's start: the file's first line, or the last
	// line's own buffer when no newline ends the file.
	for _, d := range []string{"\nx\xed", "\nx\xed\n", "a\n\nx\xed\n", "x\na\nb\nx\xed", "a\nx\xed\nb\nx\xed", "x\n\xed\nx"} {
		f.Add("x", uint32(1|1<<11), []byte(d))
		f.Add("x", uint32(1|1<<13), []byte(d))
	}
	// -v of the empty pattern alone selects nothing: GNU exits at once,
	// printing nothing, even with -c (but -L lists the file).
	for _, o := range []uint32{1 << 8, 1<<8 | 1<<2, 1<<8 | 1<<2 | 1<<1 | 1<<18, 1<<8 | 1<<4, 1<<8 | 1<<3, 1<<8 | 1<<7, 1<<8 | 1<<6 | 1<<2} {
		f.Add("", o, []byte("0\n1"))
	}
	// -w -o: after a first match GNU's cut of a shorter one falls short
	// by the search's start (aaaa\|ab\|ab-c finds no ab); -P -w is
	// PCRE's first match that is a whole word (a|ab finds ab).
	for _, s := range []struct {
		pat  string
		opts uint32
		text string
	}{
		{`aaaa\|ab\|ab-c`, 1<<1 | 1<<6, "aaaa ab-cd\nab-cd\n"}, {`a|ab`, 1<<1 | 1<<6 | 1<<25, "ab x\nab\nx ab_ a\n"},
		{`a--\|a-\'`, 1<<1 | 1<<6, "a--x\n"}, {` \|`, 1<<6 | 1<<18, " 0 \n 0\n"}, {`x\|x-y\|x-`, 1<<1 | 1<<6, "x x-yz\n"},
		{`a*|ab`, 1<<1 | 1<<6 | 1<<25, "ab a é\n"}, {"s", 1<<1 | 1<<5 | 1<<6 | 1<<7 | 1<<24, "s\nS\nk\n"}, {"is", 1<<18 | 1<<5 | 1<<6 | 1<<7 | 1<<24, "IS\n"},
	} {
		f.Add(s.pat, s.opts, []byte(s.text))
	}
	// -o and --color print glibc's reading where GNU's dfa reads an ERE
	// otherwise: ^*a is ^a, {0} is "0}", {a is a (the dfa selects).
	for _, pat := range []string{"^*a", "{0}", "x|{a", "^+{1}", "^{0}a", "{", "a$?", "^{1}{1}a", "{1}a", "{0}??", "^+?+", "(^)*", "*{0}*+", "a${1{0}", "|[[:alpha:]]${1{0}"} {
		for _, o := range []uint32{1<<1 | 1<<23, 1<<18 | 1<<23, 1<<1 | 1<<6 | 1<<23, 1<<18 | 1<<6 | 1<<23} {
			f.Add(pat, o|1, []byte("ab\nxab\na^b\n1}a\n0}\nx{a\n{a\n x {y\na{2}\n"))
		}
	}
	gnu, err := exec.LookPath("grep")
	if err != nil {
		f.Skip("GNU grep not installed")
	}
	f.Fuzz(func(t *testing.T, pat string, opts uint32, data []byte) {
		if strings.ContainsAny(pat, "\n\x00") || len(pat) > 100 || len(data) > 4096 {
			return
		}
		var args []string
		for i, o := range fuzzOptions {
			if opts&(1<<i) != 0 {
				args = append(args, o)
			}
		}
		args = append(args, "-e", pat)
		outputMatchesGNU(t, gnu, args, data)
	})
}

// TestReadsNothingMatchesGNU: what GNU grep prints when it reads nothing
// (-m 0, -v of the empty pattern), with options the fuzz target does not
// pick.
func TestReadsNothingMatchesGNU(t *testing.T) {
	gnu, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("GNU grep not installed")
	}
	for _, args := range [][]string{
		{"-m0", "a"}, {"-c", "-m0", "a"}, {"-L", "-m0", "a"}, {"-l", "-m0", "a"}, {"-L", "-m0", "-v", "a"},
		{"-v", "-e", "", "-e", ""}, {"-c", "-v", "-e", "", "-e", "a"}, {"-L", "-v", ""}, {"-c", "-v", "-x", ""},
	} {
		outputMatchesGNU(t, gnu, args, []byte("a\nb\n"))
	}
}

// TestWordListMatchesGNU: two or more patterns, which the fuzz targets
// do not pick: GNU drops repeated ones, runs literal ones as -F (with -w
// an empty pattern is then a whole word between non-word characters; -x
// -w and -x -v have no quirks), others through its regex loop.
func TestWordListMatchesGNU(t *testing.T) {
	gnu, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("GNU grep not installed")
	}
	for _, args := range [][]string{
		{"-w", "-e", " ", "-e", ""}, {"-w", "-E", "-e", " ", "-e", ""}, {"-w", "-F", "-e", " ", "-e", ""},
		{"-w", "-e", " ", "-e", "", "-e", "q*"}, {"-w", "-e", " ", "-e", " "}, {"-w", "-e", ` \|`, "-e", "b"},
		{"-o", "-w", "-e", "a", "-e", "ab"}, {"-o", "-w", "-e", "aaaa", "-e", "ab", "-e", "ab-c"},
		{"-c", "-w", "-e", "a--", "-e", `a-\'`},
		{"-x", "-w", "-o", "-e", "b", "-e", ""}, {"-x", "-v", "-o", "-m1", "-A1", "-e", " ", "-e", ""},
		{"-E", "-w", "-e", "+", "-e", "+"}, {"-E", "-e", "*a", "-e", "x", "-e", "*a"},
	} {
		outputMatchesGNU(t, gnu, args, []byte(" 0\na  b\nab a\naaaa ab-cd\na--x\n"))
	}
	// With -i a literal that folds past ASCII (s: ſ, i: ı, é) keeps
	// GNU's regex matcher (-F's too), whose -x -v context has free
	// matches and whose -x -w -o an empty line more.
	for _, e := range []string{"s", "i", "k", "a", "é", "€"} {
		outputMatchesGNU(t, gnu, []string{"-i", "-x", "-v", "-o", "-m1", "-A1", "-e", e, "-e", ""}, []byte("x\n"+e+"y\n"))
		outputMatchesGNU(t, gnu, []string{"-F", "-i", "-x", "-v", "-o", "-m1", "-A1", "-e", e}, []byte("x\n"+e+"y\n"))
		outputMatchesGNU(t, gnu, []string{"-F", "-i", "-x", "-w", "-o", "-e", e}, []byte(e+"\n"))
	}
}

// TestContextAfterMaxMatchesGNU: under -v, the trailing context after
// -m's last line may hold lines with no match, where GNU's -o and --color
// look for matches without -x's whole-line check (BRE, ERE), with -w's.
func TestContextAfterMaxMatchesGNU(t *testing.T) {
	gnu, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("GNU grep not installed")
	}
	for _, args := range [][]string{
		{"-o", "-x", "-v", "-m1", "-A1", "X"}, {"-o", "-x", "-v", "-m1", "-A1", "-i", "x"},
		{"--color=always", "-x", "-v", "-m1", "-A1", "X"}, {"-o", "-w", "-v", "-m1", "-A1", "X"},
		{"-o", "-x", "-w", "-v", "-m1", "-A1", "X"}, {"-o", "-x", "-v", "-m1", "-A1", "-E", "X|0"},
		{"-o", "-x", "-v", "-m1", "-A1", "-F", "X"}, {"-o", "-x", "-v", "-m1", "-A1", "-P", "X"},
	} {
		for _, data := range []string{"a\nX0\n", "a\nX 0\n", "a\nX 0 X\n", "a\nX\n"} {
			outputMatchesGNU(t, gnu, args, []byte(data))
		}
	}
}

// outputMatchesGNU fails t unless padfs's grep with args prints on data
// what GNU grep prints reading data on standard input.
func outputMatchesGNU(t *testing.T, gnu string, args []string, data []byte) {
	t.Helper()
	c, err := ParseCommandLine(args)
	if err != nil {
		if _, _, code := runGNU(t, gnu, args, data); code != 2 {
			t.Fatalf("grep %q: padfs: %v; GNU grep exits %d", args, err, code)
		}
		return
	}
	var out, errw bytes.Buffer
	// GNU's warnings come first, as padfs grep prints them (its prefix).
	r, err := NewRun(&c.Options, func(msg string) { fmt.Fprintf(&errw, "grep: warning: %s\n", msg) })
	if err != nil {
		return // compile errors: FuzzGrepMatchesGNU
	}
	o := r.NewOutput(c.Filename > 0, &out, &errw) // one operand: names only with -H
	buf := bytes.Clone(data)
	if !r.ReadsNothing() {
		fr, err := r.Scan(context.Background(), buf)
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if _, err := o.File(context.Background(), "(standard input)", buf, fr); err != nil {
			var unsupported *UnsupportedError
			if errors.As(err, &unsupported) {
				return // refused where it would print (-o, --color)
			}
			t.Fatalf("File: %v", err)
		}
	}
	if err := o.Flush(); err != nil {
		t.Fatal(err)
	}
	gout, gerr, _ := runGNU(t, gnu, args, data)
	if !bytes.Equal(out.Bytes(), gout) || !bytes.Equal(errw.Bytes(), gerr) {
		t.Fatalf("grep %q on %q:\npadfs stdout %q\nGNU   stdout %q\npadfs stderr %q\nGNU   stderr %q",
			args, data, out.Bytes(), gout, errw.Bytes(), gerr)
	}
}

// runGNU runs GNU grep with args on data as its standard input.
func runGNU(t *testing.T, gnu string, args []string, data []byte) (stdout, stderr []byte, code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, gnu, args...)
	cmd.Args[0] = "grep" // GNU names itself by argv[0] in diagnostics
	cmd.Env = []string{"LC_ALL=C.UTF-8"}
	// A regular file on standard input, as padfs greps files of known
	// size: -T sizes its numbers by the file's size (a pipe's by the
	// widest number).
	in, err := os.CreateTemp(t.TempDir(), "in")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if _, err := in.Write(data); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	cmd.Stdin = in
	var gout, gerr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &gout, &gerr
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Skipf("GNU grep took over 10 s on %q", args)
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run GNU grep: %v", err)
	}
	return gout.Bytes(), gerr.Bytes(), code
}
