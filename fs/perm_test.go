package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	st, err := mvcc.OpenDir(data)
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
