package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// A secret committed with git on the mount lives on in zlib-compressed
// objects that redaction cannot rewrite: the receipt and the redaction must
// say so, file by file, instead of claiming the text is gone.
func TestRedactListsCompressedFiles(t *testing.T) {
	needFUSE(t)
	const needle = "sk-live-git-9f3Q-padfs"
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `
		git init -q repo && cd repo
		echo "token=`+needle+`" > config.txt
		git add config.txt && git commit -qm 'add config'
		cd ..
		printf 'notes: `+needle+`\n' | gzip > notes.gz
		seq 1 20000 | gzip | head -c 3000 > broken.gz
		echo "only-gzipped-4711" | gzip > other.gz
	`)
	objects := strings.Fields(sh(t, data, mnt, `cd repo/.git/objects && find . -type f | sed 's|^\./|repo/.git/objects/|' | sort`))
	if len(objects) != 3 { // blob, tree, commit
		t.Fatalf("git objects: %v", objects)
	}

	receipt := mustPadfs(t, data, "redact", "--text", needle)
	for _, want := range []string{"versions:    1", "NOT redacted: 2 files", "notes.gz  (gzip, 1 version)", "Not inspected: 1 compressed files",
		"broken.gz  (gzip, 1 version, could not inspect: ", "git filter-repo", "git gc --prune=now"} {
		if !strings.Contains(receipt, want) {
			t.Fatalf("receipt lacks %q:\n%s", want, receipt)
		}
	}
	// Only the blob holds the secret; the tree and commit do not.
	blobs := 0
	for _, o := range objects {
		if strings.Contains(receipt, o+"  (git object, ") { // git writes it in several commits
			blobs++
		}
	}
	if blobs != 1 {
		t.Fatalf("receipt names %d of the git objects %v, want the blob:\n%s", blobs, objects, receipt)
	}

	var js struct {
		Versions    int `json:"versions"`
		NotRedacted []struct {
			Path, Format, Status, Advice string
		} `json:"not_redacted"`
	}
	if err := json.Unmarshal([]byte(mustPadfs(t, data, "redact", "--json", "--text", needle)), &js); err != nil {
		t.Fatal(err)
	}
	if js.Versions != 1 || len(js.NotRedacted) != 3 || js.NotRedacted[0].Path != "broken.gz" ||
		js.NotRedacted[1].Path != "notes.gz" || js.NotRedacted[1].Status != "contains" ||
		!strings.HasPrefix(js.NotRedacted[2].Path, "repo/.git/objects/") || js.NotRedacted[2].Format != "git object" {
		t.Fatalf("json receipt: %+v", js)
	}

	// The confirm step rewrites what it can and says what remained.
	out := mustPadfs(t, data, "redact", "--text", needle, "--confirm", tokenOf(t, receipt))
	if !strings.Contains(out, "redacted session "+sid+": 1 occurrences") ||
		!strings.Contains(out, "NOT redacted: 2 files") || !strings.Contains(out, "notes.gz  (gzip") {
		t.Fatalf("redact:\n%s", out)
	}
	got := sh(t, data, mnt, `cat repo/config.txt; cd repo && git cat-file -p HEAD:config.txt; zcat ../notes.gz`)
	if got != "token=[REDACTED]\ntoken="+needle+"\nnotes: "+needle+"\n" {
		t.Fatalf("after the redaction:\n%s", got)
	}

	// git gc packs the objects: the pack holds the secret too, and the
	// loose object's old versions stay in padfs's history.
	pack := strings.TrimSpace(sh(t, data, mnt, `cd repo && git gc -q && ls .git/objects/pack/*.pack`))
	r := padfs(t, data, "redact", "--text", needle)
	if r.code != 0 || !strings.Contains(r.out, "written out in no version") || !strings.Contains(r.out, "repo/"+pack+"  (git pack, ") ||
		!strings.Contains(r.out, "repo/.git/objects/") {
		t.Fatalf("after git gc: exit %d\n%s%s", r.code, r.out, r.errout)
	}

	// Text that is only compressed: nothing to rewrite, but not "nowhere".
	r = padfs(t, data, "redact", "--text", "only-gzipped-4711")
	if r.code != 0 || !strings.Contains(r.out, "written out in no version") || !strings.Contains(r.out, "other.gz  (gzip, 1 version)") ||
		strings.Contains(r.out, "token:") {
		t.Fatalf("compressed only: exit %d\n%s%s", r.code, r.out, r.errout)
	}
	if r := padfs(t, data, "redact", "--text", "nowhere-at-all-123"); r.code != 1 || !strings.Contains(r.out, "occurs in no version") || !strings.Contains(r.out, "broken.gz") {
		t.Fatalf("absent text: exit %d\n%s%s", r.code, r.out, r.errout)
	}
}
