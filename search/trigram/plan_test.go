package trigram_test

import (
	"testing"

	"github.com/padfs/padfs/grep"
)

// TestPlanner checks trigram queries of a few patterns.
func TestPlanner(t *testing.T) {
	for _, c := range []struct {
		pat  string
		syn  grep.Syntax
		fold bool
		want string
	}{
		{"hello", grep.Basic, false, `"ell" "hel" "llo"`},
		{"a.*b", grep.Basic, false, "+"},
		{"foo\\|bar", grep.Basic, false, `("bar"|"foo")`},
		{"Hello", grep.Basic, true, `"ell" "hel" "llo"`},
		{"func (Index|Last)Byte", grep.Extended, false, ""},
		{"[0-9]+", grep.Extended, false, "+"},
		{"ab[cd]ef", grep.Basic, false, ""},
		{"HeLLo", grep.Basic, false, `"HeL" "LLo" "eLL"`},
	} {
		m, err := grep.Compile([]string{c.pat}, grep.MatchOptions{Syntax: c.syn, IgnoreCase: c.fold}, nil)
		if err != nil {
			t.Fatalf("%q: %v", c.pat, err)
		}
		got := m.Query.String()
		if c.want == "" {
			if got == "+" || got == "-" {
				t.Errorf("%q: no trigrams planned (%s)", c.pat, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("%q: plan %s, want %s", c.pat, got, c.want)
		}
		// The index holds folded trigrams only: its query is folded
		// whether or not the pattern is.
		if c.pat == "HeLLo" {
			if got := m.IndexQuery.String(); got != `"ell" "hel" "llo"` {
				t.Errorf("%q: index query %s, want the folded trigrams", c.pat, got)
			}
		}
	}
}
