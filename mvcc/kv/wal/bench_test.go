package wal

import (
	"path/filepath"
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
