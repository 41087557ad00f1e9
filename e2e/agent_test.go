package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// srcTrees is a slice of Go's own source tree: about 380 files, 2.7 MB.
var srcTrees = []string{"go/ast", "go/build", "go/doc", "go/parser", "go/printer", "go/scanner", "go/token", "text/template"}

// makeTarball packs srcTrees into a tar file outside any mount.
func makeTarball(t *testing.T) string {
	t.Helper()
	tarball := filepath.Join(t.TempDir(), "src.tar")
	sh(t, "", goRootSrc, "tar -cf "+tarball+" "+strings.Join(srcTrees, " "))
	return tarball
}

// agentSteps is the scripted agent session of issue 2, one shell step at a
// time, run with the mount as working directory. $TARBALL is a tar of a
// real source tree.
var agentSteps = []struct{ name, script string }{
	{"tar -x", `mkdir src && tar -xf "$TARBALL" -C src && test "$(find src -type f | wc -l)" -gt 300`},
	{"git init/add/commit", `
git init -q -b main
git add -A
git commit -q -m "import go sources"
test -z "$(git status --porcelain)"
git log --oneline | grep "import go sources" >/dev/null
git fsck --full --strict --no-progress`},
	{"sed -i", `
sed -i 's/Copyright/COPYRIGHT/' src/go/ast/*.go src/text/template/*.go
git status --porcelain | grep '^ M src/go/ast/ast.go' >/dev/null
git commit -q -am "shout copyrights"
git fsck --full --no-progress`},
	{"python writes files", `
python3 - <<'PY'
import os, random, json
rnd = random.Random(42)
os.makedirs("gen/nested/deeper", exist_ok=True)
for i in range(40):
    with open(f"gen/file_{i}.txt", "w") as f:
        f.write(f"generated file {i}\n" * (i * 7 + 1))
with open("gen/data.bin", "wb") as f:          # 3 MB of noise, in 64 KB writes
    for _ in range(48):
        f.write(rnd.randbytes(64 * 1024))
with open("gen/nested/deeper/config.json", "w") as f:
    json.dump({"name": "padfs", "items": list(range(100))}, f, indent=2)
with open("gen/file_5.txt", "r+") as f:          # rewrite in place at an offset
    f.seek(10)
    f.write("PATCHED")
with open("gen/file_6.txt", "a") as f:
    f.write("appended by python\n")
PY
test "$(ls gen | wc -l)" -eq 42`},
	{">> appends", `
for i in $(seq 1 100); do echo "line $i" >> notes.log; done
printf 'tail' >> gen/data.bin
echo "more" >> src/go/ast/ast.go
test "$(wc -l < notes.log)" -eq 100`},
	{"mv rm mkdir -p ln -s ln chmod +x run", `
mkdir -p deep/a/b/c
mv src/go/token deep/a/b/c/
mv notes.log deep/notes.log
mv src/go/printer src/go/printer2
rm -r src/go/scanner
rm gen/file_0.txt gen/file_1.txt
ln -s ../deep/a/b/c/token src/token-link
ln -s /nonexistent/dangling dangling
ln deep/notes.log hard.log
echo "via hard link" >> hard.log
grep -q "via hard link" deep/notes.log
cat > run.sh <<'SH'
#!/bin/bash
set -e
echo "ran" > ran.txt
ls deep/a/b/c/token | wc -l >> ran.txt
cat src/token-link/token.go | wc -l >> ran.txt
SH
chmod +x run.sh
./run.sh
test "$(head -1 ran.txt)" = ran`},
	{"truncate", `
truncate -s 10 gen/file_3.txt
truncate -s 0 ran.txt
truncate -s 100000 grown.bin
truncate -s 5000 gen/file_7.txt
: > emptied.txt`},
	{"sparse writes", `
dd if=/dev/urandom of=sparse.bin bs=4096 count=2 seek=1000 status=none
truncate -s 16M hole.bin
dd if=/dev/urandom of=hole.bin bs=64K count=1 seek=100 conv=notrunc status=none
printf 'X' | dd of=gen/data.bin bs=1 seek=100 conv=notrunc status=none
test "$(stat -c %s sparse.bin)" -eq $((1002 * 4096))`},
	{"git add/commit/gc/fsck", `
git add -A
git commit -q -m "agent work"
test -z "$(git status --porcelain)"
git gc -q
git fsck --full --strict --no-progress
test "$(git log --oneline | wc -l)" -eq 3`},
	{"rm -rf a tree, chmod", `
rm -rf src/go/doc
test ! -e src/go/doc
chmod 600 gen/file_2.txt
chmod 700 deep
chmod 4755 run.sh
git status --porcelain | grep '^ D src/go/doc/' >/dev/null`},
}

// TestScriptedAgentSession runs the agent session of issue 2 on a mount,
// records `padfs now` and a copy of the tree after every step, and then
// checks that every .asof/<hlc>/ equals its copy.
func TestScriptedAgentSession(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	snaps := t.TempDir()
	sid := newSession(t, data, "agent")
	m := startMount(t, data, mnt, "--session", "agent") // by name
	if !strings.Contains(m.banner, sid) || !strings.Contains(m.banner, mnt) {
		t.Errorf("banner %q does not name the session and mountpoint", m.banner)
	}
	tarball := makeTarball(t)

	type point struct{ step, hlc, copy string }
	var points []point
	for i, step := range agentSteps {
		sh(t, data, mnt, "export TARBALL="+tarball+"\n"+step.script)
		hlc := mustPadfs(t, data, "now")
		copyDir := filepath.Join(snaps, fmt.Sprintf("step%02d", i+1))
		sh(t, data, mnt, "mkdir "+copyDir+" && cp -a . "+copyDir+"/")
		points = append(points, point{step.name, hlc, copyDir})
		t.Logf("step %d %q done at %s", i+1, step.name, hlc)
	}

	// .asof/ is hidden from the copies (cp -a never descended into it).
	for _, p := range points {
		if _, err := os.Lstat(filepath.Join(p.copy, ".asof")); !os.IsNotExist(err) {
			t.Fatalf("copy after %q contains .asof (err %v): .asof must be hidden from readdir", p.step, err)
		}
	}
	// Every recorded instant shows exactly the tree of that moment.
	for _, p := range points {
		requireSameTree(t, "after step "+p.step, p.copy, filepath.Join(mnt, ".asof", p.hlc))
	}
	requireSameTree(t, "live tree", points[len(points)-1].copy, mnt)

	// The past is a working git repository too (read-only).
	gitPast := filepath.Join(mnt, ".asof", points[2].hlc)
	out := sh(t, data, gitPast, "git --no-optional-locks log --oneline | wc -l; git fsck --no-progress --connectivity-only 2>&1 >/dev/null | wc -l")
	if f := strings.Fields(out); len(f) != 2 || f[0] != "2" || f[1] != "0" {
		t.Errorf("git in .asof after step 3: want 2 commits and a clean fsck, got %q", out)
	}

	// ls .asof/ lists points, oldest first, in canonical HLC text.
	d, err := os.Open(filepath.Join(mnt, ".asof"))
	if err != nil {
		t.Fatal(err)
	}
	names, err := d.Readdirnames(-1) // in the order the file system lists them
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The steps ran within minutes: a point per 10-minute window at most
	// (timetravel.Listed), however many commits git made.
	if len(names) < 2 || len(names) > 4 || !sort.StringsAreSorted(names) {
		t.Errorf(".asof lists %d points (sorted: %v), want 2-4 in order: %q", len(names), sort.StringsAreSorted(names), names)
	}
	m.stop()
}
