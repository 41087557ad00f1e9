package search

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/mvcc"
)

// mountSession mounts session sid of st under t.TempDir() with the .grep/
// directory served by ix (through *ixp, so the test can swap indexes).
func mountSession(t *testing.T, st *mvcc.Store, sid mvcc.SessionID, ixp **Index) string {
	t.Helper()
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := fs.Mount(st, mnt, fs.Options{Session: &sid, Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()),
		SpillDir: filepath.Join(t.TempDir(), "spill"),
		Virtual: map[string]fs.VirtualDir{".grep": {Open: func(ctx context.Context, sid mvcc.SessionID, name string) ([]byte, error) {
			return (*ixp).GrepOutput(ctx, sid, name)
		}}}})
	if err != nil {
		t.Skipf("cannot mount (no FUSE here?): %v", err)
	}
	t.Cleanup(func() {
		if err := m.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return mnt
}

// shOut runs a bash script in dir and returns its stdout and exit code.
func shOut(t *testing.T, dir, script string) (string, int) {
	t.Helper()
	// cd in the child's shell, never cmd.Dir: chdir into the mount in the
	// forked child would run while this process holds the fork lock.
	cmd := exec.Command("bash", "-c", `cd "$1" && eval "$2"`, "bash", dir, script)
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), 0
}

func bash(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("bash", "-c", `cd "$1" && eval "$2"`, "bash", dir, script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
}

// TestGrepMatchesGNUOnMount is the acceptance test: GNU grep -rn run over
// the mounted tree and padfs grep must print the same bytes and exit with
// the same code, with the index missing, lagging, caught up and reopened.
func TestGrepMatchesGNUOnMount(t *testing.T) {
	st, data := openStore(t)
	h, err := st.CreateSession("mount", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	sid := h.ID
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ix.Close() }()
	mnt := mountSession(t, st, sid, &ix)
	// Only subprocesses touch the mount (never this process's own
	// goroutines: a FUSE request to ourselves can deadlock).
	src := t.TempDir()
	writeDir(t, src, corpus(t))
	bash(t, mnt, "cp -a "+src+"/. .")

	check := func(stage string, wantDegraded bool) {
		t.Helper()
		degraded := false
		for _, args := range grepCases {
			want, wantCode := gnuGrep(t, mnt, args)
			got, gotCode, stats := padGrep(t, ix, sid, args)
			degraded = degraded || stats.Degraded
			if got != want || gotCode != wantCode {
				t.Errorf("%s: grep %q: exit %d, want %d\n%s", stage, args, gotCode, wantCode, diffLines(got, want))
			}
		}
		if wantDegraded && !degraded {
			t.Errorf("%s: no run reported a lagging index", stage)
		}
	}
	check("no index", false)
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	check("indexed", false)

	// Writes the index has not seen: edits, a new file, a removed file, a
	// renamed directory (one event for the whole subtree), a hard link.
	bash(t, mnt, `
		echo "needle appended after indexing" >> odd/a.txt
		printf 'fresh needle file\nfunc IndexFresh() {}\n' > odd/fresh.txt
		rm odd/a-b.txt
		mv go/sort go/sorted
		ln odd/crlf.txt odd/crlf-link.txt
		echo "needle via link" >> odd/crlf-link.txt
		mkdir -p new/deep && echo "needle deep" > new/deep/x.go
	`)
	check("lagging", true)
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	check("caught up", false)

	// A restart: the index reopens where it was and catches up from the log.
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	bash(t, mnt, `
		mv new/deep new/deeper
		echo "needle after restart" > odd/restart.txt
		: > odd/emptylines.txt
	`)
	if ix, err = OpenWith(data, st, Options{}); err != nil {
		t.Fatal(err)
	}
	check("reopened, lagging", true)
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	check("reopened, caught up", false)

	// A missing operand: its message comes where GNU grep prints it,
	// between the other operands' lines (stdout and stderr to one place).
	args := []string{"-rn", "needle", "odd", "no-such-dir", "go"}
	mixed, _ := shOut(t, mnt, "LC_ALL=C.UTF-8 grep -rn needle odd no-such-dir go 2>&1")
	req, err := parseGrepArgs(args)
	if err != nil {
		t.Fatal(err)
	}
	var both bytes.Buffer
	req.Session, req.Out, req.Err, req.ErrPrefix = sid, &both, &both, "grep"
	if _, err := ix.Grep(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if i := strings.Index(mixed, "grep: no-such-dir: "); i <= 0 || !strings.Contains(mixed[i:], "\ngo/") {
		t.Fatalf("GNU grep did not print lines before and after the message, as this test needs:\n%s", mixed)
	}
	if got := both.String(); got != mixed {
		t.Errorf("grep %q, stdout and stderr together, differs:\n%s", args, diffLines(got, mixed))
	}

	// The mount's .grep/ directory: reading .grep/PATTERN is grep -rn.
	want, _ := gnuGrep(t, mnt, []string{"-rn", "func Index"})
	got, code := shOut(t, mnt, "cat '.grep/func Index'")
	if code != 0 || got != want {
		t.Errorf(".grep/func Index differs from grep -rn:\n%s", diffLines(string(got), want))
	}
	if ls, _ := shOut(t, mnt, "ls -a"); strings.Contains(ls, ".grep") {
		t.Errorf(".grep is listed by readdir:\n%s", ls)
	}
	if _, code := shOut(t, mnt, `cat '.grep/\(a\)\1'`); code == 0 {
		t.Errorf("a back-reference pattern read without error")
	}
}

// TestBackgroundIndexerFollowsCommits checks that a background index
// catches up by itself after commits, and that Watch never waits for it.
func TestBackgroundIndexerFollowsCommits(t *testing.T) {
	st, data := openStore(t)
	files := map[string][]byte{"a.txt": []byte("alpha needle\n"), "d/b.txt": []byte("beta\n")}
	sid := loadSession(t, st, files)
	ix, err := Open(data, st)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	putFile(t, st, sid, "d/c.txt", []byte("gamma needle\n"))
	var last uint64
	st.View(func(tx *mvcc.ReadTx) error { last, _, err = tx.LastEvent(sid); return err })
	for i := 0; ; i++ {
		seq, _, err := ix.Covered(sid)
		if err != nil {
			t.Fatal(err)
		}
		if seq == last {
			break
		}
		if i > 2000 {
			t.Fatalf("index stuck at seq %d of %d", seq, last)
		}
		waitABit()
	}
	out, code, stats := padGrep(t, ix, sid, []string{"-rn", "needle"})
	if code != 0 || out != "a.txt:1:alpha needle\nd/c.txt:1:gamma needle\n" || stats.Degraded || stats.Scanned {
		t.Errorf("got %q code %d stats %+v", out, code, stats)
	}
}
