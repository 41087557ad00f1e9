package fs

import (
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

// posixSkip lists posixtest cases that do not apply, with the reason.
var posixSkip = map[string]string{
	// The case takes a write lock on one descriptor and expects a read
	// lock on a second descriptor of the same file, in the same process,
	// to fail. POSIX record locks belong to the process, so they never
	// conflict with each other; the case only passes on go-fuse's
	// loopback, which turns them into OFD locks on its own descriptors.
	// padfs leaves record locks to the kernel (POSIX semantics).
	"FcntlFlockLocksFile": "expects per-descriptor conflicts between one process's POSIX locks (loopback artifact); padfs keeps kernel POSIX lock semantics",
}

// TestPosix runs go-fuse's POSIX conformance suite, each case on a fresh
// session.
func TestPosix(t *testing.T) {
	names := make([]string, 0, len(posixtest.All))
	for name := range posixtest.All {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fn := posixtest.All[name]
		t.Run(name, func(t *testing.T) {
			if why, ok := posixSkip[name]; ok {
				t.Skip(why)
			}
			mnt, _, _ := mountTest(t)
			fn(t, mnt)
		})
	}
}
