package e2e

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// wantOneLineFailure checks that `padfs mount` failed the way a user can act
// on: non-zero exit, exactly one line on stderr naming the problem, no
// panic, and no mount left behind.
func wantOneLineFailure(t *testing.T, what string, r result, mnt string, mentions ...string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(r.errout, "\n"), "\n")
	switch {
	case r.code == 0:
		t.Errorf("%s: exit 0, want failure; stdout %q", what, r.out)
	case len(lines) != 1 || !strings.HasPrefix(lines[0], "padfs: "):
		t.Errorf("%s: want one line starting with \"padfs: \" on stderr, got:\n%s", what, r.errout)
	case strings.Contains(r.errout, "panic") || strings.Contains(r.errout, "goroutine "):
		t.Errorf("%s: panicked:\n%s", what, r.errout)
	}
	for _, m := range mentions {
		if !strings.Contains(strings.ToLower(r.errout), strings.ToLower(m)) {
			t.Errorf("%s: message %q does not mention %q", what, strings.TrimSpace(r.errout), m)
		}
	}
	if r.out != "" {
		t.Errorf("%s: unexpected stdout %q", what, r.out)
	}
	if mnt != "" && isMounted(mnt) {
		t.Errorf("%s: %s is mounted after a failed mount", what, mnt)
		detach(mnt)
	}
	t.Logf("%s: %s", what, strings.TrimSpace(r.errout))
}

func TestMountRefusals(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	base := filepath.Dir(mnt)

	missing := filepath.Join(base, "no-such-dir")
	wantOneLineFailure(t, "missing mountpoint", failMount(t, data, missing, "--session", sid), "", missing, "does not exist")

	file := filepath.Join(base, "a-file")
	os.WriteFile(file, []byte("x"), 0o644)
	wantOneLineFailure(t, "mountpoint is a file", failMount(t, data, file, "--session", sid), "", "not a directory")

	unknown := "01ARZ3NDEKTSV4RRFFQ69G5FAV"
	wantOneLineFailure(t, "unknown session", failMount(t, data, mnt, "--session", unknown), mnt, unknown, "unknown session")
	wantOneLineFailure(t, "malformed session", failMount(t, data, mnt, "--session", "not-a-ulid"), mnt, "not-a-ulid")

	// A forgotten session is hidden from session ls (unless --all) and
	// cannot be mounted.
	gone := newSession(t, data, "gone")
	mustPadfs(t, data, "session", "forget", gone)
	if _, ok := sessionsJSON(t, data)[gone]; ok {
		t.Errorf("session ls lists the forgotten session %s", gone)
	}
	if _, ok := sessionsJSON(t, data, "--all")[gone]; !ok {
		t.Errorf("session ls --all does not list the forgotten session %s", gone)
	}
	wantOneLineFailure(t, "forgotten session", failMount(t, data, mnt, "--session", gone), mnt, gone, "forgotten")

	// A running mount locks its data directory and occupies its mountpoint.
	startMount(t, data, mnt, "--session", sid)
	other := filepath.Join(base, "other")
	os.Mkdir(other, 0o755)
	wantOneLineFailure(t, "store locked by another padfs", failMount(t, data, other, "--session", sid), other, "in use", mnt)

	data2 := filepath.Join(base, "data2")
	wantOneLineFailure(t, "mountpoint busy", failMount(t, data2, mnt), "", "busy")
}

func TestCorruptStoreFile(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	os.MkdirAll(data, 0o700)
	garbage := []byte(strings.Repeat("this is not a bbolt file\n", 1000))
	if err := os.WriteFile(filepath.Join(data, "padfs.db"), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	wantOneLineFailure(t, "garbage store file", failMount(t, data, mnt), mnt, "padfs.db")
	r := padfs(t, data, "session", "ls")
	wantOneLineFailure(t, "session ls on a garbage store", r, "")

	// A real store with one record's bytes flipped: the record checksum
	// catches it when the session is opened.
	data2 := filepath.Join(filepath.Dir(data), "data2")
	marker := "corrupt-me-marker"
	sid := newSession(t, data2, marker)
	db := filepath.Join(data2, "padfs.db")
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	n := bytes.Count(b, []byte(marker))
	if n == 0 {
		t.Fatalf("session name %q not found in %s: is it still in the WAL after a clean close?", marker, db)
	}
	b = bytes.ReplaceAll(b, []byte(marker), []byte("corrupt-me-MARKER"))
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	wantOneLineFailure(t, "flipped record", failMount(t, data2, mnt, "--session", sid), mnt, "corrupt")
	wantOneLineFailure(t, "session ls on a flipped record", padfs(t, data2, "session", "ls"), "", "corrupt")
}

// TestAsofRefusals: malformed names do not exist, the past is read-only,
// and names longer than 255 bytes are refused.
func TestAsofRefusals(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	startMount(t, data, mnt, "--session", sid)
	if err := os.WriteFile(filepath.Join(mnt, "f"), []byte("v1"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Mkdir(filepath.Join(mnt, "d"), 0o755)
	now := mustPadfs(t, data, "now")
	past := filepath.Join(mnt, ".asof", now)

	for _, bad := range []string{"yesterday", "2026-13-45T25:61:00Z", "2026-01-02T03:04:05", "-1"} {
		if _, err := os.Stat(filepath.Join(mnt, ".asof", bad)); !errors.Is(err, syscall.ENOENT) {
			t.Errorf("stat .asof/%s: %v, want ENOENT", bad, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(past, "f")); err != nil || string(b) != "v1" {
		t.Fatalf("read .asof/%s/f: %q %v", now, b, err)
	}
	erofs := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, syscall.EROFS) {
			t.Errorf("%s in .asof: %v, want EROFS", what, err)
		}
	}
	_, err := os.OpenFile(filepath.Join(past, "new"), os.O_CREATE|os.O_WRONLY, 0o644)
	erofs("create", err)
	_, err = os.OpenFile(filepath.Join(past, "f"), os.O_WRONLY, 0)
	erofs("open for write", err)
	_, err = os.OpenFile(filepath.Join(past, "f"), os.O_WRONLY|os.O_TRUNC, 0)
	erofs("O_TRUNC", err)
	erofs("mkdir", os.Mkdir(filepath.Join(past, "nd"), 0o755))
	erofs("unlink", os.Remove(filepath.Join(past, "f")))
	erofs("rmdir", os.Remove(filepath.Join(past, "d")))
	erofs("rename", os.Rename(filepath.Join(past, "f"), filepath.Join(past, "g")))
	erofs("chmod", os.Chmod(filepath.Join(past, "f"), 0o600))
	erofs("truncate", os.Truncate(filepath.Join(past, "f"), 0))
	erofs("symlink", os.Symlink("f", filepath.Join(past, "l")))
	erofs("setxattr", syscall.Setxattr(filepath.Join(past, "f"), "user.x", []byte("1"), 0))
	r := shResult(t, data, mnt, "echo x > .asof/"+now+"/f")
	if r.code == 0 || !strings.Contains(r.errout, "Read-only file system") {
		t.Errorf("shell redirect into .asof: exit %d stderr %q, want Read-only file system", r.code, r.errout)
	}
	if b, _ := os.ReadFile(filepath.Join(mnt, "f")); string(b) != "v1" {
		t.Errorf("live f changed to %q", b)
	}

	long := strings.Repeat("n", 256)
	_, err = os.Create(filepath.Join(mnt, long))
	if !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("create a 256-byte name: %v, want ENAMETOOLONG", err)
	}
	if err := os.Mkdir(filepath.Join(mnt, long), 0o755); !errors.Is(err, syscall.ENAMETOOLONG) {
		t.Errorf("mkdir a 256-byte name: %v, want ENAMETOOLONG", err)
	}
	ok := strings.Repeat("n", 255)
	if err := os.WriteFile(filepath.Join(mnt, ok), []byte("x"), 0o644); err != nil {
		t.Errorf("create a 255-byte name: %v", err)
	}
}
