package mvcc

import (
	"fmt"
	"time"
)

// threadStat is what the kernel counts for the calling thread (Linux):
// time on a CPU, time runnable but waiting for one, page faults that read
// the disk, and switches away from it that it asked for (it blocked) or not
// (preempted).
type threadStat struct {
	cpu, runq           time.Duration
	majflt, nvcsw, nivc int64
}

func (a threadStat) minus(b threadStat) threadStat {
	return threadStat{a.cpu - b.cpu, a.runq - b.runq, a.majflt - b.majflt, a.nvcsw - b.nvcsw, a.nivc - b.nivc}
}

func (a threadStat) String() string {
	return fmt.Sprintf("on cpu %v, runnable %v, off cpu %d times (blocked) %d (preempted), %d major faults",
		a.cpu.Round(time.Microsecond), a.runq.Round(time.Microsecond), a.nvcsw, a.nivc, a.majflt)
}
