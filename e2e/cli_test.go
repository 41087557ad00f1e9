package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

type lsRow struct {
	ID      string `json:"id"`
	Name    string `json:"name"`
	Created string `json:"created"`
	Files   int64  `json:"files"`
	Bytes   int64  `json:"bytes"`
}

func sessionsJSON(t *testing.T, data string, args ...string) map[string]lsRow {
	t.Helper()
	var rows []lsRow
	out := mustPadfs(t, data, append([]string{"session", "ls", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("session ls --json: %v\n%s", err, out)
	}
	m := map[string]lsRow{}
	for _, r := range rows {
		m[r.ID] = r
	}
	return m
}

// TestCLIBesideRunningMount: with a mount of all sessions running, the CLI
// goes through the control socket: session new/ls and now work (the store
// is locked by the mount), their results show in the mount at once, and
// exit codes and messages come back unchanged.
func TestCLIBesideRunningMount(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	first := newSession(t, data, "first")
	m := startMount(t, data, mnt)
	if !strings.Contains(m.banner, "all sessions") {
		t.Errorf("banner %q, want it to say all sessions are mounted", m.banner)
	}
	sock := filepath.Join(data, "padfs.sock")
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("control socket %s: %v %v, want a socket with mode 0600", sock, fi, err)
	}

	// session new through the socket prints only the id, and the mount
	// shows the new session right away.
	r := padfs(t, data, "session", "new", "--name", "second")
	id := strings.TrimSpace(r.out)
	if r.code != 0 || strings.Count(r.out, "\n") != 1 || len(id) != 26 || r.errout != "" {
		t.Fatalf("session new via socket: exit %d stdout %q stderr %q", r.code, r.out, r.errout)
	}
	sh(t, data, mnt, "test -d "+id+" && ls | grep -x "+id+" >/dev/null && ls | grep -x "+first+" >/dev/null")

	// mkdir at the root creates a session; write into both.
	sh(t, data, mnt, "mkdir made-by-mkdir")
	sh(t, data, mnt, `
printf 'hello' > `+first+`/a.txt
mkdir `+first+`/dir
printf '12345678' > `+first+`/dir/b.txt
ln -s a.txt `+first+`/link`)
	rows := sessionsJSON(t, data)
	if got := rows[first]; got.Name != "first" || got.Files != 3 || got.Bytes != 13 {
		t.Errorf("session ls via socket: %+v, want name first, 3 files, 13 bytes", got)
	}
	if got := rows[id]; got.Name != "second" || got.Files != 0 {
		t.Errorf("session ls: %+v, want the new empty session named second", got)
	}
	named := 0
	for _, r := range rows {
		if r.Name == "made-by-mkdir" {
			named++
		}
	}
	if named != 1 || len(rows) != 3 {
		t.Errorf("session ls: %d sessions, %d named made-by-mkdir; want 3 and 1: %+v", len(rows), named, rows)
	}
	text := mustPadfs(t, data, "session", "ls")
	if !strings.HasPrefix(text, "ID") || !strings.Contains(text, "first") || !strings.Contains(text, "made-by-mkdir") {
		t.Errorf("session ls (text):\n%s", text)
	}

	// now ticks the live clock, and .asof/$(padfs now)/ has every write
	// that completed before it, including a file still held open.
	out := sh(t, data, filepath.Join(mnt, first), `
exec 3> open.txt
printf 'written, not closed' >&3
t=$(padfs now)
cat .asof/$t/open.txt
printf ' later' >&3
exec 3>&-
echo
cat .asof/$t/a.txt
`)
	if out != "written, not closed\nhello" {
		t.Errorf(".asof/$(padfs now) from inside the mount: %q", out)
	}

	// Inside the mount, commands find its data directory without --data or
	// $PADFS_DATA, and the session from the working directory.
	home := t.TempDir()
	inside := exec.Command("bash", "-c", `set -euo pipefail
padfs now >/dev/null
padfs session ls | grep made-by-mkdir >/dev/null
padfs log | grep 'a.txt' >/dev/null`)
	inside.Dir = filepath.Join(mnt, first)
	for _, kv := range env(data) {
		if !strings.HasPrefix(kv, "PADFS_DATA=") && !strings.HasPrefix(kv, "HOME=") {
			inside.Env = append(inside.Env, kv)
		}
	}
	inside.Env = append(inside.Env, "HOME="+home)
	if r := runCmd(t, inside); r.code != 0 {
		t.Errorf("commands inside the mount without --data: exit %d\n%s%s", r.code, r.out, r.errout)
	}
	if _, err := os.Stat(filepath.Join(home, ".local")); !os.IsNotExist(err) {
		t.Errorf("a command inside the mount used the default data directory under $HOME (%v)", err)
	}

	// Errors come back as one line with the remote exit code.
	r = padfs(t, data, "session", "new", "--name", "a/b")
	if r.code != 2 || !strings.HasPrefix(r.errout, "padfs: ") || strings.Count(r.errout, "\n") != 1 || r.out != "" {
		t.Errorf("failing command via socket: exit %d stdout %q stderr %q", r.code, r.out, r.errout)
	}

	m.stop()
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Errorf("control socket not removed at exit: %v", err)
	}
	// Without the mount, the same commands open the store directly.
	if rows := sessionsJSON(t, data); len(rows) != 3 || rows[first].Files != 4 {
		t.Errorf("session ls without a mount: %+v", rows)
	}
}

// A mountpoint given through a symlink: commands run inside the mount
// (with no --data and no $PADFS_DATA) still find its data directory.
func TestMountThroughSymlinkFindsDataDir(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data, "linked")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(mnt, link); err != nil {
		t.Fatal(err)
	}
	startMount(t, data, link, "--session", sid)
	home := t.TempDir() // a default store here would be the wrong one
	cmd := exec.Command("bash", "-c", `echo hi > f.txt && padfs log --json | tail -n 1`)
	cmd.Dir = link
	for _, kv := range env(data) {
		if !strings.HasPrefix(kv, "PADFS_DATA=") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+home, "XDG_DATA_HOME="+filepath.Join(home, "data"))
	r := runCmd(t, cmd)
	if r.code != 0 || !strings.Contains(r.out, `"f.txt"`) {
		t.Fatalf("padfs log inside a mount reached through a symlink: exit %d out %q err %q", r.code, r.out, r.errout)
	}
	if _, err := os.Stat(filepath.Join(home, "data", "padfs")); err == nil {
		t.Fatal("the command created a default store instead of using the mount's")
	}
}
