package mvcc

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestMeasurePrune builds a store of a few hundred MB with many versions,
// prunes about a tenth of its history while a writer commits small files,
// and reports the prune's time and the writer's commit latencies, beside
// the same writer's latencies with no prune running. It asserts only what
// the prune must do, not times. Run with
//
//	PADFS_MEASURE_PRUNE=1 go test ./mvcc -run TestMeasurePrune -v -timeout 30m
//
// PADFS_MEASURE_PRUNE_MB sets the store's size by its large files (each
// round rewrites MB/20 files of 1 MiB; default 240 MiB in all, a store of
// about 385 MB): PADFS_MEASURE_PRUNE_MB=1024 builds a store of over 1 GB.
func TestMeasurePrune(t *testing.T) {
	if os.Getenv("PADFS_MEASURE_PRUNE") == "" {
		t.Skip("set PADFS_MEASURE_PRUNE=1 to measure")
	}
	e := lcOpen(t)
	sid := e.session("measure")
	rnd := rand.New(rand.NewSource(1))
	const rounds, small = 20, 4000
	big := 12
	if mb, _ := strconv.Atoi(os.Getenv("PADFS_MEASURE_PRUNE_MB")); mb > 0 {
		big = max(1, mb/rounds)
	}
	var tT HLC
	start := time.Now()
	for r := 0; r < rounds; r++ {
		for i := 0; i < small; i++ {
			e.write(sid, fmt.Sprintf("s/%03d/f%04d", i%50, i), []byte(fmt.Sprintf("round %d file %d %x\n", r, i, rnd.Int63())))
		}
		for i := 0; i < big; i++ {
			b := make([]byte, 1<<20)
			rnd.Read(b)
			e.write(sid, fmt.Sprintf("big/%02d.bin", i), b)
		}
		if r == rounds/10 {
			tT = e.now()
		}
	}
	if err := e.st.Sync(); err != nil {
		t.Fatal(err)
	}
	st := e.reopen()
	fi, _ := os.Stat(filepath.Join(e.dir, "padfs.db"))
	evs := len(e.events(sid, LogFilter{}))
	t.Logf("built %d commits, padfs.db %d MB, in %s", evs, fi.Size()>>20, time.Since(start).Round(time.Millisecond))

	writer := func(stop <-chan struct{}) []time.Duration {
		var lat []time.Duration
		n := e.write(sid, "writer.txt", []byte("0"))
		for i := 0; ; i++ {
			select {
			case <-stop:
				return lat
			default:
			}
			t0 := time.Now()
			if _, err := st.WriteContent(context.Background(), sid, n.Ino, bytes.NewReader([]byte(fmt.Sprint(i))), nowNs()); err != nil {
				t.Error(err)
				return lat
			}
			lat = append(lat, time.Since(t0))
		}
	}
	stats := func(lat []time.Duration) string {
		if len(lat) == 0 {
			return "no commits"
		}
		s := append([]time.Duration(nil), lat...)
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
		return fmt.Sprintf("%d commits, p50 %s, p99 %s, p99.9 %s, max %s", len(s), s[len(s)/2], s[len(s)*99/100], s[len(s)*999/1000], s[len(s)-1])
	}
	run := func(during func()) []time.Duration {
		stop := make(chan struct{})
		var lat []time.Duration
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); lat = writer(stop) }()
		during()
		close(stop)
		wg.Wait()
		return lat
	}
	var r *PruneReceipt
	var took time.Duration
	lat := run(func() {
		t0 := time.Now()
		var err error
		r, err = st.Prune(sid, PruneOptions{Before: tT, UnlinkedBefore: tT})
		took = time.Since(t0)
		if err != nil {
			t.Error(err)
		}
	})
	base := run(func() { time.Sleep(took) })
	t.Logf("prune of the first %d%% of history: %s; %d versions, %d chunks, %d MB freed, %d records read",
		100/10, took.Round(time.Millisecond), r.Versions, r.Chunks, r.Bytes>>20, r.Records)
	t.Logf("writer during the prune: %s", stats(lat))
	t.Logf("writer alone, as long:   %s", stats(base))
	if r.Versions == 0 || r.Chunks < big {
		t.Fatalf("receipt %+v", r)
	}
}
