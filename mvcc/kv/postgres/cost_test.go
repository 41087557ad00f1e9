package postgres_test

import (
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

// BenchmarkCommit measures the CPU one commit costs this process and the
// server: Updates one after another, shaped like a small file's create
// and unlink on a mounted session (8 rows in 7 key groups, the session's
// lease held, following the store), so that a change to the commit path
// can be judged in CPU rather than in wall time on a shared machine.
//
//	go test ./mvcc/kv/postgres -run '^$' -bench Commit -benchtime 2000x
func BenchmarkCommit(b *testing.B) { benchCommits(b, false) }

// BenchmarkCommitDeferred is BenchmarkCommit with the unlinks (odd i)
// deferred (kv.Defer), as mvcc defers a metadata-only commit: each joins
// the next create's transaction.
func BenchmarkCommitDeferred(b *testing.B) { benchCommits(b, true) }

func benchCommits(b *testing.B, deferUnlinks bool) {
	url := pgtest.DB(b)
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	sid := []byte(strings.Repeat("s", 16))
	l, err := s.Acquire(context.Background(), "S", postgres.LeaseOptions{Host: "bench", Pid: 1, Session: sid})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release()
	s.Follow(func() error { return nil })
	srv := pgtest.Current()
	commit := func(i int) {
		if err := s.Update(func(tx kv.Txn) error {
			if deferUnlinks && i%2 == 1 {
				kv.Defer(tx)
			}
			return smallFileTxn(tx, sid, i)
		}); err != nil {
			b.Fatal(err)
		}
	}
	commit(0)
	b.ResetTimer()
	self0 := pgtest.SelfCPU()
	u0, s0 := pgtest.TreeCPU(srv.Pid())
	for i := 1; i <= b.N; i++ {
		commit(i)
	}
	if err := s.Sync(); err != nil { // the last deferred commit
		b.Fatal(err)
	}
	b.StopTimer()
	u1, s1 := pgtest.TreeCPU(srv.Pid())
	b.ReportMetric((pgtest.SelfCPU()-self0)/float64(b.N)*1e6, "client-µs/op")
	b.ReportMetric((u1+s1-u0-s0)/float64(b.N)*1e6, "server-µs/op")
	b.ReportMetric((s1-s0)/float64(b.N)*1e6, "server-sys-µs/op")
}

// smallFileTxn writes what a small file's create (even i) or unlink (odd
// i) writes: a directory entry, an event, two inode versions, a lookup
// entry, the clock, a counter and a stat row.
func smallFileTxn(tx kv.Txn, sid []byte, i int) error {
	if _, err := tx.Get([]byte("Mhlc")); err != nil {
		return err
	}
	key := func(kind byte, n int) []byte {
		k := append([]byte{kind}, sid...)
		return binary.BigEndian.AppendUint64(k, uint64(n))
	}
	val := func(n int) []byte { return []byte(strings.Repeat("v", n)) }
	puts := []struct {
		k []byte
		v []byte
	}{
		{key('D', i), val(11)}, {key('E', i), val(120)}, {key('I', 2*i), val(68)}, {key('I', 2*i+1), val(115)},
		{[]byte("Mhlc"), val(8)}, {key('N', 0), val(17)}, {key('S', i%64), val(42)},
	}
	for _, p := range puts {
		if err := tx.Put(p.k, p.v); err != nil {
			return err
		}
	}
	if i%2 == 1 {
		return tx.Delete(key('L', i-1))
	}
	return tx.Put(key('L', i), val(21))
}
