package session

import (
	"bytes"
	"errors"
	"strings"
	"testing"

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
	if err := p.Write("/empty.txt", ""); err != nil {
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
	p.Write("d/x", "1")
	if _, _, err := p.Read("d"); !errors.Is(err, mvcc.ErrIsDir) {
		t.Fatalf("read of a directory: %v", err)
	}
	if err := p.Write("d", "x"); !errors.Is(err, mvcc.ErrInvalid) {
		t.Fatalf("write over a directory: %v", err)
	}
	if err := p.Write("d/x/y", "x"); !errors.Is(err, mvcc.ErrNotDir) {
		t.Fatalf("write below a file: %v", err)
	}
	if err := p.Write("../../etc/passwd", "root"); err != nil {
		t.Fatal(err) // ".." cannot leave the root: this is etc/passwd in the session
	}
	if s, ok, _ := p.Read("etc/passwd"); !ok || s != "root" {
		t.Fatalf("cleaned path: %q %v", s, ok)
	}
	if err := p.Write("a/.asof/x", "x"); !errors.Is(err, mvcc.ErrInvalid) {
		t.Fatalf("reserved name: %v", err)
	}
}

func TestLsGrepForgetAsOf(t *testing.T) {
	st, p := openTest(t)
	p.Write("src/main.go", "package main\n\nfunc main() {}\n")
	p.Write("src/util/u.go", "package util\n")
	p.Write("README", "main docs\n")
	p.Write("bin/blob", "main\x00binary")
	if got, _ := p.Ls("src/"); strings.Join(got, ",") != "src/main.go,src/util/u.go" {
		t.Fatalf("Ls(src/) = %v", got)
	}
	if got, _ := p.Ls(""); len(got) != 4 {
		t.Fatalf("Ls() = %v", got)
	}
	hits, err := p.Grep(`\bmain\b`, 0)
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
	if hits, _ := p.Grep("main", 2); len(hits) != 2 {
		t.Fatalf("Grep k=2: %d hits", len(hits))
	}
	if _, err := p.Grep("(", 1); !errors.Is(err, mvcc.ErrInvalid) {
		t.Fatalf("bad pattern: %v", err)
	}
	before, _ := st.Now()
	if err := p.Forget(); err != nil {
		t.Fatal(err)
	}
	if err := p.Write("x", "y"); !errors.Is(err, mvcc.ErrForgotten) {
		t.Fatalf("write after forget: %v", err)
	}
	again, err := st.Lookup(p.ID())
	if err != nil {
		t.Fatal(err)
	}
	if s, ok, err := again.AsOf(before).Read("README"); !ok || err != nil || s != "main docs\n" {
		t.Fatalf("as-of read of a forgotten session: %q %v %v", s, ok, err)
	}
	f, err := again.AsOf(before).Fork("revived")
	if err != nil {
		t.Fatal(err)
	}
	if s, ok, _ := f.Read("src/util/u.go"); !ok || s != "package util\n" {
		t.Fatalf("fork of a forgotten session's past: %q", s)
	}
}

func TestWriteUnifiedPatch(t *testing.T) {
	st, p := openTest(t)
	p.Write("keep.txt", "a\nb\nc\n")
	p.Write("mod.txt", "one\ntwo\nthree\n")
	p.Write("gone.txt", "bye\n")
	p.Write("bin.dat", "\x00\x01")
	p.Write("old-name.txt", "same\n")
	from, _ := st.Now()
	p.Write("mod.txt", "one\n2\nthree\n")
	p.Write("new.txt", "hello\n")
	p.Write("bin.dat", "\x00\x02")
	sid := p.SID()
	h := p.Header()
	if err := st.MVCC().Remove(sid, h.Root, "gone.txt", false); err != nil {
		t.Fatal(err)
	}
	if err := st.MVCC().Rename(sid, h.Root, "old-name.txt", h.Root, "new-name.txt", 0); err != nil {
		t.Fatal(err)
	}
	to, _ := st.Now()
	ch, err := st.MVCC().Diff(sid, from, to)
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
	if err := WriteUnified(&b, st.MVCC(), ch); err != nil {
		t.Fatal(err)
	}
	want := `diff --git a/bin.dat b/bin.dat
Binary files a/bin.dat and b/bin.dat differ
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
diff --git a/mod.txt b/mod.txt
--- a/mod.txt
+++ b/mod.txt
@@ -1,3 +1,3 @@
 one
-two
+2
 three
diff --git a/old-name.txt b/new-name.txt
rename from old-name.txt
rename to new-name.txt
diff --git a/new.txt b/new.txt
new file mode 100644
--- /dev/null
+++ b/new.txt
@@ -0,0 +1 @@
+hello
`
	if b.String() != want {
		t.Fatalf("unified:\n%s\nwant:\n%s", b.String(), want)
	}
}
