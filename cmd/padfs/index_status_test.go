package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/padfs/padfs/search"
)

// TestIndexStatus: index status shows the lag per session, in text and
// JSON, before and after a reindex.
func TestIndexStatus(t *testing.T) {
	dir, sid := grepTestData(t, map[string]string{"a.txt": "alpha needle\n"})
	status := func() search.Status {
		out, errs, code := runPadfs(t, "--data", dir, "index", "status", "--json")
		if code != 0 {
			t.Fatalf("index status --json: %q exit %d", errs, code)
		}
		var st search.Status
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("index status --json: %v in %q", err, out)
		}
		if len(st.Sessions) != 1 || st.Sessions[0].Session != sid || st.Sessions[0].Last == 0 {
			t.Fatalf("index status: %+v", st)
		}
		return st
	}
	if s := status().Sessions[0]; s.Covered != 0 {
		t.Errorf("no index yet, covered %d", s.Covered)
	}
	if _, errs, code := runPadfs(t, "--data", dir, "reindex", "--session", sid); code != 0 {
		t.Fatalf("reindex: %q exit %d", errs, code)
	}
	if s := status().Sessions[0]; s.Covered != s.Last {
		t.Errorf("after reindex: covered %d, last %d", s.Covered, s.Last)
	}
	out, _, code := runPadfs(t, "--data", dir, "index", "status")
	if code != 0 || !strings.Contains(out, sid+" covered ") || !strings.Contains(out, " lag 0") {
		t.Errorf("index status: %q exit %d", out, code)
	}
}
