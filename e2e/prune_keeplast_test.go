package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/rawscan"
)

// TestPruneKeepLastBesideMount (issue 10.1): a file written 10 times, then
// prune --before now --keep-last 3 through the running mount. .asof/ of
// the points of its 3 newest versions shows each of them; the points of
// the older ones show the state at the prune point; after compact their
// bytes are nowhere in the data directory.
func TestPruneKeepLastBesideMount(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data, "keeplast")
	m := startMount(t, data, mnt, "--session", sid)
	content := func(i int) string { return fmt.Sprintf("save %02d MARKER-e2e-keeplast-%02d", i, i) }
	redir := func(i int) string { return fmt.Sprintf("redirect %02d MARKER-e2e-redirect-%02d", i, i) }
	// f.txt in place, without O_TRUNC: one version per write. r.txt by a
	// shell redirect: two (the truncation, then the write), which count as
	// one save.
	var points []string
	for i := 1; i <= 10; i++ {
		points = append(points, strings.TrimSpace(sh(t, data, mnt,
			fmt.Sprintf("printf '%%s' %q | dd of=f.txt conv=notrunc status=none\nprintf '%%s' %q > r.txt\npadfs now", content(i), redir(i)))))
	}
	for i, p := range points {
		if got := sh(t, data, filepath.Join(mnt, ".asof", p), "cat f.txt r.txt"); got != content(i+1)+redir(i+1) {
			t.Fatalf("before the prune, .asof/%s: f.txt r.txt = %q", p, got)
		}
	}
	tT := strings.TrimSpace(sh(t, data, mnt, "padfs now")) // now: after the last write
	var dry, r struct {
		Versions int  `json:"versions"`
		KeptLast int  `json:"kept_last"`
		DryRun   bool `json:"dry_run"`
	}
	if err := json.Unmarshal([]byte(mustPadfs(t, data, "prune", "--session", sid, "--before", tT, "--keep-last", "3", "--dry-run", "--json")), &dry); err != nil {
		t.Fatal(err)
	}
	out := sh(t, data, mnt, "padfs prune --before "+tT+" --keep-last 3 --json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("prune --json: %v\n%s", err, out)
	}
	t.Logf("dry %+v, real %+v", dry, r)
	// f.txt's versions 8 and 9 (10 is current), r.txt's 8, 9 and their
	// truncations, and the root directory's.
	if !dry.DryRun || r.DryRun || r.KeptLast < 6 || dry.KeptLast != r.KeptLast || r.Versions == 0 || dry.Versions != r.Versions {
		t.Fatalf("dry run %+v, prune %+v", dry, r)
	}
	if txt := mustPadfs(t, data, "prune", "--session", sid, "--before", tT, "--keep-last", "3", "--dry-run"); !strings.Contains(txt, "versions kept by --keep-last 3") {
		t.Errorf("prune --dry-run text: %q", txt)
	}
	for i, p := range points {
		want := content(10) + redir(10) // the state at the prune point
		if i >= 7 {
			want = content(i+1) + redir(i+1)
		}
		if got := sh(t, data, filepath.Join(mnt, ".asof", p), "cat f.txt r.txt"); got != want {
			t.Errorf("after the prune, .asof/%s: f.txt r.txt (save %d) = %q, want %q", p, i+1, got, want)
		}
	}
	if got := sh(t, data, mnt, "cat f.txt"); got != content(10) {
		t.Errorf("f.txt now: %q", got)
	}
	// Restore of a kept version brings it back.
	sh(t, data, mnt, "padfs restore --asof "+points[7]+" f.txt >/dev/null")
	if got := sh(t, data, mnt, "cat f.txt"); got != content(8) {
		t.Errorf("f.txt after restore --asof version 8: %q", got)
	}

	// The policy's keep_last: the restore's version and version 10 stay.
	t2 := strings.TrimSpace(sh(t, data, mnt, "padfs now"))
	pol := fmt.Sprintf(`{"keep": %q, "keep_last": 2}`, t2)
	if err := os.WriteFile(filepath.Join(data, "policy.json"), []byte(pol), 0o644); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		KeptLast int `json:"kept_last"`
	}
	if err := json.Unmarshal([]byte(mustPadfs(t, data, "prune", "--policy", "--json")), &rows); err != nil || len(rows) != 1 || rows[0].KeptLast < 1 {
		t.Fatalf("prune --policy: %+v %v", rows, err)
	}
	if got := sh(t, data, filepath.Join(mnt, ".asof", points[9]), "cat f.txt"); got != content(10) {
		t.Errorf("after the policy, .asof/%s/f.txt (version 10) = %q", points[9], got)
	}
	if got := sh(t, data, filepath.Join(mnt, ".asof", points[8]), "cat f.txt"); got != content(8) {
		t.Errorf("after the policy, .asof/%s/f.txt (version 9, pruned) = %q, want the state at the prune point", points[8], got)
	}
	if got := sh(t, data, filepath.Join(mnt, ".asof", points[8]), "cat r.txt"); got != redir(9) {
		t.Errorf("after the policy, .asof/%s/r.txt (save 9, kept) = %q", points[8], got)
	}

	mustPadfs(t, data, "compact", "--json")
	m.stop()
	for i := 1; i <= 10; i++ {
		hits := rawscan.Hits(t, data, fmt.Sprintf("MARKER-e2e-redirect-%02d", i))
		if i <= 8 && len(hits) > 0 {
			t.Errorf("pruned save %d of r.txt still in %v", i, hits)
		}
		if i >= 9 && len(hits) == 0 {
			t.Errorf("kept save %d of r.txt is not on disk", i)
		}
		hits = rawscan.Hits(t, data, fmt.Sprintf("MARKER-e2e-keeplast-%02d", i))
		if (i <= 7 || i == 9) && len(hits) > 0 {
			t.Errorf("pruned version %d still in %v", i, hits)
		}
		if (i == 8 || i == 10) && len(hits) == 0 {
			t.Errorf("kept version %d is not on disk", i)
		}
	}
}

// TestDuKeepLast (issue 10.8): du's history is what a prune before now
// would free keeping the policy's keep_last (or --keep-last N), not all
// the superseded versions.
func TestDuKeepLast(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data, "dukeep")
	m := startMount(t, data, mnt, "--session", sid)
	for i := 1; i <= 8; i++ {
		sh(t, data, mnt, fmt.Sprintf("printf 'save %02d %s' | dd of=f.txt conv=notrunc status=none", i, strings.Repeat("x", 1000*i)))
	}
	m.stop()
	if err := os.WriteFile(filepath.Join(data, "policy.json"), []byte(`{"keep": "30d", "keep_last": 3}`), 0o600); err != nil {
		t.Fatal(err)
	}
	type duJSON struct {
		Sessions []struct {
			HistoryVersions int   `json:"history_versions"`
			HistoryChunks   int   `json:"history_chunks"`
			HistoryBytes    int64 `json:"history_bytes"`
			KeepLast        int   `json:"keep_last"`
			KeptLast        int   `json:"kept_last"`
		} `json:"sessions"`
	}
	type pruneOut struct {
		Versions int   `json:"versions"`
		Chunks   int   `json:"chunks"`
		Bytes    int64 `json:"bytes"`
		KeptLast int   `json:"kept_last"`
		DryRun   bool  `json:"dry_run"`
	}
	du := func(args ...string) duJSON {
		t.Helper()
		var d duJSON
		out := mustPadfs(t, data, append([]string{"du", "--session", sid, "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Sessions) != 1 {
			t.Fatalf("du --json %v: %v\n%s", args, err, out)
		}
		return d
	}
	prune := func(args ...string) pruneOut {
		t.Helper()
		var r pruneOut
		out := mustPadfs(t, data, append([]string{"prune", "--session", sid, "--before", "0s", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("prune --json %v: %v\n%s", args, err, out)
		}
		return r
	}
	pol := du() // the policy's keep_last 3
	if s, dry3 := pol.Sessions[0], prune("--keep-last", "3", "--dry-run"); s.HistoryVersions != dry3.Versions || s.HistoryBytes != dry3.Bytes {
		t.Errorf("du with policy keep_last 3 %+v, prune --keep-last 3 --dry-run %+v", s, dry3)
	}
	all := du("--keep-last", "0")
	two := du("--keep-last", "2")
	dry2 := prune("--keep-last", "2", "--dry-run")
	if s := two.Sessions[0]; s.HistoryVersions != dry2.Versions || s.HistoryBytes != dry2.Bytes || s.HistoryChunks != dry2.Chunks || s.KeptLast != dry2.KeptLast || s.KeepLast != 2 {
		t.Errorf("du --keep-last 2 %+v, prune --keep-last 2 --dry-run %+v", s, dry2)
	}
	got := prune("--keep-last", "3")
	t.Logf("du: keep none %+v, keep 2 %+v, policy (3) %+v; prune --keep-last 3 freed %+v", all.Sessions[0], two.Sessions[0], pol.Sessions[0], got)
	if got.DryRun || got.Versions == 0 || got.KeptLast == 0 {
		t.Fatalf("prune --keep-last 3 freed %+v: want some versions freed and some kept", got)
	}
	if s := pol.Sessions[0]; s.HistoryVersions != got.Versions || s.HistoryBytes != got.Bytes || s.HistoryChunks != got.Chunks || s.KeptLast != got.KeptLast || s.KeepLast != 3 {
		t.Errorf("du with policy keep_last 3 said a prune would free %+v; prune --keep-last 3 freed %+v", s, got)
	}
	if a := all.Sessions[0]; a.HistoryBytes <= got.Bytes || a.HistoryVersions <= got.Versions {
		t.Errorf("du --keep-last 0 %+v should exceed what keep-last 3 freed %+v", a, got)
	}
	if txt := mustPadfs(t, data, "du", "--session", sid); !strings.Contains(txt, "last 3 saves") {
		t.Errorf("du text does not name the policy's keep_last:\n%s", txt)
	}
}
