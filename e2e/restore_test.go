package e2e

import (
	"os"
	"strings"
	"testing"
)

// treeState prints what a tree looks like to tools: per path its type,
// mode, link count, size, symlink target, content and xattrs, and which
// paths are one inode.
const treeState = `python3 - <<'EOF'
import os, stat
ino = {}
for root, dirs, files in os.walk('.'):
    dirs.sort()
    for n in sorted(dirs + files):
        p = os.path.join(root, n)
        st = os.lstat(p)
        line = [p, oct(st.st_mode), str(st.st_nlink)]
        if stat.S_ISLNK(st.st_mode):
            line.append('-> ' + os.readlink(p))
        elif stat.S_ISREG(st.st_mode):
            line.append(repr(open(p, 'rb').read()))
            line.append('same-as ' + ino.setdefault(st.st_ino, p))
        if not stat.S_ISLNK(st.st_mode):
            line.append(repr(sorted((a, os.getxattr(p, a)) for a in os.listxattr(p))))
        print(' '.join(line))
EOF
`

// TestRestoreBesideMount: padfs restore and padfs undo run beside a running
// mount (through its control socket) and the mount shows the old state at
// once — content, modes, symlinks, hard links and xattrs — with the kernel's
// caches primed with the newer state just before.
func TestRestoreBesideMount(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `
		echo one > a.txt
		python3 -c 'import os; os.setxattr("a.txt", "user.tag", b"v1")'
		mkdir -p d/sub
		echo bee > d/b.txt
		chmod 755 d/b.txt
		echo sea > d/sub/c
		ln -s a.txt link
		echo hard > h1
		ln h1 d/h2
	`)
	before := sh(t, data, mnt, treeState)
	if !strings.Contains(before, "user.tag") || !strings.Contains(before, "./d/h2 0o100644 2 b'hard\\n' same-as ./h1") {
		t.Fatalf("tree state misses the xattr or the hard link:\n%s", before)
	}
	at := mustPadfs(t, data, "now")
	sh(t, data, mnt, `
		echo changed > a.txt
		chmod 600 a.txt
		python3 -c 'import os; os.removexattr("a.txt", "user.tag")'
		rm -r d/sub
		mv h1 moved
		ln -sfn elsewhere link
		echo new > new.txt
		mkdir newdir && echo x > newdir/x
	`)
	messed := sh(t, data, mnt, treeState) // primes the kernel's caches
	if messed == before {
		t.Fatal("the changes changed nothing")
	}

	// --dry-run lists the changes and changes nothing.
	dry := mustPadfs(t, data, "restore", "--dry-run", "--asof", at)
	want := "M\ta.txt\nA\td/sub/\nA\td/sub/c\nR\tmoved\th1\nM\tlink\nD\tnew.txt\nD\tnewdir/\nD\tnewdir/x"
	if dry != want {
		t.Errorf("restore --dry-run:\n%s\nwant:\n%s", dry, want)
	}
	if got := sh(t, data, mnt, treeState); got != messed {
		t.Errorf("restore --dry-run changed the tree:\n%s", got)
	}

	// The whole tree, back at once.
	if out := mustPadfs(t, data, "restore", "--asof", at); out != want {
		t.Errorf("restore printed:\n%s\nwant:\n%s", out, want)
	}
	if got := sh(t, data, mnt, treeState); got != before {
		t.Errorf("mount after restore:\n%s\nwant (as of %s):\n%s", got, at, before)
	}
	log := mustPadfs(t, data, "log", "--since", at)
	if lines := strings.Split(log, "\n"); !strings.Contains(lines[len(lines)-1], " restore . (as of "+at) {
		t.Errorf("padfs log does not end with the restore:\n%s", log)
	}

	// Undo the restore: the messed-up tree is back.
	out := mustPadfs(t, data, "undo")
	if !strings.HasPrefix(out, "reverted: ") || !strings.Contains(out, " restore . ") || !strings.Contains(out, "\nD\td/sub/\n") {
		t.Errorf("undo printed:\n%s", out)
	}
	if got := sh(t, data, mnt, treeState); got != messed {
		t.Errorf("mount after undoing the restore:\n%s\nwant:\n%s", got, messed)
	}

	// One path only: a.txt comes back, the rest stays.
	if out := mustPadfs(t, data, "restore", "--asof", at, "a.txt", "d"); out != "M\ta.txt\nA\td/sub/\nA\td/sub/c" {
		t.Errorf("restore a.txt d printed:\n%s", out)
	}
	got := sh(t, data, mnt, `cat a.txt d/sub/c new.txt; readlink link; stat -c %a a.txt; test ! -e h1`)
	if got != "one\nsea\nnew\nelsewhere\n644\n" {
		t.Errorf("after restoring a.txt and d: %q", got)
	}
	// Relative paths from inside the mount name paths in the session.
	sh(t, data, mnt, `echo again > d/b.txt`)
	sh(t, data, mnt+"/d", `padfs restore --asof `+at+` b.txt >/dev/null`)
	if got := sh(t, data, mnt, `cat d/b.txt`); got != "bee\n" {
		t.Errorf("restore b.txt from inside d/: d/b.txt is %q", got)
	}

	// Nothing to restore: exit 1, no commit.
	n := len(strings.Split(mustPadfs(t, data, "log"), "\n"))
	if r := padfs(t, data, "restore", "--asof", "now", "a.txt"); r.code != 1 || r.out != "" {
		t.Errorf("restore of an unchanged path: exit %d %q %q", r.code, r.out, r.errout)
	}
	if m := len(strings.Split(mustPadfs(t, data, "log"), "\n")); m != n {
		t.Errorf("restore with nothing to do logged %d events", m-n)
	}

	// undo N counts tree commits; undo CHECKPOINT goes back to it.
	mustPadfs(t, data, "checkpoint", "--session", sid, "cp")
	sh(t, data, mnt, `mkdir u1; mkdir u2; mkdir u3`)
	out = mustPadfs(t, data, "undo", "2")
	if strings.Count(out, "reverted: ") != 2 || !strings.Contains(out, "mkdir u3") {
		t.Errorf("undo 2 printed:\n%s", out)
	}
	if got := sh(t, data, mnt, `ls -d u*`); got != "u1\n" {
		t.Errorf("after undo 2: %q, want u1 only", got)
	}
	mustPadfs(t, data, "undo", "cp")
	if r := shResult(t, data, mnt, `ls -d u*`); r.code == 0 {
		t.Errorf("after undo cp: %q still there", r.out)
	}
	if r := padfs(t, data, "undo", "100000"); r.code != 2 || !strings.Contains(r.errout, "commits to undo") {
		t.Errorf("undo 100000: exit %d %q", r.code, r.errout)
	}
}

// A second live session of a name is refused (exit 2, naming the first);
// session rename frees a name; forgetting the session a mount serves
// read-write is refused unless --force.
func TestSessionNamesAndForgetGuard(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	first := newSession(t, data, "work")
	r := padfs(t, data, "session", "new", "--name", "work")
	if r.code != 2 || r.out != "" || !strings.Contains(r.errout, first) || strings.Count(r.errout, "\n") != 1 {
		t.Errorf("second session named work: exit %d %q %q, want exit 2 naming %s", r.code, r.out, r.errout, first)
	}
	if r := padfs(t, data, "session", "fork", first, "--name", "work"); r.code != 2 || !strings.Contains(r.errout, first) {
		t.Errorf("fork named work: exit %d %q", r.code, r.errout)
	}
	mustPadfs(t, data, "session", "rename", "work", "work-old")
	second := newSession(t, data, "work")
	rows := sessionsJSON(t, data)
	if rows[first].Name != "work-old" || rows[second].Name != "work" {
		t.Errorf("after rename: %+v", rows)
	}
	if log := mustPadfs(t, data, "log", "--session", first); !strings.Contains(log, "session.rename . (work -> work-old)") {
		t.Errorf("log lacks the rename:\n%s", log)
	}

	startMount(t, data, mnt, "--session", "work")
	sh(t, data, mnt, "echo kept > f")
	r = padfs(t, data, "session", "forget", "work")
	if r.code != 2 || !strings.Contains(r.errout, "mounted read-write at "+mnt) || !strings.Contains(r.errout, "--force") {
		t.Errorf("forget of the mounted session: exit %d %q", r.code, r.errout)
	}
	if got := sh(t, data, mnt, "cat f"); got != "kept\n" {
		t.Errorf("the mount after a refused forget: %q", got)
	}
	// Another session of the same data directory is not mounted.
	mustPadfs(t, data, "session", "forget", first)
	mustPadfs(t, data, "session", "forget", "--force", second)
	if r := shResult(t, data, mnt, "echo more > g"); r.code == 0 {
		t.Errorf("a write to the forgotten session succeeded")
	}
}

// The patch of padfs diff -u, applied by git apply in a copy of the older
// .asof/ view, gives the newer view: text, binary, mode, symlink, new and
// deleted files, a renamed directory.
func TestDiffPatchAppliesWithGitApply(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `
		mkdir -p src lib
		seq 1 50 > src/n.txt
		head -c 3000 /dev/urandom > blob.bin
		printf 'x\000y' > small.bin
		echo run > run.sh
		echo bye > gone.txt
		echo lib > lib/l.txt
		ln -s src/n.txt link
	`)
	t1 := mustPadfs(t, data, "now")
	sh(t, data, mnt, `
		sed -i 's/^25$/twenty-five/' src/n.txt
		head -c 2000 /dev/urandom >> blob.bin
		printf 'x\000z' > small.bin
		chmod +x run.sh
		rm gone.txt
		mv lib library
		ln -sfn run.sh link
		head -c 100 /dev/urandom > new.bin
		echo new > src/new.txt
	`)
	t2 := mustPadfs(t, data, "now")
	r := padfs(t, data, "diff", "-u", t1, t2)
	if r.code != 0 || r.errout != "" || !strings.Contains(r.out, "GIT binary patch") {
		t.Fatalf("diff -u: exit %d stderr %q\n%s", r.code, r.errout, r.out)
	}
	work := t.TempDir()
	if err := os.WriteFile(work+"/p.patch", []byte(r.out), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, data, mnt, `
		cp -a .asof/`+t1+`/. `+work+`/tree
		chmod -R u+w `+work+`/tree
		cd `+work+`/tree && git apply ../p.patch
		diff -r --no-dereference `+work+`/tree `+mnt+`/.asof/`+t2+`
		test -x `+work+`/tree/run.sh
		test "$(readlink `+work+`/tree/link)" = run.sh
		test ! -e `+work+`/tree/gone.txt
	`)
	// What a patch cannot carry is named on stderr.
	sh(t, data, mnt, `mkdir empty`)
	r = padfs(t, data, "diff", "-u", t2)
	if r.code != 0 || !strings.Contains(r.errout, "padfs: diff -u cannot express: new empty directory empty/") {
		t.Errorf("diff -u of a new empty directory: exit %d stderr %q", r.code, r.errout)
	}
}
