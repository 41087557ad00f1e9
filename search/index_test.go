package search

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/document"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/triseg"
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
	if err := ix.Rebuild(t.Context(), sid, nil); err != nil {
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
				err = ix.Rebuild(t.Context(), sid, nil)
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
	if _, ok := contentTrigrams(blob, false); ok {
		t.Fatalf("%d random bytes are under the cap of %d trigrams", len(blob), maxDocTrigrams)
	}
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Rebuild(t.Context(), sid, nil); err != nil {
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

// TestBinaryFilesIndexBuckets: a binary file's document holds trigram
// buckets (btri), not trigrams, and grep still finds what GNU grep finds
// in it, reading only the files whose terms allow a match.
func TestBinaryFilesIndexBuckets(t *testing.T) {
	st, data := openStore(t)
	bin := []byte("\x7fELF\x00\x01\x02 runtime.MaxHeaderBytes \x00\xff\xfe tail\n")
	r := rand.New(rand.NewPCG(5, 6))
	for range 4000 {
		bin = append(bin, byte(r.IntN(256)))
	}
	files := map[string][]byte{
		"obj.bin":  bin,
		"a.txt":    []byte("MaxHeaderBytes in text\n"),
		"b.txt":    []byte("nothing here\n"),
		"c/d.bin":  []byte("\x00other binary\n"),
		"c/e.text": []byte("maxheaderbytes, folded\n"),
	}
	sid := loadSession(t, st, files)
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Rebuild(t.Context(), sid, nil); err != nil {
		t.Fatal(err)
	}
	if ids, err := ix.be.ids(sid, idQuery{Field: "tri", Term: "hea"}); err != nil || fmt.Sprint(ids) != "[a.txt c/e.text]" {
		t.Errorf("tri:hea matches %v (%v), want the two text files", ids, err)
	}
	if ids, err := ix.be.ids(sid, idQuery{Field: "btri", Term: bucketTerm("hea")}); err != nil || fmt.Sprint(ids) != "[obj.bin]" {
		t.Errorf("btri bucket of hea matches %v (%v), want [obj.bin]", ids, err)
	}
	dir := t.TempDir()
	writeDir(t, dir, files)
	for _, c := range []struct {
		args []string
		cand int
	}{
		{[]string{"-r", "MaxHeaderBytes"}, 3}, // the index is folded
		{[]string{"-ri", "maxheaderbytes"}, 3},
		{[]string{"-rc", "other binary"}, 1},
		{[]string{"-r", "-E", "tail|text"}, 2},
		{[]string{"-r", "absent-pattern"}, 0},
	} {
		want, wcode := gnuGrep(t, dir, c.args)
		got, code, stats := padGrep(t, ix, sid, c.args)
		if byFile(got) != byFile(want) || code != wcode {
			t.Errorf("grep %q: got %q exit %d, GNU grep %q exit %d", c.args, got, code, want, wcode)
		}
		if stats.Scanned || stats.Candidates != c.cand {
			t.Errorf("grep %q: %d candidates (scanned %v), want %d", c.args, stats.Candidates, stats.Scanned, c.cand)
		}
	}
}

// TestCatchUpCreatedAndLinked: a file created, hard-linked and written
// in one stretch of the log (the catch-up asks the index for no other
// names of an inode created in the stretch), and one linked before the
// index was built and written after, are found under every name.
func TestCatchUpCreatedAndLinked(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"old.txt": []byte("old\n")})
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	h, err := st.Header(sid)
	if err != nil {
		t.Fatal(err)
	}
	old, err := st.Lookup(sid, h.Root, "old.txt", mvcc.Latest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Link(sid, old.Ino, h.Root, "old-link.txt"); err != nil {
		t.Fatal(err)
	}
	if err := ix.Rebuild(t.Context(), sid, nil); err != nil {
		t.Fatal(err)
	}
	n, err := st.Create(sid, h.Root, "new.txt", mvcc.Attr{Mode: syscall.S_IFREG | 0o644}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Link(sid, n.Ino, h.Root, "new-link.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteContent(context.Background(), sid, n.Ino, strings.NewReader("needle new\n"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.WriteContent(context.Background(), sid, old.Ino, strings.NewReader("needle old\n"), 0); err != nil {
		t.Fatal(err)
	}
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	if covered, _, _ := ix.Covered(sid); covered == 0 {
		t.Fatal("nothing covered after the catch-up")
	}
	got, code, stats := padGrep(t, ix, sid, []string{"-r", "needle"})
	want := "new-link.txt:needle new\nnew.txt:needle new\nold-link.txt:needle old\nold.txt:needle old\n"
	if byFile(got) != byFile(want) || code != 0 || stats.Candidates != 4 {
		t.Errorf("got %q exit %d, %d candidates; want %q from the index", got, code, stats.Candidates, want)
	}
}

// TestTextFieldMatchesBleve: the ranked-search fields (analyzedFields,
// analyzed by distinct token) count the same terms, with the same
// frequencies and length (BM25's inputs), as a bleve TextField with the
// same analyzer, for a corpus of Go sources, their paths and odd text.
func TestTextFieldMatchesBleve(t *testing.T) {
	files := corpus(t)
	files["odd"] = []byte("Don't STOP: the a an fmt.Println(3.14) foo_bar ÉCOLE école 東京 x\r\ny İstanbul ǅemal ΣΑΣ KELVIN\u212a")
	for _, an := range []struct {
		name string
		an   analysis.Analyzer
	}{{"code", codeAn}, {"whole", wholeAn}, {"pathgram", pathGramAn}} {
		if _, ok := distinctAnalyzer(an.an); !ok {
			t.Fatalf("%s analyzer: not analyzed by distinct token", an.name)
		}
		for p, data := range files {
			for _, in := range [][]byte{data, []byte(p), declText(p, data)} {
				want := document.NewTextFieldCustom("text", nil, append([]byte(nil), in...), textOpts, an.an)
				want.Analyze()
				got := &analyzedField{name: "text", data: append([]byte(nil), in...), an: an.an}
				got.Analyze()
				freqs := got.AnalyzedTokenFrequencies()
				if got.AnalyzedLength() != want.AnalyzedLength() || len(freqs) != len(want.AnalyzedTokenFrequencies()) {
					t.Fatalf("%s, %s: %d tokens, %d terms; bleve %d, %d", an.name, p, got.AnalyzedLength(), len(freqs),
						want.AnalyzedLength(), len(want.AnalyzedTokenFrequencies()))
				}
				for term, wf := range want.AnalyzedTokenFrequencies() {
					gf := freqs[term]
					if gf == nil || gf.Frequency() != wf.Frequency() || len(gf.Locations) != 0 {
						t.Fatalf("%s, %s: term %q: got %+v, bleve frequency %d", an.name, p, term, gf, wf.Frequency())
					}
				}
			}
		}
	}
}

// Close ends the index's Watch of the store: a store that outlives its
// indexes (one per forwarded command, say) does not keep calling them.
func TestCloseUnwatches(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a": []byte("x\n")})
	ix, err := OpenWith(data, st, Options{Background: true, InProcess: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	ix.mu.Lock()
	clear(ix.dirty)
	ix.mu.Unlock()
	putFile(t, st, sid, "b", []byte("y\n")) // watchers run on this goroutine
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.dirty[sid] {
		t.Error("a commit after Close still reached the closed index")
	}
}

// Rebuild stops when its context ends (the control socket cancels it when
// the client goes away): here after the first document. The session's
// index is left empty, and a catch-up builds it again.
func TestRebuildCancelled(t *testing.T) {
	st, data := openStore(t)
	sid := loadSession(t, st, map[string][]byte{"a": []byte("one\n"), "b": []byte("two\n"), "c": []byte("three\n")})
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ctx, cancel := context.WithCancel(t.Context())
	calls := 0
	err = ix.Rebuild(ctx, sid, func(done, total int64) {
		calls++
		cancel()
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Fatalf("Rebuild cancelled after its first document: %v after %d documents, want context.Canceled after 1", err, calls)
	}
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	if out, code, _ := padGrep(t, ix, sid, []string{"-r", "t"}); out != "b:two\nc:three\n" || code != 0 {
		t.Errorf("grep after the catch-up: %q exit %d", out, code)
	}
}

// bucketTerm is the btri term (a bucket, 2 bytes) of trigram t.
func bucketTerm(t string) string {
	b := triseg.Bucket(triseg.TriKey(t))
	return string([]byte{byte(b >> 8), byte(b)})
}

// TestLaggingGrepAsksInodesInBatches: while the index lags, grep reads
// what the log's tail touched and asks the index for every other name of
// the inodes it changed. 2,100 files each with a second link, rewritten
// after the index was built, are found under both names (the second only
// through the index) in 1 trigram query and 3 inode queries: one query
// per inode had cost an untar's grep 11 s.
func TestLaggingGrepAsksInodesInBatches(t *testing.T) {
	const n = 2100
	st, data := openStore(t)
	h, err := st.CreateSession("lag", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	inos := make([]mvcc.Ino, n)
	for i := range inos {
		f, err := st.Create(h.ID, h.Root, fmt.Sprintf("f%04d", i), mvcc.Attr{Mode: syscall.S_IFREG | 0o644}, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Link(h.ID, f.Ino, h.Root, fmt.Sprintf("g%04d", i)); err != nil {
			t.Fatal(err)
		}
		inos[i] = f.Ino
	}
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Rebuild(t.Context(), h.ID, nil); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for i, ino := range inos {
		if _, err := st.WriteContent(t.Context(), h.ID, ino, strings.NewReader(fmt.Sprintf("needle %d\n", i)), 0); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&want, "f%04d:needle %d\ng%04d:needle %d\n", i, i, i, i)
	}
	got, code, stats := padGrep(t, ix, h.ID, []string{"-r", "needle"})
	if byFile(got) != byFile(want.String()) || code != 0 {
		t.Fatalf("grep -r needle: exit %d, %d lines; want %d lines", code, strings.Count(got, "\n"), 2*n)
	}
	if !stats.Degraded || stats.IndexQueries != 4 {
		t.Errorf("degraded %v, %d index queries; want a lagging grep asking 4", stats.Degraded, stats.IndexQueries)
	}
}
