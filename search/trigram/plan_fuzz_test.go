package trigram_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/padfs/padfs/grep"
	"github.com/padfs/padfs/search/trigram"
)

// FuzzPlanNeverHidesAMatch: a pattern given by a user (any bytes, any
// syntax, -i, -w, -x) either compiles or fails with a typed error, never a
// panic; and when its matcher finds a line in data, the index query planned
// from it accepts data's folded trigrams, and its query over the raw bytes
// (MayMatch, for files the index did not narrow) accepts data. So the
// index and that filter can only narrow the files grep reads, never drop
// one that matches.
func FuzzPlanNeverHidesAMatch(f *testing.F) {
	for _, s := range []struct {
		pat, data string
		syn       uint8
		flags     uint8
	}{
		{"MaxHeaderBytes", "x := MaxHeaderBytes\n", 0, 0},
		{"maxheaderbytes", "x := MaxHeaderBytes\n", 0, 1},
		{`func \(\*Reader\) Read[A-Z][a-z]+\(`, "func (*Reader) ReadRune(\n", 1, 0},
		{`^[[:space:]]+[a-z]{2}[0-9]{2}[[:space:]]*$`, "\t ab12 \n", 1, 0},
		{`[a-z]+[0-9]+_[a-z]+`, "abc1_def\n", 1, 0},
		{"a.c", "ǅa\u212Ac\n", 0, 1},
		{`\(ab\)*c`, "ababc\n", 0, 0},
		{"foo|bar", "xx bar\n", 1, 2},
		{"ſ", "S\n", 0, 1},
		{"x", "x", 2, 4},
		{`(?i)straße`, "STRASSE straße\n", 3, 0},
		{"\xff\xfe", "\xff\xfe\n", 2, 0},
		{`(?i)(foo|xyz)`, "foo bar\n", 3, 0},
	} {
		f.Add(s.pat, []byte(s.data), s.syn, s.flags)
	}
	f.Fuzz(func(t *testing.T, pat string, data []byte, syn, flags uint8) {
		if len(pat) > 256 || len(data) > 8192 {
			return
		}
		o := grep.MatchOptions{Syntax: grep.Syntax(syn % 4), IgnoreCase: flags&1 != 0, Word: flags&2 != 0, Line: flags&4 != 0}
		m, err := grep.Compile([]string{pat}, o, nil)
		if err != nil {
			var ue *grep.UnsupportedError
			var se *grep.SyntaxError
			if !errors.As(err, &ue) && !errors.As(err, &se) {
				t.Fatalf("Compile(%q, %+v): untyped error %T: %v", pat, o, err, err)
			}
			return
		}
		res, err := m.Grep(data, grep.ModeCount)
		if err != nil || res.Count == 0 {
			return
		}
		folded := trigram.Fold(nil, data)
		has := func(tri string) bool { return bytes.Contains(folded, []byte(tri)) }
		if !m.IndexQuery.Eval(has) {
			t.Fatalf("pattern %q (%+v) matches %q, but its index query %v rejects the file", pat, o, data, m.IndexQuery)
		}
		if !m.MayMatch(data) {
			t.Fatalf("pattern %q (%+v) matches %q, but its query %v rejects the file", pat, o, data, m.Query)
		}
	})
}
