package search

import (
	"bytes"
	"context"
	"github.com/padfs/padfs/grep"
	"os"
	"strings"
	"testing"
)

// padGrepAll is padGrep with stderr, its messages prefixed as GNU's are.
func padGrepAll(t *testing.T, ix *Index, req GrepRequest, args []string) (string, string, int) {
	t.Helper()
	r, err := parseGrepArgs(args)
	if err != nil {
		t.Fatalf("parse %q: %v", args, err)
	}
	var out, errb bytes.Buffer
	r.Session, r.Out, r.Err, r.ErrPrefix = req.Session, &out, &errb, "grep"
	stats, err := ix.Grep(context.Background(), r)
	if err != nil {
		return out.String(), errb.String() + "grep: " + err.Error() + "\n", 2
	}
	return out.String(), errb.String(), stats.ExitCode(r.Mode == grep.OutQuiet)
}

// Issue 8 item 10: symbolic links met by grep -r/-R, or given as operands,
// behave as GNU grep's over the mounted tree, byte for byte (stdout,
// stderr, exit code); a link leading out of the session is an error naming
// the link (exit 2). Before the fix, grep -rn PAT dirlink printed no file
// names, and -R skipped dangling, looping, nested and outward links
// silently.
func TestGrepSymlinksMatchGNUOnMount(t *testing.T) {
	st, data := openStore(t)
	h, err := st.CreateSession("links", uint32(os.Getuid()), uint32(os.Getgid()))
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
	bash(t, mnt, `
		mkdir -p d/sub e
		echo "foo one" > d/a.txt
		echo "foo two" > d/sub/b.txt
		printf 'foo three\nbar\n' > e/c.txt
		ln -s d dirlink
		ln -s d/a.txt filelink
		ln -s nowhere dangling
		ln -s . selfloop
		ln -s .. d/up
		ln -s cyc-b cyc-a
		ln -s cyc-a cyc-b
		ln -s d/a.txt/x notdir
		ln -s dirlink/sub/b.txt via
		ln -s d/sub sl
		ln -s sl/../a.txt physical
		ln -s ../d e/tod
		ln -s ../e/c.txt d/sub/toc
	`)
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	req := GrepRequest{Session: sid}
	cases := [][]string{
		{"-rn", "foo", "dirlink"},
		{"-rn", "foo", "dirlink/"},
		{"-Rn", "foo", "dirlink"},
		{"-rn", "foo", "sl"},
		{"-rn", "foo"},
		{"-Rn", "foo"},
		{"-Rn", "foo", "."},
		{"-Rn", "foo", "selfloop"},
		{"-rn", "foo", "selfloop"},
		{"-rn", "foo", "filelink"},
		{"-rn", "foo", "filelink", "d"},
		{"-rn", "foo", "dangling", "d", "cyc-a", "notdir"},
		{"-rn", "foo", "via", "physical", "sl/../a.txt", "dirlink/../e"},
		{"-Rl", "foo"},
		{"-RL", "foo"},
		{"-Rc", "foo", "e"},
		{"-Rsn", "foo"},
		{"-Rh", "foo", "dirlink", "e"},
		{"-Rn", "--exclude-dir=sub", "foo"},
		{"-Rn", "--include=*.txt", "foo", "."},
		{"-Rn", "bar", "e", "dirlink"},
	}
	check := func(stage string, recursive bool) {
		t.Helper()
		for _, args := range cases {
			if !recursive && strings.Contains(args[0], "R") {
				continue // GNU grep -R would follow the outward links
			}
			wantOut, wantErr, wantCode := gnuGrepAll(t, mnt, args)
			gotOut, gotErr, gotCode := padGrepAll(t, ix, req, args)
			if gotOut != wantOut || gotErr != wantErr || gotCode != wantCode {
				t.Errorf("%s: grep %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", stage, args, gotCode, wantCode,
					diffLines(gotOut, wantOut), diffLines(gotErr, wantErr))
			}
		}
	}
	check("in-session links", true)

	// Links leading out of the session: GNU grep -R follows them out of
	// the mount; padfs grep names each (exit 2) and searches the rest as
	// GNU grep would with those links excluded.
	bash(t, mnt, `ln -s /etc outabs && ln -s ../.. d/outrel`)
	check("with outward links, -r", false)
	for _, args := range [][]string{{"-Rn", "foo"}, {"-Rn", "foo", "d", "e"}, {"-Rl", "foo", "."}} {
		gnuArgs := append([]string{"--exclude-dir=outabs", "--exclude-dir=outrel"}, args...)
		wantOut, wantErr, _ := gnuGrepAll(t, mnt, gnuArgs)
		gotOut, gotErr, gotCode := padGrepAll(t, ix, req, args)
		if gotCode != 2 || gotOut != wantOut {
			t.Errorf("grep %q: exit %d, want 2\nstdout:\n%s", args, gotCode, diffLines(gotOut, wantOut))
		}
		var other []string
		named := 0
		for _, l := range strings.SplitAfter(gotErr, "\n") {
			if strings.Contains(l, ": unsupported symbolic link: ") && strings.Contains(l, "points outside the session") {
				if !strings.Contains(l, "outabs:") && !strings.Contains(l, "outrel:") {
					t.Errorf("grep %q: message does not name the link: %q", args, l)
				}
				named++
				continue
			}
			other = append(other, l)
		}
		if named == 0 {
			t.Errorf("grep %q: no outward link named, stderr:\n%s", args, gotErr)
		}
		if got := strings.Join(other, ""); got != wantErr {
			t.Errorf("grep %q: other messages differ:\n%s", args, diffLines(got, wantErr))
		}
	}
	// Named on the command line, as before.
	if _, gotErr, code := padGrepAll(t, ix, req, []string{"-rn", "foo", "outabs"}); code != 2 || !strings.Contains(gotErr, "grep: outabs: unsupported symbolic link: outabs points outside the session (/etc)") {
		t.Errorf("outward operand: exit %d, stderr %q", code, gotErr)
	}
}
