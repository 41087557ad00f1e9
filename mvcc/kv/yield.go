package kv

import (
	"runtime"
	"time"
)

// Yielder lets goroutines waiting for a processor run during a long
// CPU-bound loop (a fold of the log, a compaction's copy): Go preempts a
// running goroutine only after 10 ms, and with the collector busy on the
// other processor of a small machine a commit it woke, or one back from a
// syscall, waited that long or more for each such loop (12-28 ms in
// runtime traces of a 1 GiB hard forget and redaction). Call Tick once per
// step; it yields about every millisecond. The zero value is ready.
type Yielder struct {
	last time.Time
	n    int
}

// yieldCheck is how many steps go between two looks at the clock.
const yieldCheck = 16

// Tick counts a step and yields the processor if the last yield (or the
// first step) was a millisecond ago or more.
func (y *Yielder) Tick() {
	if y.n++; y.n%yieldCheck != 0 {
		return
	}
	now := time.Now()
	if y.last.IsZero() {
		y.last = now
		return
	}
	if now.Sub(y.last) >= time.Millisecond {
		runtime.Gosched()
		y.last = time.Now()
	}
}
