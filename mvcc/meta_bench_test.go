package mvcc

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// benchSession opens a store in a temporary directory with one session.
func benchSession(b *testing.B) (*Store, *SessionHeader) {
	st, err := OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("bench", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	return st, h
}

// BenchmarkMetaCommit measures the CPU of metadata commits: each op creates
// one file, sets its mode and removes it again (three commits), the
// pattern of rm -rf and of git's lock files.
func BenchmarkMetaCommit(b *testing.B) {
	st, h := benchSession(b)
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
	st, h := benchSession(b)
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

// BenchmarkSmallFileCommit measures the CPU of tar -x's commit of a file:
// a held create and its first content (12 KiB of distinct bytes: chunked,
// not inline) in one close, 64 files to a directory.
func BenchmarkSmallFileCommit(b *testing.B) {
	st, h := benchSession(b)
	data := make([]byte, 12<<10)
	b.ReportAllocs()
	var dir Ino
	for i := 0; b.Loop(); i++ {
		if i%64 == 0 {
			d, err := st.Create(h.ID, h.Root, fmt.Sprintf("d%d", i/64), Attr{Mode: 0o40755}, "")
			if err != nil {
				b.Fatal(err)
			}
			dir = d.Ino
		}
		n, _, err := st.CreateHeld(h.ID, dir, fmt.Sprintf("f%d", i), Attr{Mode: 0o100644})
		if err != nil {
			b.Fatal(err)
		}
		binary.LittleEndian.PutUint64(data, uint64(i)) // a new chunk each time
		sp := Sparse{R: bytes.NewReader(data), Size: int64(len(data)), Data: []Range{{0, int64(len(data))}}}
		if _, err := st.WriteSparseAttr(context.Background(), h.ID, n.Ino, sp, nowNs(), SetAttr{}); err != nil {
			b.Fatal(err)
		}
	}
}
