package search

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// TestIndexSurvivesReopen: the covered sequence number and the documents
// persist across Close/Open, and a reopened index is used (no scan).
func TestIndexSurvivesReopen(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a": []byte("hello world\n"), "b/c": []byte("xyz\n")})
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Rebuild(sid, nil); err != nil {
		t.Fatal(err)
	}
	before, _, _ := ix.Covered(sid)
	ix.Close()
	if ix, err = OpenWith(data, st, Options{}); err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	after, _, err := ix.Covered(sid)
	if err != nil || before == 0 || after != before {
		t.Fatalf("covered seq %d before close, %d after reopen (%v)", before, after, err)
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-rn", "hello"})
	if out != "a:1:hello world\n" || code != 0 || stats.Scanned || stats.Candidates != 1 {
		t.Errorf("got %q exit %d %+v", out, code, stats)
	}
}

// TestPlanner checks trigram queries of a few patterns.
func TestPlanner(t *testing.T) {
	for _, c := range []struct {
		pat  string
		syn  Syntax
		fold bool
		want string
	}{
		{"hello", Basic, false, `"ell" "hel" "llo"`},
		{"a.*b", Basic, false, "+"},
		{"foo\\|bar", Basic, false, `("bar"|"foo")`},
		{"Hello", Basic, true, `"ell" "hel" "llo"`},
		{"func (Index|Last)Byte", Extended, false, ""},
		{"[0-9]+", Extended, false, "+"},
		{"ab[cd]ef", Basic, false, ""},
		{"HeLLo", Basic, false, `"HeL" "LLo" "eLL"`},
	} {
		m, err := Compile([]string{c.pat}, MatchOptions{Syntax: c.syn, IgnoreCase: c.fold}, nil)
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
	_ = mvcc.Latest
}

// TestRebuildAndDropRaceCatchUp: rebuilds and drops of a session's index
// run while the background indexer follows new commits and grep runs. No
// call fails, every grep answer is exact whatever state the index is in,
// and the index ends up covering the last commit.
func TestRebuildAndDropRaceCatchUp(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"f000": []byte("needle 0\n")})
	ix, err := OpenWith(data, st, Options{Background: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	errc := make(chan error, 1)
	stop := make(chan struct{})
	go func() {
		var errs []error
		for i := 0; ; i++ {
			select {
			case <-stop:
				errc <- errors.Join(errs...)
				return
			default:
			}
			if i%3 == 2 {
				err = ix.DropSession(sid)
			} else {
				err = ix.Rebuild(sid, nil)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}()
	want := "f000:1:needle 0\n"
	for i := 1; i <= 40; i++ {
		name := fmt.Sprintf("f%03d", i)
		putFile(t, st, sid, name, []byte(fmt.Sprintf("hay\nneedle %d\n", i)))
		want += fmt.Sprintf("%s:2:needle %d\n", name, i)
		out, code, _ := padGrep(t, ix, sid, []string{"-rn", "needle"})
		if out != want || code != 0 {
			t.Fatalf("after %d writes: exit %d, output differs:\n%s", i, code, diffLines(out, want))
		}
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatalf("rebuild/drop racing the indexer failed: %v", err)
	}
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	var last uint64
	if err := st.View(func(tx *mvcc.ReadTx) error {
		last, _, err = tx.LastEvent(sid)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if seq, _, err := ix.Covered(sid); err != nil || seq != last {
		t.Fatalf("index covers seq %d, last commit is %d (%v)", seq, last, err)
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-rn", "needle"})
	if out != want || code != 0 || stats.Scanned || stats.Degraded {
		t.Fatalf("after catching up: exit %d %+v, output differs:\n%s", code, stats, diffLines(out, want))
	}
}

// TestHighEntropyFileUnindexedButFound: a file of random bytes has
// millions of distinct trigrams; the index leaves it out (marked
// "unindexed") instead of spending seconds on it, and grep still finds a
// needle in it, since unindexed files are always read.
func TestHighEntropyFileUnindexedButFound(t *testing.T) {
	st, data := openStore(t)
	blob := make([]byte, 2<<20)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range blob {
		blob[i] = byte(r.IntN(256))
	}
	copy(blob[1<<20:], "\nneedle in noise\n")
	sid := loadSession(t, st, map[string][]byte{"noise.bin": blob, "a.txt": []byte("a needle\n")})
	if _, ok := contentTrigrams(blob); ok {
		t.Fatalf("%d random bytes are under the cap of %d trigrams", len(blob), maxDocTrigrams)
	}
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Rebuild(sid, nil); err != nil {
		t.Fatal(err)
	}
	ids, err := ix.be.ids(sid, idQuery{Field: "unindexed", Term: "y"})
	if err != nil || len(ids) != 1 || ids[0] != "noise.bin" {
		t.Fatalf("unindexed documents %v (%v), want [noise.bin]", ids, err)
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-rc", "needle"})
	if code != 0 || out != "a.txt:1\nnoise.bin:1\n" || stats.Scanned {
		t.Errorf("grep -rc needle: %q exit %d %+v", out, code, stats)
	}
}

// TestCutShortBuildStartsOver: a build stopped by Close records no covered
// sequence number; the next catch-up starts from an empty index, so a
// document of a file deleted meanwhile does not linger.
func TestCutShortBuildStartsOver(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a.txt": []byte("kept needle\n")})
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// What a cut-short build leaves: documents, no covered seq. One of
	// them is for a file that no longer exists.
	if _, err := ix.be.begin(sid, 1, batchBytes, batchDocs); err != nil {
		t.Fatal(err)
	}
	if err := ix.be.doc(sid, "ghost.txt", 99, []byte("ghost needle\n")); err != nil {
		t.Fatal(err)
	}
	if err := ix.be.flush(sid); err != nil {
		t.Fatal(err)
	}
	ix.be.abort(sid)
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	ids, err := ix.be.ids(sid, idQuery{})
	if err != nil || len(ids) != 1 || ids[0] != "a.txt" {
		t.Fatalf("documents after catching up: %v (%v), want [a.txt]", ids, err)
	}
}
