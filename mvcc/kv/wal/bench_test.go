package wal

import (
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/bolt"
)

// BenchmarkSmallUpdates compares sequential one-key Updates (the shape of
// tar -x) on wal-over-bolt and on bare bolt, which fsyncs each one. The
// temporary directory must be on a real disk for the ratio to mean
// anything (tmpfs makes fsync free).
func BenchmarkSmallUpdates(b *testing.B) {
	dir := b.TempDir()
	w, _ := mustOpen(b, dir, Options{})
	defer w.Close()
	bare, err := bolt.Open(filepath.Join(dir, "bare.db"), bolt.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer bare.Close()

	timed := func(s kv.Store, i int) time.Duration {
		start := time.Now()
		if err := s.Update(func(tx kv.Txn) error { return tx.Put(key(i), value(i)) }); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var walT, boltT time.Duration
	n := 0
	for b.Loop() {
		// Interleaved, so both see the same disk and background load.
		walT += timed(w, n)
		boltT += timed(bare, n)
		n++
	}
	b.ReportMetric(float64(walT.Nanoseconds())/float64(n), "wal-ns/update")
	b.ReportMetric(float64(boltT.Nanoseconds())/float64(n), "bolt-ns/update")
	b.ReportMetric(float64(boltT)/float64(walT), "wal-speedup")
}

// BenchmarkMetaUpdates measures the memtable's part of a metadata commit:
// an Update of five small puts (an inode, a dirent, a log entry) and a
// View that reads one of them back, as a FUSE create does.
func BenchmarkMetaUpdates(b *testing.B) {
	w, _ := mustOpen(b, b.TempDir(), Options{})
	defer w.Close()
	val := make([]byte, 120)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := w.Update(func(tx kv.Txn) error {
			for j := range 5 {
				if err := tx.Put(key(i*5+j), val); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
		if err := w.View(func(r kv.Reader) error {
			_, err := r.Get(key(i * 5))
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemtableMark measures what a memtable of a million small writes
// (a compaction's backlog) costs the collector: each op is a full
// collection with it live, and gc-mark-cpu-ms its mark CPU.
func BenchmarkMemtableMark(b *testing.B) {
	w, _ := mustOpen(b, b.TempDir(), Options{MemtableSize: 1 << 40, FlushInterval: time.Hour})
	defer w.Close()
	val := make([]byte, 100)
	for i := 0; i < 1_000_000; i += 10 {
		if err := w.Update(func(tx kv.Txn) error {
			for j := range 10 {
				if err := tx.Put(key(i+j), val); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
	mark := []metrics.Sample{{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"},
		{Name: "/cpu/classes/gc/mark/dedicated:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/idle:cpu-seconds"}}
	markCPU := func() float64 {
		metrics.Read(mark)
		return mark[0].Value.Float64() + mark[1].Value.Float64() + mark[2].Value.Float64()
	}
	runtime.GC()
	c0 := markCPU()
	n := 0
	for b.Loop() {
		runtime.GC()
		n++
	}
	b.ReportMetric((markCPU()-c0)*1000/float64(n), "gc-mark-cpu-ms")
}
