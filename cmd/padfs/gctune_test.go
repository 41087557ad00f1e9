package main

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, gcPercentMax},
		{16 << 20, gcPercentMax}, // 256 MiB of headroom would be 1600%
		{64 << 20, 400},
		{128 << 20, 200},
		{256 << 20, 100},
		{1 << 30, 100}, // never below the default
	} {
		if got := gcPercentFor(c.live); got != c.want {
			t.Errorf("gcPercentFor(%d MiB) = %d, want %d", c.live>>20, got, c.want)
		}
	}
}

// gogc reads the current GOGC.
func gogc() int {
	p := debug.SetGCPercent(-1)
	debug.SetGCPercent(p)
	return p
}

// TestTuneGC: GOGC in the environment leaves the collector alone;
// without it the tuner raises GOGC for this test's small heap, and keeps
// it raised across collections.
func TestTuneGC(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	t.Setenv("GOGC", "100")
	tuneGC()
	if p := gogc(); p != 100 {
		t.Fatalf("with GOGC=100 set, tuneGC made it %d", p)
	}
	t.Setenv("GOGC", "")
	tuneGC()
	for i := 0; i < 3; i++ {
		runtime.GC()
		if p, want := gogc(), gcPercentMax; p != want {
			t.Fatalf("after %d collections of a small heap GOGC is %d, want %d", i+1, p, want)
		}
	}
}
