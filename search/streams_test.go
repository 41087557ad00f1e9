package search

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/trigram"
)

// workerBackend starts a real index worker (this test binary, re-executed
// at SCHED_IDLE as a mount does) over a fresh index directory.
func workerBackend(t *testing.T) *remoteBackend {
	t.Helper()
	rb := newRemoteBackend(t.TempDir(), slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), nil)
	t.Cleanup(func() { rb.close() })
	return rb
}

// holding lists the documents of sid's index whose folded content holds
// lit (at least 3 bytes, lower case): grep's candidates for it.
func holding(t *testing.T, be backend, sid mvcc.SessionID, lit string) []string {
	t.Helper()
	var tris []string
	for i := 0; i+3 <= len(lit); i++ {
		tris = append(tris, lit[i:i+3])
	}
	ids, err := be.ids(sid, idQuery{Tri: &trigram.Query{Op: trigram.And, Trigram: tris}})
	if err != nil {
		t.Fatalf("ids %q: %v", lit, err)
	}
	sort.Strings(ids)
	return ids
}

// randomText is n bytes of random words: tens of thousands of distinct
// trigrams, slow for bleve to build a segment of.
func randomText(r *rand.Rand, n int) []byte {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
		if i%9 == 8 {
			b[i] = ' '
		}
	}
	return b
}

// TestStreamsKeepOrderOfAnID: within one run of writes to the real
// worker, the operations on one document id land in the order given,
// whichever batches they fall in: a document written twice keeps its
// second version, and a deletion followed by the document again leaves
// the document. The batch of the first operations is slow to build
// (large random files), the next one fast: two batches that commit at
// once land in the wrong order. On the old batcher (one sequence of
// batches, two committed at once, landing in any order) the index kept
// x's first version and lost y.
func TestStreamsKeepOrderOfAnID(t *testing.T) {
	rb := workerBackend(t)
	sid := mvcc.SessionID{1}
	const perBatch = 16
	if _, err := rb.begin(sid, 2, 1<<40, perBatch); err != nil {
		t.Fatal(err)
	}
	if err := rb.doc(sid, "y", 2, []byte("-y1-\n")); err != nil {
		t.Fatal(err)
	}
	if err := rb.finish(sid, 1, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := rb.begin(sid, 2, 1<<40, perBatch); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	send := func(path string, data []byte) {
		t.Helper()
		if err := rb.doc(sid, path, 9, data); err != nil {
			t.Fatal(err)
		}
	}
	send("x", []byte("-x1-\n"))
	if err := rb.del(sid, "y"); err != nil {
		t.Fatal(err)
	}
	for i := range perBatch - 2 {
		send(fmt.Sprintf("big/%03d", i), randomText(r, 200<<10))
	}
	send("x", []byte("-x2-\n"))
	send("y", []byte("-y2-\n"))
	for i := range 4 * perBatch {
		send(fmt.Sprintf("small/%03d", i), []byte("small\n"))
	}
	if err := rb.finish(sid, 2, 2); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		lit  string
		want []string
	}{{"-x1-", nil}, {"-x2-", []string{"x"}}, {"-y1-", nil}, {"-y2-", []string{"y"}}} {
		if got := holding(t, rb, sid, c.lit); !slices.Equal(got, c.want) {
			t.Errorf("documents holding %q: %q, want %q", c.lit, got, c.want)
		}
	}
}

// TestStreamsRecordCoveredLast: the covered position of a run is
// recorded only once every stream's batches are in: all of them committed
// (flush) leaves the old position, finish records the new one with every
// document in, and a worker killed before its run finished comes back
// with the position of the last finished run.
func TestStreamsRecordCoveredLast(t *testing.T) {
	rb := workerBackend(t)
	sid := mvcc.SessionID{2}
	run := func(prefix string, n int) {
		t.Helper()
		if _, err := rb.begin(sid, 2, 1<<40, 16); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			if err := rb.doc(sid, fmt.Sprintf("%s%03d", prefix, i), 3, []byte(fmt.Sprintf("q%sq %d\n", prefix, i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := rb.flush(sid); err != nil {
			t.Fatal(err)
		}
	}
	pos := func() uint64 {
		t.Helper()
		w, err := rb.get(sid)
		if err != nil {
			t.Fatal(err)
		}
		w.setPos(sid, nil) // ask the worker, not the mount's cache
		p, err := rb.position(sid)
		if err != nil {
			t.Fatal(err)
		}
		return p.Seq
	}
	run("a", 200)
	if err := rb.finish(sid, 5, 5); err != nil {
		t.Fatal(err)
	}
	run("b", 300)
	if got := pos(); got != 5 {
		t.Fatalf("every batch of the run in but not finished: covered %d, want 5", got)
	}
	if err := rb.finish(sid, 9, 9); err != nil {
		t.Fatal(err)
	}
	if got := pos(); got != 9 {
		t.Fatalf("run finished: covered %d, want 9", got)
	}
	if got := len(holding(t, rb, sid, "qbq")); got != 300 {
		t.Fatalf("run finished: %d documents of it, want 300", got)
	}
	run("c", 100)
	w, err := rb.get(sid)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(w.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w.exited
	for i := 0; ; i++ {
		if nw, err := rb.get(sid); err == nil && nw != w {
			break
		}
		if i > 12000 {
			t.Fatal("no new worker")
		}
		waitABit()
	}
	if got := pos(); got != 9 {
		t.Fatalf("worker killed in a run: covered %d, want 9 (the last finished run)", got)
	}
}

// TestGrepExactDuringCatchUp: while the real worker catches up with
// thousands of writes (several catch-ups, both streams), and while files
// are rewritten, deleted and renamed under it, every grep prints exactly
// what a scan of the tree prints.
func TestGrepExactDuringCatchUp(t *testing.T) {
	st, data := openStore(t)
	model := map[string]string{"README": "start\n"}
	sid := loadSession(t, st, map[string][]byte{"README": []byte("start\n")})
	ix, err := OpenWith(data, st, Options{Background: true, settleQuiet: 50e6, settleMax: 200e6})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	waitCovered(t, ix, st, sid)
	r := rand.New(rand.NewPCG(3, 4))
	put := func(p, s string) {
		putFile(t, st, sid, p, []byte(s))
		model[p] = s
	}
	body := func(i int) string {
		s := string(randomText(r, 1000+r.IntN(3000)))
		if i%7 == 0 {
			s += fmt.Sprintf("\nthe needle %d\n", i)
		}
		return s + "\n"
	}
	want := func() string {
		var ps []string
		for p := range model {
			ps = append(ps, p)
		}
		sort.Strings(ps)
		var b strings.Builder
		for _, p := range ps {
			for n, line := range strings.SplitAfter(model[p], "\n") {
				if strings.Contains(line, "needle") {
					fmt.Fprintf(&b, "%s:%d:%s", p, n+1, line)
				}
			}
		}
		return b.String()
	}
	lagging := 0
	check := func(when string) {
		t.Helper()
		seq, _, _ := ix.Covered(sid)
		if seq < lastSeq(t, st, sid) {
			lagging++
		}
		out, code, _ := padGrep(t, ix, sid, []string{"-rn", "needle", "."})
		out = strings.ReplaceAll(out, "./", "")
		if w := want(); out != w || (code != 0) != (w == "") {
			t.Fatalf("%s: exit %d, output differs:\n%s", when, code, diffLines(out, w))
		}
	}
	for i := range 1500 {
		put(fmt.Sprintf("d%02d/f%04d.txt", i%40, i), body(i))
		if i%250 == 249 {
			check(fmt.Sprintf("after %d files", i+1))
		}
	}
	for round := range 4 {
		for i := round; i < 1500; i += 11 {
			p := fmt.Sprintf("d%02d/f%04d.txt", i%40, i)
			if _, ok := model[p]; !ok {
				continue
			}
			switch i % 3 {
			case 0:
				put(p, body(i+round))
			case 1:
				put(p, fmt.Sprintf("rewritten needle %d %d\n", i, round))
			default:
				h, _ := st.Header(sid)
				dir, err := st.Lookup(sid, h.Root, p[:3], mvcc.Latest)
				if err != nil {
					t.Fatal(err)
				}
				if err := st.Remove(sid, dir.Ino, p[4:], false); err != nil {
					t.Fatalf("unlink %s: %v", p, err)
				}
				delete(model, p)
			}
		}
		if round == 1 {
			// A directory renamed: its documents go, and come back by
			// their new names.
			h, _ := st.Header(sid)
			if err := st.Rename(sid, h.Root, "d05", h.Root, "moved05", 0); err != nil {
				t.Fatal(err)
			}
			for p, s := range model {
				if rest, ok := strings.CutPrefix(p, "d05/"); ok {
					delete(model, p)
					model["moved05/"+rest] = s
				}
			}
		}
		check(fmt.Sprintf("after round %d of rewrites", round))
	}
	waitCovered(t, ix, st, sid)
	check("caught up")
	if lagging == 0 {
		t.Fatal("every grep ran with the index caught up: nothing tested during a catch-up")
	}
}
