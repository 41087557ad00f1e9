package grep

import (
	"slices"
	"strings"
	"testing"
)

// TestLineTrigramWithIgnoreCase: with -i the line prefilter only uses a
// trigram without i, k or s (whose case classes hold KELVIN SIGN, LONG S,
// DOTLESS I), so lines spelled with those still match, in a file that
// is not ASCII. (GNU grep -i matches DOTLESS I for i, but not KELVIN SIGN
// for k: checked against grep 3.8 in C.UTF-8.)
func TestLineTrigramWithIgnoreCase(t *testing.T) {
	m, err := Compile([]string{"mask"}, MatchOptions{IgnoreCase: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.lineNeedle != "" {
		t.Errorf("mask: line trigram %q, want none (every trigram holds s or k)", m.lineNeedle)
	}
	m, err = Compile([]string{"header_kind"}, MatchOptions{IgnoreCase: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range m.lineNeedle {
		if c == 'i' || c == 'k' || c == 's' {
			t.Fatalf("line trigram %q holds %q", m.lineNeedle, c)
		}
	}
	data := []byte("é\nHEADER_\u212AIND\nheader_kınd\nnothing\nHeader_Kind\n")
	res, err := m.Grep(data, ModeLines)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, l := range res.Lines {
		got = append(got, l.Num)
	}
	if want := []int{3, 5}; !slices.Equal(got, want) {
		t.Errorf("matched lines %v, want %v", got, want)
	}
}

// TestMustLiteral: without a trigram to look for, a literal every match
// requires still finds the candidate lines.
func TestMustLiteral(t *testing.T) {
	for _, c := range []struct {
		pat  string
		syn  Syntax
		want string
	}{
		{`[0-9]+\.[0-9]+`, Extended, "."},
		{`[a-z]+[0-9]+_[a-z]+`, Extended, "_"},
		{`x[0-9]Q[0-9]`, Extended, "Q"}, // capitals look rarer than x
		{`(ab|cd)[0-9]`, Extended, ""},  // alternation: neither is required
		{`a?[0-9]`, Extended, ""},
		{`(=[0-9])+`, Extended, "="},
	} {
		m, err := Compile([]string{c.pat}, MatchOptions{Syntax: c.syn}, nil)
		if err != nil {
			t.Fatalf("%q: %v", c.pat, err)
		}
		if m.lineNeedle != c.want {
			t.Errorf("%q: line needle %q, want %q", c.pat, m.lineNeedle, c.want)
		}
	}
}

// TestUnsupportedAndInvalid: back-references are refused naming the
// construct; malformed patterns get GNU's message.
func TestUnsupportedAndInvalid(t *testing.T) {
	for _, c := range []struct {
		pat  string
		syn  Syntax
		want string
	}{
		{`\(a\)\1`, Basic, "back-reference \\1"},
		{`(a)\2`, Extended, "back-reference \\2"},
		{`a{2000}`, Extended, "repetition count"},
		{`a\{1`, Basic, "Unmatched \\{"},
		{`[a`, Basic, "Unmatched ["},
		{`a\`, Basic, "Trailing backslash"},
		{`(`, Extended, "Unmatched ( or \\("},
		{`[[:foo:]]`, Basic, "Invalid character class name"},
		{`[z-a]`, Basic, "Invalid range end"},
	} {
		_, err := Compile([]string{c.pat}, MatchOptions{Syntax: c.syn}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want it to name %q", c.pat, err, c.want)
		}
	}
}
