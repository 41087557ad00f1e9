package mvcc

import (
	"bytes"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// threadCounters returns a reader of the calling thread's counters; the
// caller stays on its thread (runtime.LockOSThread). The schedstat file
// stays open: a read costs one pread and one getrusage.
func threadCounters() (read func() threadStat, close func()) {
	f, err := os.Open("/proc/thread-self/schedstat")
	if err != nil {
		return func() threadStat { return threadStat{} }, func() {}
	}
	buf := make([]byte, 128)
	return func() threadStat {
		var ts threadStat
		if n, err := f.ReadAt(buf, 0); n > 0 {
			_ = err // io.EOF: the file is shorter than buf
			fs := bytes.Fields(buf[:n])
			if len(fs) >= 2 {
				cpu, _ := strconv.ParseInt(string(fs[0]), 10, 64)
				runq, _ := strconv.ParseInt(string(fs[1]), 10, 64)
				ts.cpu, ts.runq = time.Duration(cpu), time.Duration(runq)
			}
		}
		var ru unix.Rusage
		if unix.Getrusage(unix.RUSAGE_THREAD, &ru) == nil {
			ts.majflt, ts.nvcsw, ts.nivc = ru.Majflt, ru.Nvcsw, ru.Nivcsw
		}
		return ts
	}, func() { f.Close() }
}
