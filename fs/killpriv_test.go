package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
)

// TestKillPriv checks that writes, truncates, fallocate and chown clear the
// setuid and setgid bits exactly as a local file system does: the same
// script runs in a plain directory and on the mount, as root and as another
// user, and must print the same modes.
func TestKillPriv(t *testing.T) {
	t.Parallel() // its own store and mount; no package state
	if os.Getuid() != 0 {
		t.Skip("needs root to act as another user")
	}
	requireTools(t, "setpriv", "fallocate", "truncate")
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("kp", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	openDirs(t, base)
	mnt := filepath.Join(base, "mnt")
	mountAt(t, st, mnt, Options{Session: &h.ID, AllowOther: true})
	plain := filepath.Join(base, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	const nobody = "setpriv --reuid=65534 --regid=65534 --clear-groups "
	actions := []struct{ name, cmd string }{
		{"write-nobody", nobody + "bash -c 'echo x >> f'"},
		{"write-root", "bash -c 'echo x >> f'"},
		{"truncate-nobody", nobody + "truncate -s 1 f"},
		{"truncate-root", "truncate -s 1 f"},
		{"otrunc-nobody", nobody + "bash -c ': > f'"},
		{"otrunc-root", "bash -c ': > f'"},
		{"fallocate-nobody", nobody + "fallocate -l 65536 f"},
		{"chown-same", "chown 65534:65534 f"},
		{"chown-other", "chown 0 f"},
		{"chgrp-other", "chgrp 0 f"},
		{"chmod-nobody", nobody + "chmod g+w f"},
		{"xattr-nobody", nobody + "/usr/bin/python3 -c 'import os; os.setxattr(\"f\", \"user.k\", b\"v\")'"},
		{"mmap-nobody", nobody + "/usr/bin/python3 -c 'import mmap, os; m = mmap.mmap(os.open(\"f\", os.O_RDWR), 1); m[0] = 65; m.flush()'"},
	}
	// 2745: setgid without group execute (mandatory locking, once),
	// which the kernel clears only for a writer outside the group.
	modes := []string{"4755", "2755", "2745", "6775", "6747", "0755"}
	var script strings.Builder
	for _, a := range actions {
		for _, owner := range []string{"65534:65534", "65534:0"} {
			for _, mode := range modes {
				// Each case on a fresh file owned by nobody.
				script.WriteString("rm -f f; echo data > f; chown " + owner + " f; chmod " + mode + " f; " +
					a.cmd + " 2>/dev/null; echo " + a.name + " " + owner + " " + mode + " $(stat -c %a f); ")
			}
		}
	}
	want := sh(t, plain, script.String())
	t.Logf("local:\n%s", want)
	got := sh(t, mnt, script.String())
	if got != want {
		t.Errorf("modes after each action differ from a local file system:\n%s", diffLines(want, got))
	}
}

// diffLines lists the lines of got that differ from want.
func diffLines(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := range max(len(w), len(g)) {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c {
			b.WriteString("  local: " + a + "\n  padfs: " + c + "\n")
		}
	}
	return b.String()
}
