package main

import (
	"strings"
	"testing"
)

// diff, log, restore and undo take the same points in time (sequence
// numbers, now, HLCs, checkpoints) from one resolver; diff keeps the paths
// after -- and drops --exclude globs.
func TestPointsPathsExcludes(t *testing.T) {
	dir, sid := grepTestData(t, map[string]string{"a.txt": "a\n", "src/main.go": "package main\n", "src/util.go": "package util\n"})
	run := func(want int, args ...string) string {
		t.Helper()
		out, errs, code := runPadfs(t, append([]string{"--data", dir}, args...)...)
		if code != want {
			t.Fatalf("padfs %q: exit %d, want %d: %s%s", args, code, want, out, errs)
		}
		return out + errs
	}
	// Events: 1 session.create, 2 create a.txt, 3 write a.txt, 4 mkdir src,
	// 5-8 create and write main.go and util.go.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", "--session", sid, "3"}, "A\tsrc/\nA\tsrc/main.go\nA\tsrc/util.go\n"},
		{[]string{"diff", "--session", sid, "3", "now"}, "A\tsrc/\nA\tsrc/main.go\nA\tsrc/util.go\n"},
		{[]string{"diff", "--session", sid, "0", "3"}, "A\ta.txt\n"},
		{[]string{"diff", "--session", sid, "3", "--", "src/main.go", "nothing"}, "A\tsrc/main.go\n"},
		{[]string{"diff", "--session", sid, "3", "now", "--", "src"}, "A\tsrc/\nA\tsrc/main.go\nA\tsrc/util.go\n"},
		{[]string{"diff", "--session", sid, "--exclude", "*.go", "0"}, "A\ta.txt\nA\tsrc/\n"},
		{[]string{"diff", "--session", sid, "--exclude", "src", "--exclude", "a.*", "0"}, ""},
		{[]string{"log", "--session", sid, "--since", "7"}, "write src/util.go"},
	} {
		code := 0
		if c.want == "" {
			code = 1
		}
		if got := run(code, c.args...); !strings.Contains(got, c.want) || c.want == "" && got != "" {
			t.Errorf("padfs %q:\n%s\nwant:\n%s", c.args, got, c.want)
		}
	}
	if got := run(1, "log", "--session", sid, "--since", "now"); got != "" {
		t.Errorf("log --since now: %q", got)
	}
	if got := run(2, "diff", "--session", sid, "99"); !strings.Contains(got, "FROM 99") || !strings.Contains(got, "log ends at 8") {
		t.Errorf("diff 99: %q", got)
	}
	if got := run(2, "diff", "--session", sid, "3", "4", "5"); !strings.Contains(got, "at most TO") {
		t.Errorf("diff with three points: %q", got)
	}
	if got := run(2, "diff", "--session", sid, "--exclude", "[", "3"); !strings.Contains(got, "--exclude") {
		t.Errorf("diff --exclude [: %q", got)
	}

	// Without a mount: restore and undo open the store themselves.
	run(0, "checkpoint", "--session", sid, "full")
	if got := run(0, "restore", "--session", sid, "--asof", "3"); got != "D\tsrc/\nD\tsrc/main.go\nD\tsrc/util.go\n" {
		t.Errorf("restore --asof 3: %q", got)
	}
	if got := run(2, "restore", "--session", sid); !strings.Contains(got, "--asof") {
		t.Errorf("restore without --asof: %q", got)
	}
	if got := run(0, "undo", "--session", sid, "--dry-run"); !strings.HasPrefix(got, "would revert: ") || !strings.Contains(got, " restore . ") {
		t.Errorf("undo --dry-run: %q", got)
	}
	if got := run(0, "undo", "--session", sid, "full"); !strings.Contains(got, "A\tsrc/main.go") {
		t.Errorf("undo full: %q", got)
	}
	if got := run(1, "diff", "--session", sid, "full"); got != "" {
		t.Errorf("after undo full, diff full: %q", got)
	}
}
