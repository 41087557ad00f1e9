package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type pruneJSON struct {
	Session  string `json:"session"`
	Before   string `json:"before"`
	Versions int    `json:"versions"`
	Chunks   int    `json:"chunks"`
	Bytes    int64  `json:"bytes"`
	Records  int    `json:"records"`
	Scanned  int    `json:"scanned"`
	DryRun   bool   `json:"dry_run"`
}

func parsePrune(t *testing.T, out string) pruneJSON {
	t.Helper()
	var r pruneJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("prune --json: %v\n%s", err, out)
	}
	return r
}

// treeListing lists a tree with the SHA-256 of every file (from dir).
const treeListing = `find . -mindepth 1 -printf '%y %p %s\n' | sort; find . -type f -exec sha256sum {} + | sort`

// TestPruneBesideRunningMount: padfs prune runs inside the mount's process
// while a writer loops; the tree as of T and now read the same before and
// after, an earlier point reads the state as of T, the log keeps every
// event, --dry-run changes nothing, and compact keeps everything readable.
func TestPruneBesideRunningMount(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data, "pruned")
	startMount(t, data, mnt, "--session", sid)
	early := sh(t, data, mnt, `
for i in 1 2 3 4 5; do echo "notes v$i" > notes.txt; done
head -c 300000 /dev/urandom > big.bin
mkdir d && echo bye > d/gone.txt && echo stay > d/stay.txt
padfs now`)
	early = strings.TrimSpace(early)
	tT := strings.TrimSpace(sh(t, data, mnt, `
for i in 6 7 8; do echo "notes v$i" > notes.txt; done
head -c 300000 /dev/urandom > big.bin
rm d/gone.txt
setfattr -n user.color -v red notes.txt 2>/dev/null || true
padfs now`))
	sh(t, data, mnt, `
echo "notes after" > notes.txt
head -c 300000 /dev/urandom > big.bin
echo new > d/new.txt`)
	atT := sh(t, data, filepath.Join(mnt, ".asof", tT), treeListing)
	now := sh(t, data, mnt, treeListing)
	events := strings.Count(mustPadfs(t, data, "log", "--session", sid), "\n")

	// Dry run: a receipt, nothing changed.
	dry := parsePrune(t, mustPadfs(t, data, "prune", "--session", sid, "--before", tT, "--dry-run", "--json"))
	if !dry.DryRun || dry.Versions == 0 || dry.Chunks == 0 || dry.Bytes == 0 {
		t.Fatalf("dry run: %+v", dry)
	}
	again := parsePrune(t, mustPadfs(t, data, "prune", "--session", sid, "--before", tT, "--dry-run", "--json"))
	if again != dry {
		t.Fatalf("a second dry run differs (the first changed something): %+v then %+v", dry, again)
	}
	if got := sh(t, data, filepath.Join(mnt, ".asof", early), "cat notes.txt"); got != "notes v5\n" {
		t.Fatalf("dry run changed the past: .asof/%s/notes.txt = %q", early, got)
	}

	// The prune, from inside the mount (through the control socket), with a
	// writer looping beside it.
	out := sh(t, data, mnt, `
(for i in $(seq 1 300); do echo "loop $i" > loop.txt; done) &
w=$!
padfs prune --before `+tT+` --json
wait $w`)
	r := parsePrune(t, out)
	if r.DryRun || r.Versions != dry.Versions || r.Chunks != dry.Chunks || r.Bytes != dry.Bytes || r.Session != sid {
		t.Fatalf("prune did %+v; the dry run said %+v", r, dry)
	}
	if got := sh(t, data, filepath.Join(mnt, ".asof", tT), treeListing); got != atT {
		t.Errorf("tree as of T changed:\n%s\nwant\n%s", got, atT)
	}
	if got := sh(t, data, mnt, "{ "+treeListing+"; } | grep -v loop.txt"); got != filterOut(now, "loop.txt") {
		t.Errorf("tree now changed:\n%s\nwant\n%s", got, now)
	}
	if got := sh(t, data, mnt, "cat loop.txt"); got != "loop 300\n" {
		t.Errorf("writer beside the prune: loop.txt = %q", got)
	}
	// A point before T reads the state as of T.
	if got := sh(t, data, filepath.Join(mnt, ".asof", early), treeListing); got != atT {
		t.Errorf(".asof/%s (pruned) does not show the state as of T:\n%s\nwant\n%s", early, got, atT)
	}
	if n := strings.Count(mustPadfs(t, data, "log", "--session", sid), "\n"); n < events {
		t.Errorf("log has %d events after the prune, %d before", n, events)
	}
	// Nothing more to free before T.
	if r2 := parsePrune(t, mustPadfs(t, data, "prune", "--session", sid, "--before", tT, "--json")); r2.Versions != 0 || r2.Chunks != 0 {
		t.Errorf("second prune freed %+v", r2)
	}
	// Text output names what went.
	if txt := mustPadfs(t, data, "prune", "--session", sid, "--before", tT, "--dry-run"); !strings.Contains(txt, "would free 0 versions") {
		t.Errorf("prune --dry-run text: %q", txt)
	}

	// compact beside the mount: the store shrinks or stays, all is readable.
	var c map[string]int64
	if err := json.Unmarshal([]byte(mustPadfs(t, data, "compact", "--json")), &c); err != nil || c["after"] == 0 {
		t.Fatalf("compact --json: %v %v", c, err)
	}
	if got := sh(t, data, filepath.Join(mnt, ".asof", tT), treeListing); got != atT {
		t.Errorf("tree as of T after compact:\n%s", got)
	}
	if got := sh(t, data, mnt, "echo after compact > c.txt && cat c.txt"); got != "after compact\n" {
		t.Errorf("write after compact: %q", got)
	}
	if _, err := os.Stat(filepath.Join(data, "reserve")); err != nil {
		t.Errorf("disk-full reserve: %v", err)
	}
}

func filterOut(listing, name string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(listing, "\n") {
		if l != "" && !strings.Contains(l, name) {
			b.WriteString(l)
		}
	}
	return b.String()
}

// TestPruneWithoutMount: the CLI opens the store itself; durations and
// --all work.
func TestPruneWithoutMount(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data, "solo")
	m := startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `for i in 1 2 3; do echo "v$i" > f.txt; done`)
	m.stop()
	var rows []pruneJSON
	if err := json.Unmarshal([]byte(mustPadfs(t, data, "prune", "--all", "--before", "0s", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Session != sid || rows[0].Versions == 0 {
		t.Fatalf("prune --all --before 0s: %+v", rows)
	}
	r := padfs(t, data, "prune", "--session", sid, "--before", "not-a-time")
	if r.code != 2 || !strings.Contains(r.errout, "not-a-time") {
		t.Fatalf("bad --before: exit %d %q", r.code, r.errout)
	}
	startMount(t, data, mnt, "--session", sid)
	if got := sh(t, data, mnt, "cat f.txt"); got != "v3\n" {
		t.Fatalf("f.txt after prune: %q", got)
	}
}
