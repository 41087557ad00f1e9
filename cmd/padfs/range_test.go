package main

import (
	"strings"
	"testing"
)

// Values out of range are refused with one line naming the value and the
// range (exit 2), not wrapped round or silently replaced.
func TestRangeChecks(t *testing.T) {
	dir, sid := grepTestData(t, map[string]string{"a.txt": "hello\n"})
	for _, c := range []struct {
		args []string
		want []string // in the one-line message
	}{
		{[]string{"log", "--session", sid, "--since", "18446744073709551615"}, []string{"18446744073709551615", "0..9223372036854775807"}},
		{[]string{"log", "--session", sid, "--since", "99999999999999999999999"}, []string{"99999999999999999999999", "0..9223372036854775807"}},
		{[]string{"search", "--session", sid, "-k", "0", "hello"}, []string{"-k 0", "1..10000"}},
		{[]string{"search", "--session", sid, "-k", "-1", "hello"}, []string{"-k -1", "1..10000"}},
		{[]string{"log", "--session", sid, "--since", "2262-04-12T00:00:00Z"}, []string{"2262-04-12T00:00:00Z", "2262-04-11T23:47:16.854775807Z"}},
		{[]string{"diff", "--session", sid, "2262-04-12T00:00:00Z"}, []string{"2262-04-12T00:00:00Z", "1970-01-01T00:00:00.000000000Z..2262-04-11T23:47:16.854775807Z"}},
		{[]string{"grep", "--session", sid, "--asof", "2262-04-12T00:00:00Z", "hello"}, []string{"2262-04-12T00:00:00Z", "2262-04-11T23:47:16.854775807Z"}},
		{[]string{"session", "new", "--name", "two\nlines"}, []string{`"two\nlines"`, "control character"}},
		{[]string{"session", "new", "--name", "tab\there"}, []string{"control character"}},
		{[]string{"session", "new", "--name", "a/b"}, []string{`"a/b"`, "'/'"}},
		{[]string{"session", "fork", sid, "--name", "x\ry"}, []string{`"x\ry"`, "control character"}},
	} {
		args := append([]string{"--data", dir}, c.args...)
		out, errs, code := runPadfs(t, args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.HasPrefix(errs, "padfs") {
			t.Errorf("padfs %q: exit %d, stdout %q, stderr %q; want exit 2 and one line", c.args, code, out, errs)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errs, w) {
				t.Errorf("padfs %q: %q does not name %q", c.args, errs, w)
			}
		}
	}
	// In range still works: the last sequence number selects nothing.
	if out, errs, code := runPadfs(t, "--data", dir, "log", "--session", sid, "--since", "9223372036854775807"); code != 1 || out != "" {
		t.Errorf("log --since 2^63-1: exit %d %q %q, want exit 1 and nothing", code, out, errs)
	}
	if out, _, code := runPadfs(t, "--data", dir, "session", "new", "--name", "caf\u00e9 \xff"); code != 0 || len(strings.TrimSpace(out)) != 26 {
		t.Errorf("session new with a non-ASCII name: exit %d %q", code, out)
	}
}
