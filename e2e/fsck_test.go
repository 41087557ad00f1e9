package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/padfs/padfs/mvcc/kv/bolt"
)

// TestFsckDamagedWAL: one flipped byte inside a whole record of the log,
// with acknowledged commits after it, stops every command with one line
// naming the segment and offset (it used to be dropped as a torn tail,
// silently losing every later commit); fsck reports it, fsck --repair keeps
// the intact prefix, quarantines the rest and lists what was lost; then the
// store opens and checks clean.
func TestFsckDamagedWAL(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	m := startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `for i in $(seq 1 200); do echo "file $i" > f$i; done`)
	m.kill()

	segs, _ := filepath.Glob(filepath.Join(data, "wal", "*.wal"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no WAL segment after kill -9: the commits were folded already")
	}
	seg := segs[len(segs)-1]
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x10
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}

	r := padfs(t, data, "session", "ls")
	wantOneLineFailure(t, "session ls on a damaged log", r, "", seg, "offset", "fsck --repair")
	if r.code != 2 {
		t.Errorf("session ls: exit %d, want 2", r.code)
	}

	r = padfs(t, data, "fsck")
	if r.code != 1 || !strings.Contains(r.out, "wal") || !strings.Contains(r.out, seg) {
		t.Fatalf("fsck on a damaged log: exit %d, want 1 and a report naming %s:\n%s%s", r.code, seg, r.out, r.errout)
	}
	t.Logf("fsck: %s", r.out)

	r = padfs(t, data, "fsck", "--repair")
	if r.code != 1 || !strings.Contains(r.out, "intact log records after the damage are lost") {
		t.Fatalf("fsck --repair: exit %d, want 1 and what was lost:\n%s%s", r.code, r.out, r.errout)
	}
	t.Logf("fsck --repair: %s", r.out)
	q, _ := filepath.Glob(filepath.Join(data, "quarantine", "*"))
	if len(q) == 0 {
		t.Error("nothing in DATA/quarantine/ after fsck --repair")
	}

	r = padfs(t, data, "fsck")
	if r.code != 0 {
		t.Fatalf("fsck after repair: exit %d:\n%s%s", r.code, r.out, r.errout)
	}
	if ls := mustPadfs(t, data, "session", "ls"); !strings.Contains(ls, sid) {
		t.Errorf("session ls after repair does not list %s:\n%s", sid, ls)
	}
	startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `test "$(cat f1)" = "file 1"`)
	// Beside the mount, fsck runs in the mount's process (the store is
	// locked) and checks the live store.
	r = padfs(t, data, "fsck", "--json")
	var rep struct {
		Keys     int64             `json:"keys"`
		Problems []json.RawMessage `json:"problems"`
	}
	if err := json.Unmarshal([]byte(r.out), &rep); r.code != 0 || err != nil || rep.Keys == 0 || len(rep.Problems) != 0 {
		t.Errorf("fsck --json beside the mount: exit %d, %v: %s%s", r.code, err, r.out, r.errout)
	}
}

// TestTruncatedStoreFile: a padfs.db cut to any length is one line
// ("corrupt store", naming the file) and exit 2 from every command, never
// bbolt's SIGBUS ("fatal error: fault") on its memory map.
func TestTruncatedStoreFile(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	m := startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, `for i in $(seq 1 40); do head -c 100000 /dev/urandom > r$i; done`)
	m.stop()
	db := filepath.Join(data, "padfs.db")
	orig, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	size := len(orig)
	fi, err := bolt.CheckFile(db)
	if err != nil {
		t.Fatal(err)
	}
	// bbolt grows the file ahead: only the pages in use must be there.
	cur := fi.Metas[fi.Current]
	need := int(cur.Pages) * int(cur.PageSize)
	t.Logf("padfs.db: %d bytes, %d in use", size, need)
	for _, n := range []int{0, 1, 4095, 4096, 8192, 3 * 4096, need / 2, need - 1} {
		if err := os.WriteFile(db, orig[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"session", "ls"}, {"log", "--session", sid}} {
			r := padfs(t, data, args...)
			what := fmt.Sprintf("%s on padfs.db cut to %d bytes", strings.Join(args, " "), n)
			wantOneLineFailure(t, what, r, "", db)
			if r.code != 2 || strings.Contains(r.errout, "fatal error") {
				t.Errorf("%s: exit %d, want 2: %s", what, r.code, r.errout)
			}
			if !strings.Contains(r.errout, "corrupt store") && !strings.Contains(r.errout, "rolled back") {
				t.Errorf("%s: %q does not say the store is corrupt", what, r.errout)
			}
		}
		// fsck reports it as a problem (exit 1), not as its own failure.
		if r := padfs(t, data, "fsck"); r.code != 1 || !strings.HasPrefix(r.out, "store: ") {
			t.Errorf("fsck on padfs.db cut to %d bytes: exit %d, want 1 and a store problem: %s%s", n, r.code, r.out, r.errout)
		}
	}
	// Cut after the last page in use, nothing is lost.
	for _, n := range []int{need, size - 1, size} {
		if err := os.WriteFile(db, orig[:n], 0o600); err != nil {
			t.Fatal(err)
		}
		if ls := mustPadfs(t, data, "session", "ls"); !strings.Contains(ls, sid) {
			t.Errorf("padfs.db cut to %d bytes (all pages in use) does not list %s", n, sid)
		}
	}
}
