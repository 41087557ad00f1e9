package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The mount's live heap is small (tens of MB) and its requests allocate
// fast, so with GOGC=100 it collected every few MB of allocation: a tenth
// of its CPU on `git add` of GOROOT/src was the collector. tuneGC lets
// the heap grow gcHeadroom past the live bytes instead, while that is
// more than doubling it: a small heap is collected up to 8x less often,
// and a large one (a full write buffer, a 1 GiB grep) as before.
const (
	gcHeadroom   = 256 << 20
	gcPercentMax = 800
)

// gcPercentFor is the GOGC that lets a heap of live bytes grow by
// gcHeadroom, at least 100 (the default) and at most gcPercentMax.
func gcPercentFor(live uint64) int {
	if live == 0 {
		return gcPercentMax
	}
	return int(min(max(100*gcHeadroom/live, 100), gcPercentMax))
}

var tuneGCOnce sync.Once

// gcSentinel is garbage as soon as it is made; its finalizer runs after
// the collection that finds it so. It holds a pointer, so it is never
// tiny-allocated (a tiny object's finalizer may never run).
type gcSentinel struct {
	_ *int
	_ [8]byte
}

func abs(x int) int { return max(x, -x) }

// tuneGC re-tunes GOGC after every collection of this process, unless
// the environment sets GOGC.
func tuneGC() {
	if os.Getenv("GOGC") != "" {
		return
	}
	tuneGCOnce.Do(func() {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		last := 100
		var arm func()
		arm = func() {
			runtime.SetFinalizer(&gcSentinel{}, func(*gcSentinel) {
				metrics.Read(sample)
				if sample[0].Value.Kind() == metrics.KindUint64 {
					// Steps of a tenth or more: the live bytes move
					// a little at every collection.
					if p := gcPercentFor(sample[0].Value.Uint64()); 10*abs(p-last) >= last {
						debug.SetGCPercent(p)
						last = p
					}
				}
				arm()
			})
		}
		debug.SetGCPercent(gcPercentMax) // until the first collection measures
		last = gcPercentMax
		arm()
	})
}
