package mvcc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkCommitBigFile commits one large file the way the fs layer does
// when a dirty file is closed (WriteContentAttr over an io.SectionReader),
// into a real store (OpenDir: bolt behind the WAL), and compares it with
// writing the same bytes to a plain file and fsyncing it, in the same run:
//
//	MB/s        padfs commit throughput
//	base-MB/s   os.WriteFile + fsync of the same bytes, same file system
//	x-base      padfs MB/s / base MB/s (higher is better, 1 = as fast)
//
// Every iteration writes new random bytes (nothing deduplicates), with an
// all-zero stretch of a few chunks (holes). "commit" times what a close
// waits for; "durable" also waits until the bytes are in bolt (Sync and
// Close, which flushes the WAL), i.e. the whole disk cost of the file.
//
//	go test ./mvcc -run '^$' -bench CommitBigFile -benchtime 3x
func BenchmarkCommitBigFile(b *testing.B) {
	for _, mib := range []int{64, 256} {
		for _, durable := range []bool{false, true} {
			name := fmt.Sprintf("%dMiB/commit", mib)
			if durable {
				name = fmt.Sprintf("%dMiB/durable", mib)
			}
			b.Run(name, func(b *testing.B) { benchCommitBigFile(b, mib<<20, durable) })
		}
	}
}

func benchCommitBigFile(b *testing.B, size int, durable bool) {
	data := make([]byte, size)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	var padfs, base time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		rng := rand.NewChaCha8([32]byte{byte(i), byte(i >> 8), 7})
		rng.Read(data)
		clear(data[size/3 : size/3+1<<20]) // a hole
		dir := b.TempDir()
		syscall.Sync() // start each measurement with no writeback pending

		// Baseline: the same bytes into a plain file, fsynced.
		t0 := time.Now()
		plain := filepath.Join(dir, "plain")
		if err := writeSynced(plain, data); err != nil {
			b.Fatal(err)
		}
		base += time.Since(t0)
		os.Remove(plain)

		st, err := OpenDir(filepath.Join(dir, "store"))
		if err != nil {
			b.Fatal(err)
		}
		h, err := st.CreateSession("bench", 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		n, err := st.Create(h.ID, h.Root, "big", Attr{Mode: sIFREG | 0o644}, "")
		if err != nil {
			b.Fatal(err)
		}
		r := io.NewSectionReader(bytes.NewReader(data), 0, int64(size))
		syscall.Sync()

		b.StartTimer()
		t0 = time.Now()
		got, err := st.WriteContentAttr(context.Background(), h.ID, n.Ino, r, nowNs(), SetAttr{})
		if err == nil && durable {
			if err = st.Sync(); err == nil {
				err = st.Close()
			}
		}
		padfs += time.Since(t0)
		b.StopTimer()
		if err != nil {
			b.Fatal(err)
		}
		if got.Size != uint64(size) {
			b.Fatalf("committed %d bytes, want %d", got.Size, size)
		}
		if !durable {
			if err := st.Close(); err != nil {
				b.Fatal(err)
			}
		}
		os.RemoveAll(dir)
		b.StartTimer()
	}
	mb := float64(size) / 1e6 * float64(b.N)
	b.ReportMetric(mb/base.Seconds(), "base-MB/s")
	b.ReportMetric(base.Seconds()/padfs.Seconds(), "x-base")
}

func writeSynced(path string, data []byte) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// BenchmarkPutContentCPU is the CPU side of a commit alone: chunking,
// hashing and framing 64 MiB into a store whose chunks are already there
// (every chunk deduplicates, so nothing is written), next to a bare
// SHA-256 of the same bytes as the baseline (timed apart from the rest):
//
//	MB/s        padfs's wall-clock throughput
//	cpu-MB/s    bytes over the process's CPU seconds (user + system) while
//	            padfs ran: the throughput of one core, whatever the load
//	x-sha256    padfs CPU time over one SHA-256 pass's (lower is better)
//
//	GOMAXPROCS=1 go test ./mvcc -run '^$' -bench PutContentCPU -benchtime 20x
func BenchmarkPutContentCPU(b *testing.B) {
	const size = 64 << 20
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{9}).Read(data)
	st, err := OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if _, err := st.PutContent(context.Background(), bytes.NewReader(data)); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	var padfs, base float64 // CPU seconds
	for b.Loop() {
		b.StopTimer()
		c0 := cpuSeconds()
		sha256.Sum256(data)
		base += cpuSeconds() - c0
		b.StartTimer()
		c0 = cpuSeconds()
		if _, err := st.PutContent(context.Background(), bytes.NewReader(data)); err != nil {
			b.Fatal(err)
		}
		padfs += cpuSeconds() - c0
	}
	b.ReportMetric(float64(size)/1e6*float64(b.N)/padfs, "cpu-MB/s")
	b.ReportMetric(padfs/base, "x-sha256")
}

// cpuSeconds is the process's CPU time so far, user and system.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
