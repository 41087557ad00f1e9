package main

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersion(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-11-29T14:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := versionOf(bi), "v1.2.3 (revision 0123abcd+dirty, 2026-11-29T14:00:00Z, go1.99)"; got != want {
		t.Errorf("versionOf: %q, want %q", got, want)
	}
	if got := versionOf(&debug.BuildInfo{GoVersion: "go1.99"}); got != "(devel) (go1.99)" {
		t.Errorf("versionOf with no module version nor VCS: %q", got)
	}
	out, errs, code := runPadfs(t, "--version")
	if code != 0 || errs != "" || !strings.HasPrefix(out, "padfs ") || !strings.Contains(out, "go1.") || strings.Count(out, "\n") != 1 {
		t.Errorf("padfs --version: exit %d %q %q", code, out, errs)
	}
}
