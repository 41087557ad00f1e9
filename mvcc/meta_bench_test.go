package mvcc

import (
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkMetaCommit measures the CPU of metadata commits: each op creates
// one file, sets its mode and removes it again (three commits), the
// pattern of rm -rf and of git's lock files.
func BenchmarkMetaCommit(b *testing.B) {
	st, err := OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("bench", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("f%d", i)
		n, err := st.Create(h.ID, h.Root, name, Attr{Mode: 0o100644}, "")
		if err != nil {
			b.Fatal(err)
		}
		mode := uint32(0o600)
		if _, err := st.SetAttr(h.ID, n.Ino, SetAttr{Mode: &mode}); err != nil {
			b.Fatal(err)
		}
		if err := st.Remove(h.ID, h.Root, name, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRemoveBigDir measures the CPU of one unlink in a directory of
// b.N files, rm -rf's commit (the files are created first, untimed).
func BenchmarkRemoveBigDir(b *testing.B) {
	st, err := OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("bench", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	d, err := st.Create(h.ID, h.Root, "d", Attr{Mode: 0o40755}, "")
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		if _, err := st.Create(h.ID, d.Ino, fmt.Sprintf("f%06d", i), Attr{Mode: 0o100644}, ""); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := st.Remove(h.ID, d.Ino, fmt.Sprintf("f%06d", i), false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	// CPU, not wall time: the machine is shared, and the WAL's flusher
	// works on another core.
	b.ReportMetric(float64((processCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// processCPU is the process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
