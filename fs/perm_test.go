package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"context"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
)

// asNobody runs a script as user nobody.
func asNobody(dir, script string) (string, error) {
	return shErr(dir, "setpriv --reuid=65534 --regid=65534 --clear-groups bash -c '"+script+"'")
}

// openDirs makes dir and its parents up to the temporary root traversable
// by other users.
func openDirs(t *testing.T, dir string) {
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
}

func TestAllowOther(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("shared", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	openDirs(t, base)

	// Without allow_other, nobody else gets in at all.
	private := filepath.Join(base, "private")
	mountAt(t, st, private, Options{Session: &h.ID})
	if out, err := asNobody(private, "ls"); err == nil {
		t.Errorf("another user listed a mount without allow_other: %s", out)
	}

	// With it, the kernel enforces modes.
	shared := filepath.Join(base, "shared")
	mountAt(t, st, shared, Options{Session: &h.ID, AllowOther: true})
	sh(t, shared, "echo secret > secret && chmod 600 secret && echo open > open && chmod 644 open && mkdir -m 777 pub")
	if out, err := asNobody(shared, "cat open"); err != nil || out != "open\n" {
		t.Errorf("reading a 0644 file as another user: %v %q", err, out)
	}
	if out, err := asNobody(shared, "cat secret"); err == nil || !strings.Contains(out, "Permission denied") {
		t.Errorf("reading a 0600 file as another user: %v %q", err, out)
	}
	if out, err := asNobody(shared, "echo x > open"); err == nil {
		t.Errorf("writing a 0644 file as another user succeeded: %q", out)
	}
	// Files another user creates are theirs.
	if out, err := asNobody(shared, "echo mine > pub/mine && stat -c %u:%g pub/mine"); err != nil || out != "65534:65534\n" {
		t.Errorf("file created by another user: %v %q", err, out)
	}
	if out, err := asNobody(shared, "chown 0 pub/mine"); err == nil {
		t.Errorf("chown to root by another user succeeded: %q", out)
	}
}

// .grep/ and .log/ show content of files others may not read (lines of a
// 0600 file, paths inside a 0700 directory, files deleted long ago): under
// allow_other they are the mount owner's only, by mode (0500/0400) and by
// uid (EACCES to anyone else, root included, whatever the kernel lets by).
func TestVirtualOwnerOnly(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("shared", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	vd := VirtualDir{
		List: func(mvcc.SessionID) ([]string, error) { return []string{"events.jsonl"}, nil },
		Open: func(_ context.Context, sid mvcc.SessionID, name string) ([]byte, error) {
			return []byte("secret line\n"), nil
		},
	}
	virtual := map[string]VirtualDir{".grep": vd, ".log": vd}
	base := t.TempDir()
	openDirs(t, base)

	// Owned by root: root reads them, nobody is refused by the modes.
	mnt := filepath.Join(base, "root")
	mountAt(t, st, mnt, Options{Session: &h.ID, AllowOther: true, Virtual: virtual})
	if out := sh(t, mnt, "stat -c %a .grep .log .grep/secret .log/events.jsonl; cat .grep/secret; ls .log"); out != "500\n500\n400\n400\nsecret line\nevents.jsonl\n" {
		t.Errorf("the owner's view of .grep and .log: %q", out)
	}
	for _, c := range []string{"cat .grep/secret", "cat .log/events.jsonl", "ls .log", "ls .grep"} {
		if out, err := asNobody(mnt, c); err == nil || !strings.Contains(out, "Permission denied") || strings.Contains(out, "secret line") {
			t.Errorf("%s as another user: %v %q", c, err, out)
		}
	}

	// Owned by uid 1000: root passes the kernel's mode checks, padfs
	// refuses it by uid.
	mnt = filepath.Join(base, "user")
	mountAt(t, st, mnt, Options{Session: &h.ID, AllowOther: true, Virtual: virtual, Uid: 1000, Gid: 1000})
	for _, c := range []string{"cat .grep/secret", "cat .log/events.jsonl", "ls .log"} {
		if out, err := shErr(mnt, c); err == nil || !strings.Contains(out, "Permission denied") {
			t.Errorf("%s by root on a mount owned by uid 1000: %v %q", c, err, out)
		}
	}
	if out, err := shErr(mnt, "setpriv --reuid=1000 --regid=1000 --clear-groups cat .grep/secret"); err != nil || out != "secret line\n" {
		t.Errorf("the owner (uid 1000) reading .grep/secret: %v %q", err, out)
	}
}
