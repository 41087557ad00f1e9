package mvcc

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestMeasureJobStall reports (it asserts nothing about time) the stall a
// writer of another session sees while a hard forget and a redaction of a
// large session run. PADFS_MEASURE_JOB_MB sets the session's size:
//
//	PADFS_MEASURE_JOB_MB=1024 go test ./mvcc -run TestMeasureJobStall -v -timeout 60m
//
// PADFS_MEASURE_MMAP_GB sets bbolt's initial memory map (default 64 GiB): a
// store that outgrows its map remaps it, and a remap waits for every open
// read transaction while new ones wait for it.
//
// PADFS_MEASURE_TRACE=FILE:PHASE:SECONDS writes a runtime trace of the
// first SECONDS of PHASE (batches or compact) of each job to FILE.kind
// (each commit that waited over 5 ms is logged in it as "longwait"), for
// go tool trace; a trace of the whole run is too big to read.
func TestMeasureJobStall(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("PADFS_MEASURE_JOB_MB"))
	if mb <= 0 {
		t.Skip("set PADFS_MEASURE_JOB_MB")
	}
	for _, kind := range []string{"forget", "redact"} {
		t.Run(kind, func(t *testing.T) {
			e := lcOpen(t)
			if gb, _ := strconv.Atoi(os.Getenv("PADFS_MEASURE_MMAP_GB")); gb > 0 {
				e.st.Close()
				st, err := openDirMmap(e.dir, gb<<30)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				e.st = st
			}
			other := e.session("other")
			sid := e.session("big")
			const fileSize = 256 << 10
			rng := rand.New(rand.NewSource(1))
			buf := make([]byte, fileSize)
			t0 := time.Now()
			for i := 0; i < mb*4; i++ {
				rng.Read(buf)
				copy(buf[1000:], purgeMarker)
				e.write(sid, fmt.Sprintf("d%03d/f%d", i%100, i), buf)
			}
			t.Logf("%d MiB written in %v", mb, time.Since(t0).Round(time.Millisecond))
			// Start from an empty log: the fold of the setup's writes is
			// not the job's.
			if f, ok := e.st.kv.(interface{ Flush() error }); ok {
				if err := f.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			var run func() error
			if kind == "forget" {
				r, err := e.st.PlanPurge(sid)
				if err != nil {
					t.Fatal(err)
				}
				run = func() error { _, err := e.st.Purge(t.Context(), sid, r.Token, nil); return err }
			} else {
				r, err := e.st.PlanRedact(sid, purgeMarker, DefaultRedaction)
				if err != nil {
					t.Fatal(err)
				}
				run = func() error { _, err := e.st.Redact(t.Context(), sid, purgeMarker, nil, r.Token, nil); return err }
			}
			h, _ := e.st.Header(other)
			type stall struct {
				d     time.Duration
				batch int64
				stage string
				th    threadStat // what the writer's thread did meanwhile
			}
			// maxOwn is the longest wait of stage less the time the VM's
			// CPU was taken away (steal, which no code here causes): for a
			// commit whose thread never blocked, that is the time it was
			// neither on a CPU nor waiting for one.
			maxOwn := func(stalls []stall, stage string) time.Duration {
				var m time.Duration
				for _, s := range stalls {
					d := s.d
					if s.d > 5*time.Millisecond && s.th.nvcsw == 0 && s.th.cpu+s.th.runq < d {
						d = s.th.cpu + s.th.runq
					}
					if s.stage == stage && d > m {
						m = d
					}
				}
				return m
			}
			// The writer's own thread, so that its kernel counters
			// tell where a long wait went.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			readThreadStat, closeStat := threadCounters()
			defer closeStat()
			var base []time.Duration
			var baseStalls []stall
			for i := 0; i < 20000; i++ {
				c0, th0 := time.Now(), readThreadStat()
				if _, err := e.st.Create(other, h.Root, fmt.Sprintf("b%d", i), Attr{Mode: sIFREG | 0o644}, ""); err != nil {
					t.Fatal(err)
				}
				d := time.Since(c0)
				var th threadStat
				if d > 5*time.Millisecond {
					th = readThreadStat().minus(th0)
				}
				base = append(base, d)
				baseStalls = append(baseStalls, stall{d, 0, "baseline", th})
			}
			slices.Sort(base)
			t.Logf("baseline (no job): %d commits; p50 %v p99 %v max %v (max %v without steal)", len(base),
				base[len(base)/2], base[len(base)*99/100], base[len(base)-1], maxOwn(baseStalls, "baseline"))
			var stalls []stall
			var maxBatch, maxAt, nBatch atomic.Int64
			e.st.batchHook = func(_ string, n int64, took time.Duration) {
				nBatch.Store(n)
				if int64(took) > maxBatch.Load() {
					maxBatch.Store(int64(took))
					maxAt.Store(n)
				}
			}
			var mu sync.Mutex
			lat := map[string][]time.Duration{}
			span := map[string][2]time.Time{} // when a stage's first and last commits began
			done := make(chan error, 1)
			start := time.Now()
			stopTrace := traceWindow(t, kind, e.st)
			defer stopTrace()
			go func() {
				err := run()
				done <- err
			}()
			// After the job the writer goes on for 3 s ("after"): the WAL
			// then folds what collected in its memtable during the
			// compaction's copy.
			var total time.Duration
			var ended time.Time
			compacted := false
			for i := 0; ; i++ {
				if ended.IsZero() {
					select {
					case err := <-done:
						if err != nil {
							t.Fatal(err)
						}
						total, ended = time.Since(start), time.Now()
					default:
					}
				}
				if !ended.IsZero() && time.Since(ended) > 3*time.Second {
					for _, st := range []string{"batches", "compact", "after"} {
						ds := lat[st]
						if len(ds) == 0 {
							continue
						}
						slices.Sort(ds)
						t.Logf("%s %d MiB, %s (%v): %d commits of another session; p50 %v p99 %v max %v (max %v without steal)",
							kind, mb, st, span[st][1].Sub(span[st][0]).Round(time.Millisecond), len(ds),
							ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1], maxOwn(stalls, st))
					}
					t.Logf("%s %d MiB took %v: %d batches, the longest %v (batch %d)", kind, mb, total.Round(time.Millisecond),
						nBatch.Load(), time.Duration(maxBatch.Load()), maxAt.Load())
					slices.SortFunc(stalls, func(a, b stall) int { return int(b.d - a.d) })
					for _, st := range stalls[:min(5, len(stalls))] {
						t.Logf("  a long wait: %v, after batch %d (%s); writer's thread: %v", st.d, st.batch, st.stage, st.th)
					}
					return
				}
				c0, b0, th0 := time.Now(), nBatch.Load(), readThreadStat()
				st := "batches"
				switch {
				case e.st.compacting.Load():
					st, compacted = "compact", true
				case compacted || !ended.IsZero():
					// The compaction is over, the job about to return.
					st = "after"
				}
				if _, err := e.st.Create(other, h.Root, fmt.Sprintf("f%d", i), Attr{Mode: sIFREG | 0o644}, ""); err != nil {
					t.Fatal(err)
				}
				d := time.Since(c0)
				var th threadStat
				if d > 5*time.Millisecond {
					th = readThreadStat().minus(th0)
				}
				if d > 5*time.Millisecond && trace.IsEnabled() {
					// Find it in a runtime trace (go test -trace): it
					// ended at this event and began d before.
					trace.Log(t.Context(), "longwait", fmt.Sprintf("%d %s", d.Nanoseconds(), st))
				}
				mu.Lock()
				lat[st] = append(lat[st], d)
				sp := span[st]
				if sp[0].IsZero() {
					sp[0] = c0
				}
				sp[1] = c0
				span[st] = sp
				stalls = append(stalls, stall{d, b0, st, th})
				mu.Unlock()
			}
		})
	}
}

// traceWindow starts the trace PADFS_MEASURE_TRACE asks for, if any, and
// returns its stop.
func traceWindow(t *testing.T, kind string, st *Store) (stop func()) {
	spec := strings.Split(os.Getenv("PADFS_MEASURE_TRACE"), ":")
	if len(spec) != 3 {
		return func() {}
	}
	secs, _ := strconv.Atoi(spec[2])
	f, err := os.Create(spec[0] + "." + kind)
	if err != nil {
		t.Fatal(err)
	}
	quit := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for (spec[1] == "compact") != st.compacting.Load() {
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
		}
		if err := trace.Start(f); err != nil {
			t.Error(err)
			return
		}
		select {
		case <-quit:
		case <-time.After(time.Duration(secs) * time.Second):
		}
		trace.Stop()
	}()
	return func() {
		close(quit)
		<-ended
		f.Close()
	}
}
