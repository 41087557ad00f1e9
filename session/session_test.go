package session

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/rawscan"
	"github.com/padfs/padfs/mvcc"
)

func openTest(t *testing.T) (*Store, *Session) {
	t.Helper()
	st, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := st.Create("t")
	if err != nil {
		t.Fatal(err)
	}
	return st, p
}

func TestReadAbsentIsNotEmpty(t *testing.T) {
	_, p := openTest(t)
	if err := p.Write(context.Background(), "/empty.txt", ""); err != nil {
		t.Fatal(err)
	}
	s, ok, err := p.Read("empty.txt")
	if s != "" || !ok || err != nil {
		t.Fatalf("empty file: %q %v %v", s, ok, err)
	}
	for _, missing := range []string{"nope.txt", "no/such/dir/f", "empty.txt/below"} {
		if s, ok, err := p.Read(missing); s != "" || ok || err != nil {
			t.Fatalf("absent %s: %q %v %v", missing, s, ok, err)
		}
	}
	p.Write(context.Background(), "d/x", "1")
	if _, _, err := p.Read("d"); !errors.Is(err, mvcc.ErrIsDir) {
		t.Fatalf("read of a directory: %v", err)
	}
	if err := p.Write(context.Background(), "d", "x"); !errors.Is(err, mvcc.ErrInvalid) {
		t.Fatalf("write over a directory: %v", err)
	}
	if err := p.Write(context.Background(), "d/x/y", "x"); !errors.Is(err, mvcc.ErrNotDir) {
		t.Fatalf("write below a file: %v", err)
	}
	if err := p.Write(context.Background(), "../../etc/passwd", "root"); err != nil {
		t.Fatal(err) // ".." cannot leave the root: this is etc/passwd in the session
	}
	if s, ok, _ := p.Read("etc/passwd"); !ok || s != "root" {
		t.Fatalf("cleaned path: %q %v", s, ok)
	}
	if err := p.Write(context.Background(), "a/.asof/x", "x"); !errors.Is(err, mvcc.ErrInvalid) {
		t.Fatalf("reserved name: %v", err)
	}
}

func TestLsGrepForgetAsOf(t *testing.T) {
	st, p := openTest(t)
	p.Write(context.Background(), "src/main.go", "package main\n\nfunc main() {}\n")
	p.Write(context.Background(), "src/util/u.go", "package util\n")
	p.Write(context.Background(), "README", "main docs\n")
	p.Write(context.Background(), "bin/blob", "main\x00binary")
	if got, _ := p.Ls("src/"); strings.Join(got, ",") != "src/main.go,src/util/u.go" {
		t.Fatalf("Ls(src/) = %v", got)
	}
	if got, _ := p.Ls(""); len(got) != 4 {
		t.Fatalf("Ls() = %v", got)
	}
	hits, err := p.Grep(context.Background(), `\bmain\b`, 0)
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, h := range hits {
		hs = append(hs, h.Path+":"+h.Text)
	}
	if strings.Join(hs, "|") != "README:main docs|src/main.go:package main|src/main.go:func main() {}" {
		t.Fatalf("Grep = %v", hs)
	}
	if hits, _ := p.Grep(context.Background(), "main", 2); len(hits) != 2 {
		t.Fatalf("Grep k=2: %d hits", len(hits))
	}
	if _, err := p.Grep(context.Background(), "(", 1); !errors.Is(err, mvcc.ErrInvalid) {
		t.Fatalf("bad pattern: %v", err)
	}
	before, _ := st.Now()
	if err := p.Forget(); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(context.Background(), "x", "y"); !errors.Is(err, mvcc.ErrForgotten) {
		t.Fatalf("write after forget: %v", err)
	}
	again, err := st.Lookup(p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if s, ok, err := again.AsOf(before).Read("README"); !ok || err != nil || s != "main docs\n" {
		t.Fatalf("as-of read of a forgotten session: %q %v %v", s, ok, err)
	}
	f, err := again.AsOf(before).Fork(context.Background(), "revived")
	if err != nil {
		t.Fatal(err)
	}
	if s, ok, _ := f.Read("src/util/u.go"); !ok || s != "package util\n" {
		t.Fatalf("fork of a forgotten session's past: %q", s)
	}
}

func TestWriteUnifiedPatch(t *testing.T) {
	st, p := openTest(t)
	p.Write(context.Background(), "keep.txt", "a\nb\nc\n")
	p.Write(context.Background(), "mod.txt", "one\ntwo\nthree\n")
	p.Write(context.Background(), "gone.txt", "bye\n")
	p.Write(context.Background(), "bin.dat", "\x00\x01")
	p.Write(context.Background(), "old-name.txt", "same\n")
	from, _ := st.Now()
	p.Write(context.Background(), "mod.txt", "one\n2\nthree\n")
	p.Write(context.Background(), "new.txt", "hello\n")
	p.Write(context.Background(), "bin.dat", "\x00\x02")
	sid := p.SID()
	h := p.Header()
	if err := st.MVCC().Remove(sid, h.Root, "gone.txt", false); err != nil {
		t.Fatal(err)
	}
	if err := st.MVCC().Rename(sid, h.Root, "old-name.txt", h.Root, "new-name.txt", 0); err != nil {
		t.Fatal(err)
	}
	to, _ := st.Now()
	ch, err := st.MVCC().Diff(t.Context(), sid, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var status []string
	for _, c := range ch {
		status = append(status, StatusLine(c))
	}
	if got := strings.Join(status, "\n"); got != "M\tbin.dat\nD\tgone.txt\nM\tmod.txt\nR\told-name.txt\tnew-name.txt\nA\tnew.txt" {
		t.Fatalf("status:\n%s", got)
	}
	var b bytes.Buffer
	if lost, err := WriteUnified(context.Background(), &b, st.MVCC(), sid, to, ch); err != nil || len(lost) != 0 {
		t.Fatal(lost, err)
	}
	want := `diff --git a/bin.dat b/bin.dat
index bdc955b7b2e610ad5a72302b139a2e6cb325519a..8835708590a9afa236e1bbad18df9d23de82ccd3 100644
GIT binary patch
literal 2
Nc${Kj0t5g6|Nj6400RI3

literal 2
Nc${Kj1Oxy8|Nj6300IC2

diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index b023018cabc396e7692c70bbf5784a93d3f738ab..0000000000000000000000000000000000000000
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/mod.txt b/mod.txt
index 4cb29ea38f70d7c61b2a3a25b02e3bdf44905402..f04eb265ebd74fba2cddf0a6adf2a6a7f81c87aa 100644
--- a/mod.txt
+++ b/mod.txt
@@ -1,3 +1,3 @@
 one
-two
+2
 three
diff --git a/old-name.txt b/new-name.txt
similarity index 100%
rename from old-name.txt
rename to new-name.txt
diff --git a/new.txt b/new.txt
new file mode 100644
index 0000000000000000000000000000000000000000..ce013625030ba8dba906f756967f9e9ca394464a
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
`
	if b.String() != want {
		t.Fatalf("unified:\n%s\nwant:\n%s", b.String(), want)
	}
}

// The index is part of the data directory: purge and redaction leave no
// byte there either.
func TestPurgeAndRedactReachTheIndex(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const marker, needle = "padfsapimarkerqzx", "padfsapineedlewvy"
	gone, _ := st.Create("gone")
	gone.Write(context.Background(), "a.txt", "alpha "+marker+"\n")
	red, _ := st.Create("red")
	red.Write(context.Background(), "b.txt", "beta "+needle+"\n")
	red.Write(context.Background(), "c.txt", "unrelated\n")
	for _, p := range []*Session{gone, red} {
		if err := st.ix.CatchUp(p.SID()); err != nil {
			t.Fatal(err)
		}
	}
	// The index holds the words in compressed form (not findable as raw
	// bytes), so its part is checked through its directory and its terms.
	for _, m := range []string{marker, needle} {
		if len(rawscan.Hits(t, dir, m)) == 0 {
			t.Fatalf("%s is not on disk: the test would prove nothing", m)
		}
	}
	goneIndex := filepath.Join(dir, "index", gone.ID())
	if _, err := os.Stat(goneIndex); err != nil {
		t.Fatalf("no index for the session: %v", err)
	}
	if hits, _ := red.Search(context.Background(), needle, 5); len(hits) != 1 {
		t.Fatalf("Search(needle) before: %+v", hits)
	}
	if hits, err := red.Search(context.Background(), "beta", 5); err != nil || len(hits) != 1 || hits[0].Path != "b.txt" {
		t.Fatalf("Search: %+v %v", hits, err)
	}
	r, err := st.PlanPurge(gone.ID())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Purge(t.Context(), gone.ID(), r.Token, nil); err != nil {
		t.Fatal(err)
	}
	rr, err := red.PlanRedact(needle, "[gone]")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := red.Redact(t.Context(), needle, "[gone]", rr.Token, nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{marker, needle} {
		if hits := rawscan.Hits(t, dir, m); len(hits) > 0 {
			t.Fatalf("%s still in %v", m, hits)
		}
	}
	if hits, _ := red.Grep(context.Background(), `\[gone\]`, 0); len(hits) != 1 || hits[0].Text != "beta [gone]" {
		t.Fatalf("Grep after redaction: %+v", hits)
	}
	if _, err := os.Stat(goneIndex); !os.IsNotExist(err) {
		t.Fatalf("index of the purged session: %v", err)
	}
	if hits, err := red.Search(context.Background(), needle, 5); err != nil || len(hits) != 0 {
		t.Fatalf("the index still knows the needle: %+v %v", hits, err)
	}
}
