package storeopen_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/session"
)

// BenchmarkStore compares a metadata-heavy agent workload on the two
// stores, through the Go API (no FUSE): 1,000 small files written into 20
// directories (each a commit), read back, and listed, by a process holding
// the session's lease.
//
//	go test -run '^$' -bench BenchmarkStore -benchtime 1x ./internal/storeopen/
func BenchmarkStore(b *testing.B) {
	for _, kind := range []string{"bolt", "postgres"} {
		b.Run(kind, func(b *testing.B) {
			url := ""
			if kind == "postgres" {
				url = pgtest.DB(b)
			}
			st, err := storeopen.Open(b.TempDir(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			api := session.Wrap(st, nil)
			trips := func() int64 { return 0 }
			if pg, ok := storeopen.Postgres(st); ok {
				trips = pg.RoundTrips
			}
			var write, read, list time.Duration
			var tw, tr, tl int64
			for i := 0; i < b.N; i++ {
				pad, err := api.Create(fmt.Sprint("bench", i))
				if err != nil {
					b.Fatal(err)
				}
				// The session's writer holds its lease, as a mount does
				// (on PostgreSQL its reads of the session are then local).
				sid, err := mvcc.ParseSessionID(pad.ID())
				if err != nil {
					b.Fatal(err)
				}
				release, err := storeopen.LeaseMount(st, &sid, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer release()
				t0, r0 := time.Now(), trips()
				for f := range 1000 {
					if err := pad.Write(context.Background(), fmt.Sprintf("d%02d/f%03d.txt", f%20, f), fmt.Sprintf("file %d\n", f)); err != nil {
						b.Fatal(err)
					}
				}
				t1, r1 := time.Now(), trips()
				for f := range 1000 {
					if _, ok, err := pad.Read(fmt.Sprintf("d%02d/f%03d.txt", f%20, f)); err != nil || !ok {
						b.Fatal(err)
					}
				}
				t2, r2 := time.Now(), trips()
				if ps, err := pad.Ls(""); err != nil || len(ps) != 1000 {
					b.Fatalf("Ls: %d paths, %v", len(ps), err)
				}
				write, read, list = write+t1.Sub(t0), read+t2.Sub(t1), list+time.Since(t2)
				tw, tr, tl = tw+r1-r0, tr+r2-r1, tl+trips()-r2
			}
			n := float64(b.N)
			b.ReportMetric(float64(write.Microseconds())/n/1000, "us/write")
			b.ReportMetric(float64(read.Microseconds())/n/1000, "us/read")
			b.ReportMetric(float64(list.Milliseconds())/n, "ms/ls")
			if kind == "postgres" {
				// Round trips to the server per operation.
				b.ReportMetric(float64(tw)/n/1000, "trips/write")
				b.ReportMetric(float64(tr)/n/1000, "trips/read")
				b.ReportMetric(float64(tl)/n, "trips/ls")
			}
		})
	}
}
