package storeopen_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/pgtest"
)

// TestMeasureSmallFiles runs the end-to-end benchmark's small-files
// workload (create, cat, rm of PADFS_MEASURE_SMALL files) on a session of a
// PostgreSQL store mounted in this process, and reports per step the CPU
// seconds of this process (padfs: the FUSE server and the store's client)
// and of the PostgreSQL server, and the round trips: CPU, not wall time,
// which a loaded machine makes noise of.
//
//	PADFS_MEASURE_SMALL=1000 go test ./internal/storeopen -run TestMeasureSmallFiles -v
func TestMeasureSmallFiles(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PADFS_MEASURE_SMALL"))
	if n <= 0 {
		t.Skip("set PADFS_MEASURE_SMALL=N to measure")
	}
	s, pg := newPGSession(t, "small")
	st := s.st
	mnt := filepath.Join(t.TempDir(), "mnt")
	mountPG(t, s, mnt)
	srv := pgtest.Current().Pid()
	var total [3]float64
	for _, step := range []struct{ name, run string }{
		{"create", fmt.Sprintf(`mkdir small; for i in $(seq %d); do echo "small file $i" > small/f$i; done`, n)},
		{"cat", `cat small/* | sha256sum >/dev/null`},
		{"rm", `rm small/*; rmdir small`},
	} {
		trips0, self0 := pg.RoundTrips(), pgtest.SelfCPU()
		u0, s0 := pgtest.TreeCPU(srv)
		start := time.Now()
		// cd in the shell: a chdir between fork and exec would wait on
		// this process's own FUSE server while it is in the fork.
		cmd := exec.Command("bash", "-c", `cd "$1" && `+step.run, "bash", mnt)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", step.name, err, out)
		}
		if err := st.Sync(); err != nil {
			t.Fatal(err)
		}
		wall := time.Since(start).Seconds()
		u1, s1 := pgtest.TreeCPU(srv)
		self, server := pgtest.SelfCPU()-self0, u1+s1-u0-s0
		total[0], total[1], total[2] = total[0]+self, total[1]+server, total[2]+wall
		t.Logf("%-6s padfs CPU %.2f s, server CPU %.2f s, wall %.2f s, %d round trips", step.name, self, server, wall, pg.RoundTrips()-trips0)
	}
	la, _ := os.ReadFile("/proc/loadavg")
	t.Logf("total  padfs CPU %.2f s, server CPU %.2f s, wall %.2f s; load %s", total[0], total[1], total[2], la[:14])
}
