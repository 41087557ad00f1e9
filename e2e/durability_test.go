package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"io"
	"os"
	"os/exec"
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

// TestKill9KeepsStreamedFsync: a large file written in order from offset
// 0 is chunked and stored while it is written (fs/stream.go); its fsync
// returns only once its version is committed, so after a kill -9 the
// bytes the fsync covered are there (the writes after it may be lost).
func TestKill9KeepsStreamedFsync(t *testing.T) {
	needFUSE(t)
	data, mnt := dirs(t)
	sid := newSession(t, data)
	m := startMount(t, data, mnt, "--session", sid)
	want := make([]byte, 48<<20)
	rand.Read(want)
	src := filepath.Join(t.TempDir(), "want")
	if err := os.WriteFile(src, want, 0o600); err != nil {
		t.Fatal(err)
	}
	// The writer fsyncs, writes on, says so and keeps the file open.
	py := exec.Command("python3", "-c", `
import os, sys
src = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
for i in range(0, len(src), 1 << 20):
    os.write(fd, src[i:i + (1 << 20)])
os.fsync(fd)
os.write(fd, b"after the fsync, lost or not\n" * 1000)
print("synced", flush=True)
sys.stdin.read()
`, src, filepath.Join(mnt, "streamed.bin"))
	startSynced(t, py)
	m.kill()
	py.Process.Kill()
	py.Wait()
	startMount(t, data, mnt, "--session", sid)
	got, err := os.ReadFile(filepath.Join(mnt, "streamed.bin"))
	if err != nil || len(got) < len(want) || !bytes.Equal(got[:len(want)], want) {
		t.Fatalf("streamed.bin after kill -9: %d bytes (%v), want the %d fsync'd first", len(got), err, len(want))
	}
}

// startSynced starts py, a writer that prints "synced" once its fsync
// returned and then reads its stdin until it is closed, and waits for
// that line; the writer is killed at the end of the test.
func startSynced(t *testing.T, py *exec.Cmd) io.WriteCloser {
	t.Helper()
	stdin, err := py.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := py.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := py.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); py.Process.Kill(); py.Wait() })
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "synced\n" {
		t.Fatalf("writer: %q, %v", line, err)
	}
	return stdin
}
