package search

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/grep"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/internal/testtrees"
	"github.com/padfs/padfs/mvcc"
)

// openStore opens a fresh store in a temporary data directory.
func openStore(t testing.TB) (*mvcc.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := storeopen.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dir
}

// putFile writes path (creating parent directories) in session sid.
func putFile(t testing.TB, st *mvcc.Store, sid mvcc.SessionID, path string, data []byte) {
	t.Helper()
	h, err := st.Header(sid)
	if err != nil {
		t.Fatal(err)
	}
	dir := h.Root
	parts := strings.Split(path, "/")
	for _, p := range parts[:len(parts)-1] {
		n, err := st.Lookup(sid, dir, p, mvcc.Latest)
		if errors.Is(err, mvcc.ErrNotFound) {
			n, err = st.Create(sid, dir, p, mvcc.Attr{Mode: syscall.S_IFDIR | 0o755}, "")
		}
		if err != nil {
			t.Fatalf("mkdir %s: %v", p, err)
		}
		dir = n.Ino
	}
	name := parts[len(parts)-1]
	n, err := st.Lookup(sid, dir, name, mvcc.Latest)
	if errors.Is(err, mvcc.ErrNotFound) {
		n, err = st.Create(sid, dir, name, mvcc.Attr{Mode: syscall.S_IFREG | 0o644}, "")
	}
	if err != nil {
		t.Fatalf("create %s: %v", path, err)
	}
	if _, err := st.WriteContent(context.Background(), sid, n.Ino, bytes.NewReader(data), 0); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}

// corpus returns a tree of a few hundred files: Go sources from GOROOT,
// hand-made oddities (binary, unicode, CRLF, ...: testdata/grep/corpus)
// and large ones made here (long lines, a late NUL, over 1 MiB).
func corpus(t testing.TB) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	for _, pkg := range []string{"strings", "bytes", "bufio", "unicode/utf8", "regexp", "regexp/syntax", "sort", "path"} {
		src := filepath.Join(goroot(t), "src", pkg)
		ents, err := os.ReadDir(src)
		if err != nil {
			t.Skipf("GOROOT sources: %v", err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() {
				data, err := os.ReadFile(filepath.Join(src, e.Name()))
				if err != nil {
					t.Fatal(err)
				}
				files["go/"+pkg+"/"+e.Name()] = data
			}
		}
	}
	for p, data := range testdataTree(t, "corpus") {
		files[p] = data
	}
	// Made here, not kept in testdata: sizes are what they test.
	big := bytes.Repeat([]byte("filler line without the needle\n"), 40000) // > 1 MiB
	big = append(big, []byte("the needle is at the end of a big file\n")...)
	nulLate := append(bytes.Repeat([]byte("text line with needle early\n"), 4000), 0)
	nulLate = append(nulLate, []byte("\nneedle after the nul\n")...)
	files["odd/long.txt"] = append(bytes.Repeat([]byte("x"), 200000), []byte("needle at the end of a long line\nshort needle\n")...)
	files["odd/big.txt"] = big
	files["odd/nullate.txt"] = nulLate
	return files
}

// testdataTree returns the files under the module's
// testdata/grep/NAME, by path relative to it.
func testdataTree(t testing.TB, name string) map[string][]byte {
	t.Helper()
	got, err := testtrees.FilesUnder(filepath.Join("grep", name))
	if err != nil || len(got) == 0 {
		t.Fatalf("testdata/grep/%s: %d files, %v", name, len(got), err)
	}
	files := make(map[string][]byte, len(got))
	for p, data := range got {
		files[p] = []byte(data)
	}
	return files
}

// writeDir writes files into a plain directory (the GNU grep side).
func writeDir(t testing.TB, dir string, files map[string][]byte) {
	t.Helper()
	for p, data := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadSession creates a session holding files (in sorted order).
func loadSession(t testing.TB, st *mvcc.Store, files map[string][]byte) mvcc.SessionID {
	t.Helper()
	h, err := st.CreateSession("test", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		putFile(t, st, h.ID, p, files[p])
	}
	return h.ID
}

// gnuGrep runs GNU grep in dir through bash and returns stdout and the
// exit code.
func gnuGrep(t testing.TB, dir string, args []string) (string, int) {
	t.Helper()
	out, _, code := gnuGrepAll(t, dir, args)
	return out, code
}

// gnuGrepAll runs GNU grep in dir (C.UTF-8, default colors) and returns
// stdout, stderr and the exit code.
func gnuGrepAll(t testing.TB, dir string, args []string) (string, string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-c", `cd "$1" && shift && LC_ALL=C.UTF-8 exec env -u GREP_COLORS -u GREP_COLOR grep "$@"`, "bash", dir)
	cmd.Args = append(cmd.Args, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// padGrep runs the CLI-equivalent request parsing of args against ix.
func padGrep(t testing.TB, ix *Index, sid mvcc.SessionID, args []string) (string, int, GrepStats) {
	t.Helper()
	req, err := parseGrepArgs(args)
	var out, errb bytes.Buffer
	if err != nil {
		return "", 2, GrepStats{}
	}
	req.Session, req.Out, req.Err = sid, &out, &errb
	stats, err := ix.Grep(context.Background(), req)
	if err != nil {
		return out.String(), 2, stats
	}
	return out.String(), stats.ExitCode(req.Mode == grep.OutQuiet), stats
}

func waitABit() { time.Sleep(10 * time.Millisecond) }

// goroot is `go env GOROOT` (runtime.GOROOT is deprecated: it names the
// root the test binary was built with).
func goroot(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("go env GOROOT: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// parseGrepArgs parses a grep command line into a request (operands as
// typed).
func parseGrepArgs(args []string) (GrepRequest, error) {
	cl, err := grep.ParseCommandLine(args)
	return GrepRequest{Options: cl.Options, Operands: cl.Operands}, err
}
