package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/rawscan"
)

// Session lifecycle (issue 4) with real mounts and real commands: fork,
// soft and hard forget, redaction, the event log, checkpoints and diff.

// tokenOf finds the confirmation token in a receipt.
func tokenOf(t *testing.T, receipt string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^token: (\S+)$`).FindStringSubmatch(receipt)
	if m == nil {
		t.Fatalf("no token in the receipt:\n%s", receipt)
	}
	return m[1]
}

func TestForkThenEditBothSides(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	src := newSession(t, data, "main")
	startMount(t, data, mnt) // every session at the root
	sh(t, data, filepath.Join(mnt, src), `
		echo v1 > a.txt
		mkdir -p d && echo x > d/x && ln d/x hard
		ln -s d/x sym
		python3 -c 'import sys; sys.stdout.write("big line\n" * 100000)' > big.txt
	`)
	fork := mustPadfs(t, data, "session", "fork", src, "--name", "alt") // through the mount's socket
	if !regexp.MustCompile(`^[0-9A-Z]{26}$`).MatchString(fork) {
		t.Fatalf("fork printed %q, want only an id", fork)
	}
	out := sh(t, data, mnt, `
		S=`+src+` F=`+fork+`
		ls | sort | tr '\n' ' '; echo
		cmp $S/big.txt $F/big.txt && cat $F/a.txt $F/d/x && readlink $F/sym
		[ "$(stat -c %i $F/d/x)" = "$(stat -c %i $F/hard)" ] && echo hardlink kept
		[ "$(stat -c %i $F/d/x)" != "$(stat -c %i $S/d/x)" ] && echo new inode
		echo main >> $S/a.txt
		echo alt > $F/a.txt
		echo only > $F/only-alt
		rm $S/d/x
		cat $S/a.txt $F/a.txt
		test ! -e $S/only-alt && echo main does not see alt
		cat $F/d/x $F/hard
	`)
	want := strings.Join([]string{
		strings.Join(append(sortedIDs(src, fork), "by-name"), " ") + " ", // ids, then by-name/
		"v1", "x", "d/x", "hardlink kept", "new inode",
		"v1", "main", "alt", "main does not see alt", "x", "x", ""}, "\n")
	if out != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out, want)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(mustPadfs(t, data, "session", "ls", "--json")), &rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r["id"] == fork && (r["parent"] != src || r["forked_at"] == "") {
			t.Fatalf("fork row %v", r)
		}
	}
	if r := padfs(t, data, "session", "fork", src, "--id", fork); r.code != 2 || !strings.Contains(r.errout, "exists") {
		t.Fatalf("fork into an existing id: %+v", r)
	}
	log := mustPadfs(t, data, "log", "--session", fork)
	if !strings.HasPrefix(log, "1 ") || !strings.Contains(log, "session.fork . -> "+src) {
		t.Fatalf("fork log:\n%s", log)
	}
	// Inside a session's directory the session is implied.
	if got := sh(t, data, filepath.Join(mnt, fork, "d"), "padfs log"); !strings.HasPrefix(got, "1 ") || !strings.Contains(got, "session.fork") {
		t.Fatalf("padfs log inside the fork's directory: %q", got)
	}
}

func sortedIDs(ids ...string) []string {
	sort.Strings(ids)
	return ids
}

func TestSoftForgetThenAsOfRead(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data, "doomed")
	m := startMount(t, data, mnt)
	dir := filepath.Join(mnt, sid)
	sh(t, data, dir, `echo first > f.txt`)
	before := mustPadfs(t, data, "now")
	sh(t, data, dir, `echo second >> f.txt`)
	if out := mustPadfs(t, data, "session", "forget", sid); !strings.Contains(out, "forgot session "+sid) {
		t.Fatalf("forget said %q", out)
	}
	sh(t, data, mnt, `
		if ls | grep `+sid+` >/dev/null; then echo "still listed"; exit 1; fi
		if test -e `+sid+`; then echo "still reachable"; exit 1; fi
	`)
	// Its history: the log, a diff, and a fork of a past state, read
	// through the mount.
	log := mustPadfs(t, data, "log", "--session", sid)
	if !strings.Contains(lastLine(log), "session.forget") {
		t.Fatalf("log does not end with the forget:\n%s", log)
	}
	if d := mustPadfs(t, data, "diff", "--session", sid, before); d != "M\tf.txt" {
		t.Fatalf("diff across the forget: %q", d)
	}
	past := mustPadfs(t, data, "session", "fork", sid, "--asof", before)
	if got := sh(t, data, mnt, "cat "+past+"/f.txt"); got != "first\n" {
		t.Fatalf("as-of read of a forgotten session: %q", got)
	}
	if r := padfs(t, data, "session", "fork", sid); r.code != 2 || !strings.Contains(r.errout, "forgotten") {
		t.Fatalf("fork of a forgotten session now: %+v", r)
	}
	m.stop()
	// Mounting it is refused.
	mnt2 := filepath.Join(t.TempDir(), "m2")
	os.Mkdir(mnt2, 0o755)
	if _, err := tryMount(t, data, mnt2, "--session", sid); err == nil || !strings.Contains(err.Error(), "forgotten") {
		t.Fatalf("mount of a forgotten session: %v", err)
	}
	// ... unless read-only as of a time before the forget.
	ro := startMount(t, data, mnt2, "--session", sid, "--asof", before)
	if got := sh(t, data, mnt2, "cat f.txt"); got != "first\n" {
		t.Fatalf("read-only as-of mount shows %q", got)
	}
	if r := shResult(t, data, mnt2, "echo x > g.txt"); r.code == 0 || !strings.Contains(r.errout, "Read-only file system") {
		t.Fatalf("write into a read-only as-of mount: %+v", r)
	}
	ro.stop()
	if _, err := tryMount(t, data, mnt2, "--session", sid, "--asof", "not-a-time"); err == nil || !strings.Contains(err.Error(), "not-a-time") {
		t.Fatalf("mount --asof with a malformed time: %v", err)
	}
	if r := padfs(t, data, "session", "ls", "--all"); !strings.Contains(r.out, sid) {
		t.Fatalf("session ls --all does not show it: %s", r.out)
	}
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndex(s, "\n")+1:]
}

func TestLogSinceIsExclusiveAndDotLog(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `echo a > f; mkdir d; echo b > d/g; mv f d/f; rm d/g`)
	all := mustPadfs(t, data, "log", "--json")
	lines := strings.Split(all, "\n")
	if len(lines) < 6 {
		t.Fatalf("log:\n%s", all)
	}
	type ev struct {
		Seq  uint64 `json:"seq"`
		HLC  string `json:"hlc"`
		Op   string `json:"op"`
		Path string `json:"path"`
	}
	evs := make([]ev, len(lines))
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &evs[i]); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		if evs[i].Seq != uint64(i+1) {
			t.Fatalf("seq %d at line %d", evs[i].Seq, i+1)
		}
	}
	for k := range evs {
		want := strings.Join(lines[k+1:], "\n")
		for _, since := range []string{itoa(evs[k].Seq), evs[k].HLC} {
			r := padfs(t, data, "log", "--json", "--since", since)
			if k == len(evs)-1 {
				if r.code != 1 || r.out != "" {
					t.Fatalf("--since the last event: exit %d, %q", r.code, r.out)
				}
				continue
			}
			if r.code != 0 || strings.TrimSpace(r.out) != want {
				t.Fatalf("--since %s: exit %d\n%s\nwant:\n%s", since, r.code, r.out, want)
			}
		}
	}
	// The hidden JSON-lines file, and its since-N form.
	out := sh(t, data, mnt, `
		ls -a | grep -c '^\.log$' || true
		cat .log/events.jsonl
		echo ---
		cat .log/3
		echo ---
		tail -n 1 .log/events.jsonl | jq -r .op
	`)
	parts := strings.Split(out, "---\n")
	if parts[0] != "0\n"+all+"\n" {
		t.Fatalf(".log/events.jsonl:\n%s\nwant:\n%s", parts[0], all)
	}
	if parts[1] != strings.Join(lines[3:], "\n")+"\n" {
		t.Fatalf(".log/3:\n%s", parts[1])
	}
	if parts[2] != "unlink\n" {
		t.Fatalf("jq of the last line: %q", parts[2])
	}
	// PATH filter, relative to the mount when run inside it.
	inD := sh(t, data, filepath.Join(mnt, "d"), "padfs log f")
	if n := strings.Count(inD, "\n"); n != 1 || !strings.Contains(inD, "rename f -> d/f") {
		t.Fatalf("padfs log f inside d/:\n%s", inD)
	}
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

func TestCheckpointNameInAsof(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `echo one > f`)
	at := mustPadfs(t, data, "checkpoint", "before-edit") // session from the mount
	sh(t, data, mnt, `echo two > f`)
	out := sh(t, data, mnt, `ls .asof/ | grep -x before-edit; cat .asof/before-edit/f; cat f`)
	if out != "before-edit\none\ntwo\n" {
		t.Fatalf("got %q", out)
	}
	if got := mustPadfs(t, data, "checkpoint", "--list"); got != "before-edit "+at {
		t.Fatalf("--list: %q", got)
	}
	for _, bad := range []string{"before-edit", "2026-01-01T00:00:00Z", "a/b", "..", "123"} {
		r := padfs(t, data, "checkpoint", bad)
		if r.code != 2 || strings.Count(r.errout, "\n") != 1 {
			t.Fatalf("checkpoint %q: exit %d %q", bad, r.code, r.errout)
		}
	}
	if d := mustPadfs(t, data, "diff", "before-edit"); d != "M\tf" {
		t.Fatalf("diff before-edit: %q", d)
	}
}

// hunksByFile splits a recursive unified diff into file -> hunks (from the
// first "@@"), or "binary" for GNU's "Binary files" line and padfs's git
// binary patch, keyed by the path below the
// compared roots.
func hunksByFile(t *testing.T, diff string, headerPath func(line string) string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var cur string
	binary := false // in a git binary patch (padfs), until the next file
	for _, l := range strings.SplitAfter(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "diff "):
			f := strings.Fields(l)
			cur, binary = headerPath(f[len(f)-1]), false
		case binary:
		case strings.HasPrefix(l, "GIT binary patch"):
			out[cur], binary = "binary", true
		case strings.HasPrefix(l, "new file mode"), strings.HasPrefix(l, "deleted file mode"),
			strings.HasPrefix(l, "old mode"), strings.HasPrefix(l, "new mode"),
			strings.HasPrefix(l, "index "), strings.HasPrefix(l, "similarity index "):
		case strings.HasPrefix(l, "--- "), strings.HasPrefix(l, "+++ "):
			if p := strings.TrimSpace(strings.SplitN(l[4:], "\t", 2)[0]); p != "/dev/null" {
				cur = headerPath(p)
			}
		case strings.HasPrefix(l, "Binary files "):
			f := strings.Fields(l)
			out[headerPath(f[2])] = "binary"
		default:
			out[cur] += l
		}
	}
	return out
}

// TestAsofListsFewPoints: 1,000 create-and-remove pairs make 2,000
// commits; ls .asof/ lists a handful of points (the rule is
// timetravel.Listed, tested there over a month of commits), padfs log
// still lists every commit, and each commit's HLC still resolves in
// .asof/ to the state it made.
func TestAsofListsFewPoints(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `for i in $(seq 1 1000); do echo "$i" > f; rm f; done; echo last > f`)
	pts := strings.Fields(sh(t, data, mnt, "ls .asof/"))
	if len(pts) < 2 || len(pts) > 3 {
		t.Errorf("ls .asof/ after 2,001 commits lists %d points, want 2-3: %q", len(pts), pts)
	}
	if got := sh(t, data, filepath.Join(mnt, ".asof", pts[len(pts)-1]), "cat f"); got != "last\n" {
		t.Errorf(".asof/%s (the last point) f = %q", pts[len(pts)-1], got)
	}
	// The commit before each unlink left f holding that round's number.
	var written []string
	prev := ""
	for _, line := range strings.Split(strings.TrimSpace(mustPadfs(t, data, "log", "--session", sid, "--json")), "\n") {
		var ev struct{ HLC, Op, Path string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log --json line %q: %v", line, err)
		}
		if ev.Op == "unlink" && ev.Path == "f" {
			written = append(written, prev)
		}
		prev = ev.HLC
	}
	if len(written) != 1000 {
		t.Fatalf("padfs log lists %d unlinks of f, want 1000", len(written))
	}
	for _, i := range []int{0, 499, 999} {
		if got := sh(t, data, filepath.Join(mnt, ".asof", written[i]), "cat f"); got != strconv.Itoa(i+1)+"\n" {
			t.Errorf(".asof/%s (before unlink %d) f = %q", written[i], i+1, got)
		}
	}
}

func TestDiffMatchesGNUDiffOfAsofViews(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `
		mkdir -p src docs
		seq 1 200 > src/numbers.txt
		python3 - <<'EOF'
for i in range(30):
    with open(f"src/mod{i}.go", "w") as f:
        for j in range(60):
            f.write(f"func f{j}() {{\n\treturn {j % 4}\n}}\n\n")
EOF
		printf 'no newline at the end' > docs/nonl.txt
		printf 'bin\000ary' > blob.bin
		echo gone > docs/old.txt
	`)
	t1 := mustPadfs(t, data, "now")
	sh(t, data, mnt, `
		sed -i -e '50,55d' -e 's/^120$/one-twenty/' -e '199a extra' src/numbers.txt
		for i in 3 7 11 19; do sed -i -e "s/return 2/return 42/; 30i // inserted $i" src/mod$i.go; done
		sed -i '1,4d' src/mod25.go
		printf 'no newline at the end, still' > docs/nonl.txt
		printf 'bin\000ARY' > blob.bin
		rm docs/old.txt
		echo fresh > docs/new.txt
	`)
	t2 := mustPadfs(t, data, "now")

	r := padfs(t, data, "diff", "-u", t1, t2)
	if r.code != 0 {
		t.Fatalf("padfs diff -u: exit %d %s", r.code, r.errout)
	}
	ours := hunksByFile(t, r.out, func(p string) string {
		return strings.TrimPrefix(strings.TrimPrefix(p, "b/"), "a/")
	})
	// GNU: the two read-only views, with -N for added and deleted files.
	g := shResult(t, data, mnt, "diff -ruN .asof/"+t1+" .asof/"+t2)
	if g.code != 1 {
		t.Fatalf("GNU diff: exit %d %s", g.code, g.errout)
	}
	gnu := hunksByFile(t, g.out, func(p string) string {
		for _, root := range []string{".asof/" + t1 + "/", ".asof/" + t2 + "/"} {
			p = strings.TrimPrefix(p, root)
		}
		return p
	})
	if len(ours) != len(gnu) || len(ours) != 10 {
		t.Fatalf("files: padfs %d, GNU %d (want 10)\npadfs:\n%s\nGNU:\n%s", len(ours), len(gnu), r.out, g.out)
	}
	for f, h := range gnu {
		if ours[f] != h {
			t.Errorf("%s: padfs hunks differ from GNU diff -u\n--- padfs\n%s\n--- GNU\n%s", f, ours[f], h)
		}
	}
	st := mustPadfs(t, data, "diff", t1, t2)
	want := "M\tblob.bin\nA\tdocs/new.txt\nM\tdocs/nonl.txt\nD\tdocs/old.txt\nM\tsrc/mod11.go\nM\tsrc/mod19.go\nM\tsrc/mod25.go\nM\tsrc/mod3.go\nM\tsrc/mod7.go\nM\tsrc/numbers.txt"
	if st != want {
		t.Fatalf("name-status:\n%s\nwant:\n%s", st, want)
	}
	if r := padfs(t, data, "diff", t2, t2); r.code != 1 || r.out != "" {
		t.Fatalf("no changes: exit %d %q", r.code, r.out)
	}
}

func TestHardForgetLeavesNoByteInDataDir(t *testing.T) {
	needFUSE(t)
	const inline, chunked, kept = "PADFS-MARKER-inline-93ac1f", "PADFS-MARKER-chunked-5d20e7", "PADFS-MARKER-kept-77b1c4"
	data, mnt := dirs(t)
	keep := newSession(t, data, "keep")
	sid := newSession(t, data, "secret")
	m := startMount(t, data, mnt)
	sh(t, data, mnt, `
		echo "`+kept+`" > `+keep+`/k.txt
		cd `+sid+`
		echo "note `+inline+`" > notes.txt
		echo "edited" > notes.txt
		mkdir -p deep && python3 -c '
import random, sys
r = random.Random(5)
for i in range(40000):
    sys.stdout.write("".join(r.choice("abcdefgh ") for _ in range(30)) + ("`+chunked+`" if i % 5000 == 7 else "") + "\n")
' > deep/big.txt
		python3 -c 'import os; os.setxattr("notes.txt", "user.note", b"`+inline+`")'
		ln -s "`+inline+`" marker-link
	`)
	mustPadfs(t, data, "checkpoint", "--session", sid, "cp1")
	if len(rawscan.Hits(t, data, inline)) == 0 || len(rawscan.Hits(t, data, chunked)) == 0 {
		t.Fatal("markers are not on disk before the purge: the test would prove nothing")
	}
	// The session's search index exists (built now rather than waiting
	// for the mount's background catch-up).
	mustPadfs(t, data, "reindex", "--session", sid)
	indexDir := filepath.Join(data, "index", sid)
	if _, err := os.Stat(indexDir); err != nil {
		t.Fatalf("no search index for the session: %v", err)
	}
	receipt := mustPadfs(t, data, "session", "forget", "--hard", sid)
	for _, w := range []string{"files:    3", "chunks:", "bytes:"} {
		if !strings.Contains(receipt, w) {
			t.Fatalf("receipt lacks %q:\n%s", w, receipt)
		}
	}
	token := tokenOf(t, receipt)
	// Wrong and stale tokens purge nothing.
	if r := padfs(t, data, "session", "forget", "--hard", sid, "--confirm", "forget-0123456789abcdef01234567"); r.code != 2 || !strings.Contains(r.errout, "nothing was purged") {
		t.Fatalf("wrong token: %+v", r)
	}
	sh(t, data, mnt, "echo more >> "+sid+"/notes.txt")
	if r := padfs(t, data, "session", "forget", "--hard", sid, "--confirm", token); r.code != 2 || !strings.Contains(r.errout, "stale") {
		t.Fatalf("stale token: %+v", r)
	}
	if got := sh(t, data, mnt, "cat "+sid+"/notes.txt"); got != "edited\nmore\n" {
		t.Fatalf("a refused purge changed the session: %q", got)
	}
	token = tokenOf(t, mustPadfs(t, data, "session", "forget", "--hard", sid))
	r := padfs(t, data, "session", "forget", "--hard", sid, "--confirm", token)
	if r.code != 0 || !strings.Contains(r.out, "purged session "+sid) || !strings.Contains(r.errout, "compacting") {
		t.Fatalf("purge: exit %d\n%s\n%s", r.code, r.out, r.errout)
	}
	sh(t, data, mnt, `test ! -e `+sid+` && ! ls | grep `+sid+` >/dev/null`)
	if _, err := os.Stat(indexDir); !os.IsNotExist(err) {
		t.Fatalf("search index of the purged session: %v", err)
	}
	for _, marker := range []string{inline, chunked} {
		if hits := rawscan.Hits(t, data, marker); len(hits) > 0 {
			t.Fatalf("%s still in %v (mount running)", marker, hits)
		}
	}
	m.stop()
	for _, marker := range []string{inline, chunked} {
		if hits := rawscan.Hits(t, data, marker); len(hits) > 0 {
			t.Fatalf("%s still in %v (after unmount)", marker, hits)
		}
	}
	if len(rawscan.Hits(t, data, kept)) == 0 {
		t.Fatal("the other session's content is gone too")
	}
	if r := padfs(t, data, "log", "--session", sid); r.code != 2 {
		t.Fatalf("log of a purged session: %+v", r)
	}
}

func TestRedactLeavesHistoryShapeAndNoNeedle(t *testing.T) {
	needFUSE(t)
	const needle = "sk-live-51H8xQ-padfs-e2e"
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `echo "API_KEY=`+needle+`" > .env; echo clean > other.txt`)
	t1 := mustPadfs(t, data, "now")
	sh(t, data, mnt, `
		echo "again: `+needle+`" >> .env
		python3 -c '
import random, sys
r = random.Random(9)
for i in range(30000):
    sys.stdout.write("".join(r.choice("xyz ") for _ in range(40)) + (" `+needle+`" if i % 7000 == 3 else "") + "\n")
' > big.log
		ln -s "/secrets/`+needle+`" link
		cat .env >/dev/null
	`)
	mustPadfs(t, data, "reindex") // the index knows the needle's words
	if out := mustPadfs(t, data, "search", "--json", "padfs", "e2e"); !strings.Contains(out, `"path":".env"`) {
		t.Fatalf("search before the redaction: %s", out)
	}
	logBefore := mustPadfs(t, data, "log", "--json")
	receipt := mustPadfs(t, data, "redact", "--text", needle)
	if !strings.Contains(receipt, "versions:    ") {
		t.Fatalf("receipt:\n%s", receipt)
	}
	if r := padfs(t, data, "redact", "--text", needle, "--confirm", "redact-nope"); r.code != 2 {
		t.Fatalf("wrong token: %+v", r)
	}
	// The token is bound to the replacement too.
	if r := padfs(t, data, "redact", "--text", needle, "--replace", "***", "--confirm", tokenOf(t, receipt)); r.code != 2 {
		t.Fatalf("token of another replacement: %+v", r)
	}
	// The needle from stdin keeps it off the command line.
	r := runCmd(t, withStdin(data, needle+"\n", "redact", "--text", "-", "--confirm", tokenOf(t, receipt)))
	if r.code != 0 || !strings.Contains(r.out, "redacted session "+sid) {
		t.Fatalf("redact: exit %d\n%s\n%s", r.code, r.out, r.errout)
	}
	out := sh(t, data, mnt, `cat .env; cat .asof/`+t1+`/.env; readlink link; grep -c REDACTED big.log; cat other.txt`)
	if out != "API_KEY=[REDACTED]\nagain: [REDACTED]\nAPI_KEY=[REDACTED]\n/secrets/[REDACTED]\n5\nclean\n" {
		t.Fatalf("after redaction:\n%s", out)
	}
	logAfter := mustPadfs(t, data, "log", "--json")
	before, after := strings.Split(logBefore, "\n"), strings.Split(logAfter, "\n")
	if len(after) != len(before)+1 || !strings.Contains(after[len(after)-1], `"op":"session.redact"`) {
		t.Fatalf("log after:\n%s", logAfter)
	}
	for i := range before {
		var a, b map[string]any
		json.Unmarshal([]byte(before[i]), &a)
		json.Unmarshal([]byte(after[i]), &b)
		if a["seq"] != b["seq"] || a["hlc"] != b["hlc"] || a["op"] != b["op"] || a["path"] != b["path"] {
			t.Fatalf("event changed shape:\n%s\n%s", before[i], after[i])
		}
	}
	if hits := rawscan.Hits(t, data, needle); len(hits) > 0 {
		t.Fatalf("needle still in %v", hits)
	}
	// The rebuilt index no longer has its words.
	if r := padfs(t, data, "search", "--json", "padfs", "e2e"); r.code != 1 {
		t.Fatalf("search after the redaction: exit %d %s", r.code, r.out)
	}
	// A needle in a file name is refused with one line, nothing changed.
	sh(t, data, mnt, `echo x > "name-`+needle[:10]+`.txt"`)
	if r := padfs(t, data, "redact", "--text", needle[:10]); r.code != 2 || !strings.Contains(r.errout, "names") {
		t.Fatalf("needle in a name: %+v", r)
	}
}

// withStdin is a padfs command with stdin.
func withStdin(data, stdin string, args ...string) *exec.Cmd {
	cmd := exec.Command(padfsBin, append([]string{"--data", data}, args...)...)
	cmd.Env = env(data)
	cmd.Stdin = strings.NewReader(stdin)
	return cmd
}
