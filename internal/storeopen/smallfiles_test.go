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
	"github.com/padfs/padfs/internal/storeopen"
)

// TestMeasureSmallFiles runs the end-to-end benchmark's small-files
// workload (create, cat, rm of PADFS_MEASURE_SMALL files) on a session of a
// bbolt store and then of a PostgreSQL store, each mounted in this process,
// and reports per step the CPU seconds of this process (padfs: the FUSE
// server and the store's client), of the PostgreSQL server, and the round
// trips, and the ratio of PostgreSQL's CPU (padfs and server) to bbolt's:
// CPU, not wall time, which a loaded machine makes noise of.
//
//	PADFS_MEASURE_SMALL=1000 go test ./internal/storeopen -run TestMeasureSmallFiles -v
func TestMeasureSmallFiles(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PADFS_MEASURE_SMALL"))
	if n <= 0 {
		t.Skip("set PADFS_MEASURE_SMALL=N to measure")
	}
	steps := []struct{ name, run string }{
		{"create", fmt.Sprintf(`mkdir small; for i in $(seq %d); do echo "small file $i" > small/f$i; done`, n)},
		{"cat", `cat small/* | sha256sum >/dev/null`},
		{"rm", `rm small/*; rmdir small`},
	}
	// measure runs the steps in the mounted session s: CPU of padfs and
	// of the server per step, and their totals.
	measure := func(store string, s storeAndDir, trips func() int64, srv int) (cpu []float64, total float64) {
		mnt := filepath.Join(t.TempDir(), "mnt")
		stop := mountPG(t, s, mnt)
		defer stop()
		var sum [3]float64
		for _, step := range steps {
			trips0, self0 := trips(), pgtest.SelfCPU()
			u0, s0 := pgtest.TreeCPU(srv)
			start := time.Now()
			// cd in the shell: a chdir between fork and exec would wait on
			// this process's own FUSE server while it is in the fork.
			cmd := exec.Command("bash", "-c", `cd "$1" && `+step.run, "bash", mnt)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("%s %s: %v\n%s", store, step.name, err, out)
			}
			if err := s.st.Sync(); err != nil {
				t.Fatal(err)
			}
			wall := time.Since(start).Seconds()
			u1, s1 := pgtest.TreeCPU(srv)
			self, server := pgtest.SelfCPU()-self0, u1+s1-u0-s0
			if srv == 0 {
				server = 0
			}
			sum[0], sum[1], sum[2] = sum[0]+self, sum[1]+server, sum[2]+wall
			cpu = append(cpu, self+server)
			t.Logf("%-8s %-6s padfs CPU %.2f s, server CPU %.2f s, wall %.2f s, %d round trips", store, step.name, self, server, wall, trips()-trips0)
		}
		t.Logf("%-8s total  padfs CPU %.2f s, server CPU %.2f s, wall %.2f s", store, sum[0], sum[1], sum[2])
		return cpu, sum[0] + sum[1]
	}

	dir := t.TempDir()
	bst, err := storeopen.Open(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bst.Close() })
	h, err := bst.CreateSession("small", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	boltCPU, boltTotal := measure("bbolt", storeAndDir{bst, dir, h.ID}, func() int64 { return 0 }, 0)

	s, pg := newPGSession(t, "small")
	pgCPU, pgTotal := measure("postgres", s, pg.RoundTrips, pgtest.Current().Pid())
	for i, step := range steps {
		t.Logf("%-6s CPU postgres (padfs + server) / bbolt: %.2f", step.name, pgCPU[i]/boltCPU[i])
	}
	la, _ := os.ReadFile("/proc/loadavg")
	t.Logf("total  CPU postgres (padfs + server) / bbolt: %.2f; load %s", pgTotal/boltTotal, la[:14])
}
