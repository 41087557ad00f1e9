package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fsxScript runs fsx's default mix of operations (read, write, mapread,
// mapwrite with msync, truncate; sizes and offsets as fsx picks them for
// a 256 KiB file) on one file, checking every read against a copy kept
// in memory, as fsx does. Arguments: the file, the number of operations,
// the seed. It prints the SHA-256 of the file's expected final content.
const fsxScript = `
import hashlib, mmap, os, random, sys
path, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(seed)
MAX, OPLEN = 256 << 10, 64 << 10
good = bytearray()
fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
def check(off, got):
    want = bytes(good[off:off + len(got)])
    if got != want:
        sys.exit("fsx: read at %d of %d bytes differs from what was written" % (off, len(got)))
for i in range(n):
    op = rnd.randrange(5)
    size = len(good)
    if op in (0, 2) and size == 0:
        op = 1
    if op == 0 or op == 2:  # read, mapread
        off = rnd.randrange(size)
        ln = min(rnd.randrange(1, OPLEN), size - off)
        if op == 0:
            check(off, os.pread(fd, ln, off))
        else:
            m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
            check(off, m[off:off + ln])
            m.close()
    elif op == 1 or op == 3:  # write, mapwrite
        off = rnd.randrange(MAX)
        ln = min(rnd.randrange(1, OPLEN), MAX - off)
        data = rnd.randbytes(ln)
        if op == 3 and off + ln <= size:
            m = mmap.mmap(fd, size)
            m[off:off + ln] = data
            m.flush()  # msync(MS_SYNC): an fsync of the range
            m.close()
        else:
            os.pwrite(fd, data, off)
        if off > len(good):
            good.extend(bytes(off - len(good)))
        good[off:off + ln] = data
    else:  # truncate
        ln = rnd.randrange(MAX)
        os.ftruncate(fd, ln)
        if ln < len(good):
            del good[ln:]
        else:
            good.extend(bytes(ln - len(good)))
os.fsync(fd)
os.close(fd)
print(hashlib.sha256(good).hexdigest())
`

// TestMeasureFsxHistory: the store's size after an fsx-style run of
// PADFS_MEASURE_FSX_OPS operations (default 100,000) on one 256 KiB file
// through the real binary (index on), before and after padfs prune
// --before now --compact run inside the mount; the file reads back the
// same after the prune.
//
//	PADFS_MEASURE_FSX=1 go test ./e2e -run TestMeasureFsxHistory -v -timeout 60m
func TestMeasureFsxHistory(t *testing.T) {
	if os.Getenv("PADFS_MEASURE_FSX") == "" {
		t.Skip("set PADFS_MEASURE_FSX=1 to measure")
	}
	needFUSE(t)
	ops := 100000
	if n, err := strconv.Atoi(os.Getenv("PADFS_MEASURE_FSX_OPS")); err == nil && n > 0 {
		ops = n
	}
	data, mnt := dirs(t)
	sid := newSession(t, data, "fsx")
	startMount(t, data, mnt, "--session", sid)
	script := filepath.Join(t.TempDir(), "fsx.py")
	if err := os.WriteFile(script, []byte(fsxScript), 0o644); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	want := sh(t, data, mnt, "python3 "+script+" fsx.bin "+strconv.Itoa(ops)+" 1")
	ran := time.Since(start)
	sizes := func() string {
		// Disk used (du's blocks), not the apparent size: bbolt grows
		// padfs.db ahead of its data, and the file is sparse there.
		return strings.TrimSpace(sh(t, data, data, `du -s -B1 padfs.db wal index 2>/dev/null | awk '{printf "%s %.1f MB; ", $2, $1/1e6}'; df -B1 . | awk 'NR==2 {printf "df: %.1f MB used", $3/1e6}'`))
	}
	events := strings.Count(mustPadfs(t, data, "log", "--session", sid), "\n")
	before := sizes()
	du := strings.TrimSpace(mustPadfs(t, data, "du", "--session", sid))
	now := strings.TrimSpace(mustPadfs(t, data, "now"))
	pstart := time.Now()
	r := parsePrune(t, mustPadfs(t, data, "prune", "--session", sid, "--before", now, "--compact", "--json"))
	pran := time.Since(pstart)
	after := sizes()
	if got := sh(t, data, mnt, "sha256sum < fsx.bin | cut -d' ' -f1"); got != want {
		t.Fatalf("fsx.bin after the prune hashes to %q, want %q", got, want)
	}
	t.Logf("fsx-style run: %d operations in %.1f s, %d commits in the log", ops, ran.Seconds(), events)
	t.Logf("before the prune: %s\n%s", before, du)
	t.Logf("prune --before now --compact: %.1f s, %d versions, %d chunks, %.1f MB freed", pran.Seconds(), r.Versions, r.Chunks, float64(r.Bytes)/1e6)
	t.Logf("after: %s", after)
	t.Logf("%s", mustPadfs(t, data, "du", "--session", sid))
}
