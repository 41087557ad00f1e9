package fs

import (
	"strings"
	"testing"
)

// Changes in a mounted session that was forgotten meanwhile fail with
// EROFS (the tree is frozen), lookups with ENOENT.
func TestForgottenWhileMounted(t *testing.T) {
	mnt, st, m := mountTest(t)
	sh(t, mnt, "echo a > f")
	if _, err := st.Forget(sessionOf(t, m)); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"mkdir d", "touch g", "rm f"} {
		out, err := shErr(mnt, cmd)
		if err == nil || !strings.Contains(out, "Read-only file system") {
			t.Errorf("%s in a forgotten session: %v %q, want EROFS", cmd, err, out)
		}
	}
	if out, err := shErr(mnt, "stat nothing"); err == nil || !strings.Contains(out, "No such file") {
		t.Errorf("lookup in a forgotten session: %v %q, want ENOENT", err, out)
	}
}
