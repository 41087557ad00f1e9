package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Getting work in and out (issue 11 part 4): session new --from, export as
// tar and into a directory, session export / import.

// makeImportTree builds a host tree with what an import must keep: modes
// (setuid, a private directory), owners, symlinks (one dangling), hard
// links, user.* xattrs on files and directories, empty directories, a
// non-UTF-8 name, a file above one chunk batch and a copy of it (deduped),
// a sparse file, a fifo, old mtimes.
func makeImportTree(t *testing.T, data string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "src")
	sh(t, data, filepath.Dir(src), `
mkdir -p src/a/empty src/b/deep/er src/private
cd src
echo hello > a/f; chmod 4755 a/f
ln a/f b/hard; ln a/f hard2
ln -s ../a/f b/sym; ln -s nowhere dangling
printf 'latin-1 name\n' > $'caf\xe9'
chmod 0700 private; echo secret > private/key; chmod 0600 private/key
chown 1234:2345 private/key
head -c 6000000 /dev/urandom > big; cp big big-copy
truncate -s 8M sparse; echo tail >> sparse
mkfifo fifo
python3 -c '
import os
os.setxattr("a/f", "user.color", b"red")
os.setxattr("a", "user.dir", b"\x00\xffbinary")
os.setxattr("big", "user.empty", b"")
'
touch -h -d '2001-02-03 04:05:06.123456789' b/sym a/empty a/f
touch -d '1999-12-31 23:59:59.5' b/deep
`)
	return src
}

// listing describes a tree with find -printf (type, mode, owner, links,
// size of non-directories, mtime to the ns, link target), the sha256 of
// every regular file, and every user.* xattr: what must survive a copy.
func listing(t *testing.T, data, dir string) string {
	t.Helper()
	return sh(t, data, dir, `
find . -printf '%P|%y|%m|%U:%G|%n|%T@|%l|' -a \( -type d -printf '\n' -o -printf '%s\n' \) | LC_ALL=C sort
find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum
python3 -c '
import os, sys
out = []
for root, dirs, files in os.walk(b"."):
    for n in [root] + [os.path.join(root, f) for f in dirs + files]:
        for a in sorted(os.listxattr(n, follow_symlinks=False)):
            if a.startswith("user."):
                out.append(b"%s %s=%s" % (n, a.encode(), os.getxattr(n, a, follow_symlinks=False).hex().encode()))
sys.stdout.buffer.write(b"\n".join(sorted(out)) + b"\n")
'
`)
}

func sameListing(t *testing.T, what, want, got string) {
	t.Helper()
	if want == got {
		return
	}
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			t.Fatalf("%s differs from the source at line %d:\n  want %q\n  got  %q\nwhole listing:\n%s", what, i+1, wl, gl, got)
		}
	}
}

// TestSessionNewFromAndExport: session new --from beside a running mount of
// all sessions shows the tree at once, equal to the source in every
// attribute; export -o f.tar extracted by GNU tar --xattrs, and export
// --to DIR, give the source back.
func TestSessionNewFromAndExport(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	src := makeImportTree(t, data)
	want := listing(t, data, src)
	if !strings.Contains(want, "user.color=726564") || !strings.Contains(want, "caf\xe9|f|644") {
		t.Fatalf("the source tree lacks what it should hold:\n%s", want)
	}
	startMount(t, data, mnt)

	r := padfs(t, data, "session", "new", "--name", "imp", "--from", src)
	id := strings.TrimSpace(r.out)
	if r.code != 0 || len(id) != 26 {
		t.Fatalf("session new --from: exit %d %q %q", r.code, r.out, r.errout)
	}
	if !strings.Contains(r.errout, "1 hard links") && !strings.Contains(r.errout, "2 hard links") {
		t.Errorf("import summary %q", r.errout)
	}
	// One commit, one event.
	if log := mustPadfs(t, data, "log", "--session", id); strings.Count(log, "\n") != 0 || !strings.Contains(log, "session.import") {
		t.Errorf("log of the imported session:\n%s", log)
	}
	sameListing(t, "the mounted import", want, listing(t, data, filepath.Join(mnt, "imp")))
	sameListing(t, "the mounted import by id", want, listing(t, data, filepath.Join(mnt, id)))
	// The copy of big was deduplicated: its bytes were stored once.
	if m := regexp.MustCompile(`, (\d+) bytes \((\d+) new\)`).FindStringSubmatch(r.errout); m == nil {
		t.Errorf("import summary %q", r.errout)
	} else if total, _ := strconv.Atoi(m[1]); total < 20_000_000 {
		t.Errorf("import summary counts %d bytes: %q", total, r.errout)
	} else if stored, _ := strconv.Atoi(m[2]); stored > 6_100_000 {
		t.Errorf("import stored %d bytes for 6 MB of distinct content: %q", stored, r.errout)
	}

	// A tar on a file, through the control socket; GNU tar extracts it.
	base := t.TempDir()
	tarFile := filepath.Join(base, "f.tar")
	mustPadfs(t, data, "export", "--session", id, "-o", tarFile)
	sh(t, data, base, `mkdir x && tar --xattrs --xattrs-include='user.*' -xpf f.tar -C x && tar -tvf f.tar > list && grep -q '^h.* link to ' list`)
	sameListing(t, "export -o f.tar, extracted", want, listing(t, data, filepath.Join(base, "x")))
	// ... and on stdout, but not on a terminal.
	sh(t, data, base, `padfs export --session `+id+` | cmp - f.tar`)
	if _, err := exec.LookPath("script"); err == nil {
		out := sh(t, data, base, `script -qec 'padfs export --session `+id+`' /dev/null || true`)
		if !strings.Contains(out, "refusing to write a tar to a terminal") || len(out) > 200 {
			t.Errorf("export to a terminal: %q", out)
		}
	}

	// Into a directory: holes stay holes.
	to := filepath.Join(base, "to")
	mustPadfs(t, data, "export", "--session", id, "--to", to)
	sameListing(t, "export --to", want, listing(t, data, to))
	if blocks := sh(t, data, to, `stat -c %b sparse`); strings.TrimSpace(blocks) != "8" {
		t.Errorf("export --to wrote the sparse file's holes: %s blocks", blocks)
	}
	// A non-empty directory is refused.
	if r := padfs(t, data, "export", "--session", id, "--to", to); r.code == 0 || !strings.Contains(r.errout, "not empty") {
		t.Errorf("export into a non-empty directory: exit %d %q", r.code, r.errout)
	}
	// A tar of a file with more holes than --max-sparse is refused, naming it.
	if r := padfs(t, data, "export", "--session", id, "--max-sparse", "1000000", "-o", filepath.Join(base, "g.tar")); r.code == 0 ||
		!strings.Contains(r.errout, "sparse") || strings.Count(r.errout, "\n") != 1 {
		t.Errorf("tar of a sparse file over the limit: exit %d %q", r.code, r.errout)
	}
	if _, err := os.Stat(filepath.Join(base, "g.tar")); !os.IsNotExist(err) {
		t.Errorf("a refused export left its file: %v", err)
	}
}

// TestSessionExportImport: a session with history, checkpoints and a log,
// exported beside its running mount and imported into another data
// directory (beside a running mount of all sessions there), has the same
// log, checkpoints and past states; a damaged archive is refused with one
// line and imports nothing; a second import is refused naming the id; a
// fork imports without its parent.
func TestSessionExportImport(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	id := newSession(t, data, "work")
	startMount(t, data, mnt, "--session", id)
	sh(t, data, mnt, `mkdir d; echo one > d/f; head -c 300000 /dev/urandom > blob; ln -s d/f link
python3 -c 'import os; os.setxattr("d/f", "user.v", b"1")'`)
	mustPadfs(t, data, "checkpoint", "first")
	sh(t, data, mnt, `echo two > d/f; rm blob; echo new > g; mv g d/h`)
	mustPadfs(t, data, "checkpoint", "second")
	sh(t, data, mnt, `echo three >> d/f`)
	fork := mustPadfs(t, data, "session", "fork", id, "--name", "child")

	base := t.TempDir()
	arch, forkArch := filepath.Join(base, "s.padfs"), filepath.Join(base, "fork.padfs")
	mustPadfs(t, data, "session", "export", id, "-o", arch)
	mustPadfs(t, data, "session", "export", fork, "-o", forkArch)
	wantLog := mustPadfs(t, data, "log", "--session", id)
	wantCk := mustPadfs(t, data, "checkpoint", "--session", id, "--list")
	wantFirst := listing(t, data, filepath.Join(mnt, ".asof", "first"))
	wantSecond := listing(t, data, filepath.Join(mnt, ".asof", "second"))
	wantNow := listing(t, data, mnt)

	data2, mnt2 := dirs(t)
	other := newSession(t, data2, "other") // the store already has inodes
	startMount(t, data2, mnt2)
	if got := mustPadfs(t, data2, "session", "import", arch); got != id {
		t.Fatalf("session import printed %q, want %s", got, id)
	}
	if got := mustPadfs(t, data2, "log", "--session", id); got != wantLog {
		t.Errorf("log after import:\n%s\nwant:\n%s", got, wantLog)
	}
	if got := mustPadfs(t, data2, "checkpoint", "--session", id, "--list"); got != wantCk {
		t.Errorf("checkpoints after import: %q, want %q", got, wantCk)
	}
	// The mount of all sessions shows it at once, by id and by name.
	s2 := filepath.Join(mnt2, id)
	sameListing(t, "the imported session now", wantNow, listing(t, data2, s2))
	sameListing(t, "the imported session by name", wantNow, listing(t, data2, filepath.Join(mnt2, "work")))
	sameListing(t, "the imported .asof/first/", wantFirst, listing(t, data2, filepath.Join(s2, ".asof", "first")))
	sameListing(t, "the imported .asof/second/", wantSecond, listing(t, data2, filepath.Join(s2, ".asof", "second")))
	// It is a live session: a write after the import is a later event.
	sh(t, data2, s2, `echo more > more && cat d/f | grep -qx three && test -d ../`+other)
	if got := mustPadfs(t, data2, "log", "--session", id); !strings.HasPrefix(got, wantLog+"\n") {
		t.Errorf("log after a write in the imported session:\n%s", got)
	}

	// The mount's search index learns of it from its log.
	waitFor(t, "the imported session in the search index", func() bool {
		r := padfs(t, data2, "search", "--session", id, "--json", "three")
		return r.code == 0 && strings.Contains(r.out, `"path":"d/f"`) && !strings.Contains(r.out, `"degraded":true`)
	})

	// A second import is refused, naming the id.
	if r := padfs(t, data2, "session", "import", arch); r.code == 0 || !strings.Contains(r.errout, id) ||
		strings.Count(r.errout, "\n") != 1 {
		t.Errorf("second import: exit %d %q", r.code, r.errout)
	}

	// A flipped byte anywhere: refused, one line, nothing imported.
	b, err := os.ReadFile(arch)
	if err != nil {
		t.Fatal(err)
	}
	data3 := filepath.Join(t.TempDir(), "data")
	for _, off := range []int{20, len(b) / 3, len(b) / 2, len(b) - 10} {
		bad := append([]byte(nil), b...)
		bad[off] ^= 0x10
		badFile := filepath.Join(base, "bad.padfs")
		if err := os.WriteFile(badFile, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		r := padfs(t, data3, "session", "import", badFile)
		if r.code == 0 || strings.Count(r.errout, "\n") != 1 || !strings.Contains(r.errout, "not a valid padfs session archive") {
			t.Errorf("import with byte %d flipped: exit %d %q", off, r.code, r.errout)
		}
	}
	if err := os.WriteFile(filepath.Join(base, "short.padfs"), b[:len(b)-1], 0o644); err != nil {
		t.Fatal(err)
	}
	if r := padfs(t, data3, "session", "import", filepath.Join(base, "short.padfs")); r.code == 0 {
		t.Errorf("truncated archive imported: %q", r.out)
	}
	if got := mustPadfs(t, data3, "session", "ls", "--all"); got != "" {
		t.Errorf("a refused import left a session:\n%s", got)
	}

	// export --asof a checkpoint, from the imported copy: the old tree.
	old := filepath.Join(base, "first-tree")
	mustPadfs(t, data2, "export", "--session", id, "--asof", "first", "--to", old)
	sameListing(t, "export --asof first --to", wantFirst, listing(t, data2, old))

	// On stdin, through the running mount's control socket.
	if got := sh(t, data2, base, `padfs session import - < fork.padfs`); strings.TrimSpace(got) != fork {
		t.Errorf("import from stdin printed %q, want %s", got, fork)
	}
	sameListing(t, "the fork imported from stdin", wantNow, listing(t, data2, filepath.Join(mnt2, "child")))

	// The fork, without its parent: its tree is whole.
	if got := mustPadfs(t, data3, "session", "import", forkArch); got != fork {
		t.Fatalf("import of the fork printed %q", got)
	}
	to := filepath.Join(base, "fork-tree")
	mustPadfs(t, data3, "export", "--session", fork, "--to", to)
	sameListing(t, "the imported fork", wantNow, listing(t, data3, to))
	if ls := mustPadfs(t, data3, "session", "ls", "--json"); !strings.Contains(ls, `"parent": "`+id+`"`) {
		t.Errorf("the imported fork's header lost its parent:\n%s", ls)
	}
}

// TestSessionNewFromGoSource: a real source tree (GOROOT/src, about 130 MB
// in 13,000 names) imported beside a running mount equals the source name
// for name: type, mode, size, content, link target; on a terminal the
// import draws a progress bar, also through the control socket.
func TestSessionNewFromGoSource(t *testing.T) {
	needFUSE(t)
	if testing.Short() {
		t.Skip("reads GOROOT/src")
	}
	data, mnt := dirs(t)
	startMount(t, data, mnt)
	// On a terminal (script(1) gives it one), the mount's process draws
	// the progress bar through the control socket.
	if _, err := exec.LookPath("script"); err == nil {
		out := sh(t, data, mnt, `script -qec 'padfs session new --name go --from `+goRootSrc+`' /dev/null`)
		if !strings.Contains(out, "import ") || !strings.Contains(out, "%") || !strings.Contains(out, "imported "+goRootSrc) {
			t.Errorf("no progress bar on the terminal:\n%q", out[max(0, len(out)-2000):])
		}
	} else {
		r := padfs(t, data, "session", "new", "--name", "go", "--from", goRootSrc)
		if r.code != 0 {
			t.Fatalf("session new --from %s: exit %d %s", goRootSrc, r.code, r.errout)
		}
	}
	requireSameTree(t, "GOROOT/src imported", goRootSrc, filepath.Join(mnt, "go"))
}
