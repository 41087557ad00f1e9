package mvcc

import (
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
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
//
// PADFS_MEASURE_FLIGHT=DIR keeps a flight recorder running instead and
// writes its last 2 s to DIR/kind-N-stage-MS.trace after each of the first
// 12 commits that waited over 10 ms (go tool trace -d=parsed reads them).
//
// PADFS_MEASURE_HEAP=FILE writes a heap profile (as of the last collection)
// to FILE.kind.stage when the writer enters each stage and when the job
// ends (go tool pprof -sample_index=inuse_space): what the collector marks.
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
			e.settle()
			measureJob(t, e, kind, mb, sid, other)
		})
	}
}

// jobSample is one commit of the writer of another session. It holds no
// pointer: millions of them must not add to the collector's work.
type jobSample struct {
	d     time.Duration
	batch int64      // batches the job had done when it began
	stage int        // index in jobStages; -1: the baseline
	th    threadStat // what the writer's thread did meanwhile
}

// blocked is the part of the wait the writer's thread slept: on a lock,
// in the collector, on I/O, or waiting for the Go scheduler to give its
// goroutine a P (a thread locked to its goroutine sleeps meanwhile); not
// the time it ran nor the time it waited for a CPU (other processes).
func (s jobSample) blocked() time.Duration { return max(0, s.d-s.th.cpu-s.th.runq) }

// jobStages are the stages of a job as the writer sees them: "start"
// until the job's first batch has ended (its plan, its mark, a
// redaction's first content), then its batches, its compaction, and 3 s
// "after" it, when the WAL folds what the writes during the compaction's
// copy left in its memtable.
var jobStages = []string{"start", "batches", "compact", "after"}

// measureJob plans the job kind ("forget" or "redact") of session sid,
// measures the writer of session other without a job (baseline) and then
// during the job, and logs both.
func measureJob(t *testing.T, e *lcEnv, kind string, mb int, sid, other SessionID) {
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
	// The writer's own thread, so that its kernel counters tell where a
	// long wait went.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	readThreadStat, closeStat := threadCounters()
	defer closeStat()
	commit := func(name string) (time.Duration, threadStat) {
		c0, th0 := time.Now(), readThreadStat()
		if _, err := e.st.Create(other, h.Root, name, Attr{Mode: sIFREG | 0o644}, ""); err != nil {
			t.Fatal(err)
		}
		return time.Since(c0), readThreadStat().minus(th0)
	}
	var base []jobSample
	for i := 0; i < 20000; i++ {
		d, th := commit(fmt.Sprintf("b%d", i))
		base = append(base, jobSample{d, 0, -1, th})
	}
	logStage(t, "baseline (no job)", base)
	var maxBatch, maxAt, nBatch atomic.Int64
	var pauses atomic.Int64
	e.st.jobHook = func(event string, n int64, took time.Duration) {
		if event == "plan" {
			pauses.Store(n)
			return
		}
		t.Logf("%s: the plan paused %d times; the mark committed in %v", kind, pauses.Load(), took.Round(time.Microsecond))
	}
	e.st.batchHook = func(stage string, n int64, took time.Duration) {
		nBatch.Store(n)
		if int64(took) > maxBatch.Load() {
			maxBatch.Store(int64(took))
			maxAt.Store(n)
		}
	}
	done := make(chan error, 1)
	stopTrace := traceWindow(t, kind, e.st)
	defer stopTrace()
	longWait, stopFlight := flightRecorder(t, kind)
	defer stopFlight()
	go func() { done <- run() }()
	samples, took := writeDuring(t, e, kind, done, nBatch.Load, commit, longWait)
	e.st.jobHook, e.st.batchHook = nil, nil
	for _, st := range jobStages {
		logStage(t, fmt.Sprintf("%s %d MiB, %s (%v, %d GCs)", kind, mb, st, samples.span(st), samples.gcs(st)), samples.of[st])
	}
	t.Logf("%s %d MiB took %v: %d batches, the longest %v (batch %d)", kind, mb, took.Round(time.Millisecond),
		nBatch.Load(), time.Duration(maxBatch.Load()), maxAt.Load())
	all := slices.Concat(samples.of["start"], samples.of["batches"], samples.of["compact"], samples.of["after"])
	slices.SortFunc(all, func(a, b jobSample) int { return int(b.d - a.d) })
	for _, s := range all[:min(5, len(all))] {
		t.Logf("  a long wait: %v, after batch %d (%s); writer's thread: %v", s.d, s.batch, jobStages[s.stage], s.th)
	}
}

// stageSamples are the writer's commits by stage, with when each stage's
// first and last commits began and the collections done by then.
type stageSamples struct {
	of    map[string][]jobSample
	first map[string]time.Time
	last  map[string]time.Time
	gc    map[string][2]uint64
}

func (s *stageSamples) span(st string) time.Duration {
	return s.last[st].Sub(s.first[st]).Round(time.Millisecond)
}

func (s *stageSamples) gcs(st string) uint64 { return s.gc[st][1] - s.gc[st][0] }

// writeDuring commits to the other session until 3 s after the job
// (done) has ended, and returns the commits by stage and the job's time.
func writeDuring(t *testing.T, e *lcEnv, kind string, done chan error, batches func() int64,
	commit func(string) (time.Duration, threadStat), longWait func(time.Duration, string)) (*stageSamples, time.Duration) {
	ss := &stageSamples{of: map[string][]jobSample{}, first: map[string]time.Time{},
		last: map[string]time.Time{}, gc: map[string][2]uint64{}}
	gcSample := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	start := time.Now()
	var total time.Duration
	var ended time.Time
	compacted := false
	for i := 0; ended.IsZero() || time.Since(ended) < 3*time.Second; i++ {
		if ended.IsZero() {
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
				total, ended = time.Since(start), time.Now()
				heapProfile(t, kind+".end")
			default:
			}
		}
		c0, b0 := time.Now(), batches()
		st := "batches"
		switch {
		case e.st.compacting.Load():
			st, compacted = "compact", true
		case compacted || !ended.IsZero():
			st = "after" // the compaction is over, the job about to return
		case b0 == 0:
			st = "start"
		}
		d, th := commit(fmt.Sprintf("f%d", i))
		if d > 5*time.Millisecond && trace.IsEnabled() {
			// Find it in a runtime trace: it ended at this event and
			// began d before.
			trace.Log(t.Context(), "longwait", fmt.Sprintf("%d %s", d.Nanoseconds(), st))
		}
		if d > 10*time.Millisecond {
			longWait(d, st)
		}
		ss.of[st] = append(ss.of[st], jobSample{d, b0, slices.Index(jobStages, st), th})
		if ss.first[st].IsZero() {
			ss.first[st] = c0
			heapProfile(t, kind+"."+st)
		}
		ss.last[st] = c0
		metrics.Read(gcSample)
		g := ss.gc[st]
		if g[0] == 0 {
			g[0] = gcSample[0].Value.Uint64()
		}
		g[1] = gcSample[0].Value.Uint64()
		ss.gc[st] = g
	}
	return ss, total
}

// logStage logs the waits of samples: their quantiles, and those of the
// part of each the writer's thread slept (blocked).
func logStage(t *testing.T, what string, samples []jobSample) {
	var ds, bs []time.Duration
	for _, s := range samples {
		ds = append(ds, s.d)
		bs = append(bs, s.blocked())
	}
	t.Logf("%s: other session's commits: %s; of which blocked: %s", what, quantiles(ds), quantiles(bs))
}

// quantiles sorts ds and describes them: how many, p50, p99, p99.9, max.
func quantiles(ds []time.Duration) string {
	if len(ds) == 0 {
		return "no commits"
	}
	slices.Sort(ds)
	q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
	return fmt.Sprintf("%d commits; p50 %v p99 %v p99.9 %v max %v", len(ds), q(0.5), q(0.99), q(0.999), ds[len(ds)-1])
}

// heapProfile writes the heap profile PADFS_MEASURE_HEAP asks for, if any,
// to its FILE.name.
func heapProfile(t *testing.T, name string) {
	file := os.Getenv("PADFS_MEASURE_HEAP")
	if file == "" {
		return
	}
	f, err := os.Create(file + "." + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
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

// flightRecorder starts the flight recorder PADFS_MEASURE_FLIGHT asks for,
// if any, and returns what to call after a long wait (it saves the trace
// from another goroutine) and its stop.
func flightRecorder(t *testing.T, kind string) (longWait func(time.Duration, string), stop func()) {
	dir := os.Getenv("PADFS_MEASURE_FLIGHT")
	if dir == "" {
		return func(time.Duration, string) {}, func() {}
	}
	fr := trace.NewFlightRecorder(trace.FlightRecorderConfig{MinAge: 2 * time.Second, MaxBytes: 64 << 20})
	if err := fr.Start(); err != nil {
		t.Fatal(err)
	}
	type wait struct {
		d  time.Duration
		st string
	}
	waits := make(chan wait, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		n := 0
		for w := range waits {
			n++
			time.Sleep(50 * time.Millisecond) // the wait's holder has let go
			name := fmt.Sprintf("%s/%s-%02d-%s-%dms.trace", dir, kind, n, w.st, w.d.Milliseconds())
			f, err := os.Create(name)
			if err != nil {
				t.Error(err)
				continue
			}
			if _, err := fr.WriteTo(f); err != nil {
				t.Error(err)
			}
			f.Close()
		}
	}()
	saved := 0
	return func(d time.Duration, st string) {
			if saved >= 12 {
				return
			}
			select {
			case waits <- wait{d, st}:
				saved++
			default: // one is being written
			}
		}, func() {
			close(waits)
			<-ended
			fr.Stop()
		}
}
