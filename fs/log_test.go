package fs

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDirectReadsDoNotFloodTheLog: a 1 MiB O_DIRECT read is a reply go-fuse
// cannot splice (1 MiB + its header is more than a pipe holds); it copies
// it instead and says so, which padfs logs at Debug in the mount's log, not
// once per read at Info.
func TestDirectReadsDoNotFloodTheLog(t *testing.T) {
	var logs syncBuffer
	mnt, _, _ := mountTestOpts(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	p := filepath.Join(mnt, "f")
	data := pattern(4<<20, 3)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	buf, err := unix.Mmap(-1, 0, 1<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE) // aligned
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(buf)
	for off := 0; off < len(data); off += len(buf) {
		n, err := unix.Pread(fd, buf, int64(off))
		if err != nil || n != len(buf) || !bytes.Equal(buf, data[off:off+n]) {
			t.Fatalf("O_DIRECT pread at %d: %d bytes, %v (or other bytes)", off, n, err)
		}
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "trySplice") && !strings.Contains(line, "level=DEBUG") {
			t.Errorf("go-fuse's splice fallback logged above Debug: %s", line)
		}
	}
	// The lines go to the mount's log (before, to the process's default
	// logger, at Info): none would mean this go-fuse splices such replies
	// now, or does not say so, and the test would check nothing.
	if n := strings.Count(logs.String(), "trySplice"); n == 0 {
		t.Errorf("no line about go-fuse's splice fallback in the mount's log after %d reads of 1 MiB", len(data)>>20)
	}
}
