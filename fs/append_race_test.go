package fs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// appendStressLines is the number of lines each appender writes; the
// environment variable PADFS_APPEND_LINES raises it for a longer run.
func appendStressLines(t *testing.T) int {
	n := 300
	if s := os.Getenv("PADFS_APPEND_LINES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 {
			t.Fatalf("PADFS_APPEND_LINES=%q: want a positive number", s)
		}
		n = v
	}
	return n
}

// Appends (each `>>` an open, a write and a close that commits) must all
// land while other processes stat, list and read the file: a stale size in
// a GETATTR or LOOKUP reply makes the kernel put the next O_APPEND write at
// the old end, over the last line. Several `>>` appenders and one writer
// holding an O_APPEND descriptor run against cat, stat, tail and ls -l
// loops; afterwards every line is there exactly once.
func TestAppendWhileReading(t *testing.T) {
	mnt, _, _ := mountTest(t)
	n := appendStressLines(t)
	const appenders = 3
	if err := os.WriteFile(filepath.Join(mnt, "app.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Readers loop until the writers are done (the file "done" appears);
	// every loop is bounded by the writers, which are bounded by n.
	var script strings.Builder
	script.WriteString("set -u\n")
	for a := 0; a < appenders; a++ {
		fmt.Fprintf(&script, "(for ((i=0; i<%d; i++)); do echo \"a%d line $i\" >> app.log || exit 1; done) & w%d=$!\n", n, a, a)
	}
	fmt.Fprintf(&script, "(exec 3>>app.log; for ((i=0; i<%d; i++)); do echo \"fd line $i\" >&3 || exit 1; done) & wfd=$!\n", n)
	for _, r := range []string{"cat app.log > /dev/null", "stat app.log > /dev/null", "tail -n 1 app.log > /dev/null", "ls -l > /dev/null"} {
		fmt.Fprintf(&script, "(while [ ! -e done ]; do %s; done) &\n", r)
	}
	script.WriteString("rc=0\nfor p in $w0 $w1 $w2 $wfd; do wait $p || rc=1; done\ntouch done\nwait\nexit $rc\n")
	sh(t, mnt, script.String())

	data, err := os.ReadFile(filepath.Join(mnt, "app.log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		seen[l]++
	}
	var want []string
	for a := 0; a < appenders; a++ {
		for i := 0; i < n; i++ {
			want = append(want, fmt.Sprintf("a%d line %d", a, i))
		}
	}
	for i := 0; i < n; i++ {
		want = append(want, fmt.Sprintf("fd line %d", i))
	}
	missing, dup := 0, 0
	for _, l := range want {
		switch c := seen[l]; {
		case c == 0:
			missing++
			if missing <= 5 {
				t.Errorf("line %q missing", l)
			}
		case c > 1:
			dup++
			t.Errorf("line %q present %d times", l, c)
		}
		delete(seen, l)
	}
	for l := range seen {
		t.Errorf("unexpected line %q", l)
	}
	if missing > 0 || dup > 0 || len(seen) > 0 {
		t.Errorf("%d of %d lines missing, %d duplicated, %d unexpected; file is %d bytes",
			missing, len(want), dup, len(seen), len(data))
	}
}
