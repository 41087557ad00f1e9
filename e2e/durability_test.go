package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeWork is a mix of writes whose close (or fsync) returns before the
// script ends: a real source tree, many small files, appends, renames,
// links, an fsync'd file (dd conv=fsync, python os.fsync) and a big file.
const writeWork = `
mkdir src && tar -xf "$TARBALL" -C src
mkdir small
for i in $(seq 1 200); do echo "small $i" > small/f$i; done
for i in $(seq 1 50); do echo "append $i" >> small/log; done
mv src/go/token src/token-moved
ln -s token-moved src/token-link
ln small/f1 small/f1-hard
chmod 640 small/f2
dd if=/dev/urandom of=synced.bin bs=64K count=16 conv=fsync status=none
python3 -c '
import os
with open("pysynced.txt", "w") as f:
    f.write("fsynced by python\n" * 1000)
    f.flush()
    os.fsync(f.fileno())
with open("big.bin", "wb") as f:
    f.write(os.urandom(8 << 20))
'
truncate -s 1M sparse.bin
`

// mountWithWork mounts a new session and runs writeWork in it.
func mountWithWork(t *testing.T) (data, mnt, sid string, m *mount) {
	t.Helper()
	needFUSE(t)
	data, mnt = dirs(t)
	sid = newSession(t, data)
	tarball := makeTarball(t)
	m = startMount(t, data, mnt, "--session", sid)
	sh(t, data, mnt, "export TARBALL="+tarball+"\n"+writeWork)
	return data, mnt, sid, m
}

// TestCleanRemountKeepsTree: after SIGTERM and a new mount on the same
// data directory, the tree is the same, and so is its past.
func TestCleanRemountKeepsTree(t *testing.T) {
	data, mnt, sid, m := mountWithWork(t)
	hlc := mustPadfs(t, data, "now")
	copyDir := filepath.Join(t.TempDir(), "copy")
	sh(t, data, mnt, "cp -a . "+copyDir)
	m.stop()
	if _, err := os.Lstat(filepath.Join(data, "padfs.sock")); !os.IsNotExist(err) {
		t.Errorf("control socket left behind after a clean exit (err %v)", err)
	}

	startMount(t, data, mnt, "--session", sid)
	requireSameTree(t, "after remount", copyDir, mnt)
	requireSameTree(t, ".asof after remount", copyDir, filepath.Join(mnt, ".asof", hlc))
	// The clock went on: a new now is later than the old one.
	if now := mustPadfs(t, data, "now"); now <= hlc {
		t.Errorf("padfs now after remount %s is not after %s", now, hlc)
	}
}

// TestKill9KeepsClosedFiles: every file whose close or fsync returned is
// intact after a kill -9 of padfs and a new mount on the same data
// directory; the stale control socket does not get in the way.
func TestKill9KeepsClosedFiles(t *testing.T) {
	data, mnt, sid, m := mountWithWork(t)
	copyDir := filepath.Join(t.TempDir(), "copy")
	sh(t, data, mnt, "cp -a . "+copyDir)
	// A last burst right before the kill, so that it is still in the
	// write-ahead log (not yet folded into bbolt) when padfs dies.
	// Its files' creates are committed with their content at their close
	// (mvcc/held.go); the empty ones at their close too. The big file's
	// chunks go to bbolt at once (kv.BulkUpdater), its inode record to
	// the log.
	sh(t, data, mnt, `mkdir last && for i in $(seq 1 100); do echo "last $i" > last/f$i; done
python3 -c 'open("last/empty-closed", "w").close()'
head -c 24M /dev/urandom > last/big
cp -a last `+copyDir+`/last`)
	m.kill()
	if _, err := os.Lstat(filepath.Join(data, "padfs.sock")); err != nil {
		t.Errorf("no stale socket after kill -9 (%v): the test no longer covers replacing one", err)
	}
	if wal, err := filepath.Glob(filepath.Join(data, "wal", "*.wal")); err == nil {
		var size int64
		for _, w := range wal {
			if fi, err := os.Stat(w); err == nil {
				size += fi.Size()
			}
		}
		t.Logf("after kill -9: %d WAL segment(s), %d bytes to replay", len(wal), size)
	}

	// With no mount running, commands open the store directly despite the
	// stale socket.
	ls := mustPadfs(t, data, "session", "ls")
	if !strings.Contains(ls, sid) {
		t.Errorf("session ls after kill -9 does not list %s:\n%s", sid, ls)
	}

	startMount(t, data, mnt, "--session", sid)
	requireSameTree(t, "after kill -9 and remount", copyDir, mnt)
	sh(t, data, mnt, "echo after > after.txt && grep -q after after.txt")
	mustPadfs(t, data, "now") // through the new mount's socket
}
