package search

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestRebuildProgressMovesWithWork: a rebuild's progress is documents
// committed to the index, reported in order through several values up to
// the total; in process and through the index worker. (It used to count
// documents handed over, which ran ahead of the work.)
func TestRebuildProgressMovesWithWork(t *testing.T) {
	for _, c := range []struct {
		name string
		opts Options
	}{{"in process", Options{}}, {"worker", Options{Background: true}}} {
		t.Run(c.name, func(t *testing.T) {
			st, data := openStore(t)
			files := corpus(t)
			for i := 0; i < 300; i++ {
				files[fmt.Sprintf("gen/%03d.txt", i)] = []byte(strings.Repeat(fmt.Sprintf("line %d of generated file %d\n", i*7, i), 80))
			}
			sid := loadSession(t, st, files)
			ix, err := OpenWith(data, st, c.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer ix.Close()
			var mu sync.Mutex
			var seen []int64
			var totals []int64
			err = ix.Rebuild(context.Background(), sid, func(done, total int64) {
				mu.Lock()
				defer mu.Unlock()
				// What was committed when the callback ran: never less
				// than what it reports.
				if got := int64(ix.be.stats().Indexed); c.opts == (Options{}) && got < done && done < total {
					t.Errorf("reported %d documents with %d committed", done, got)
				}
				seen = append(seen, done)
				totals = append(totals, total)
			})
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			n := int64(len(files))
			if len(seen) < 5 || seen[0] != 0 || seen[len(seen)-1] != n {
				t.Fatalf("progress over %d files: %v", n, seen)
			}
			for i := range seen {
				if totals[i] != n || i > 0 && seen[i] <= seen[i-1] {
					t.Fatalf("progress over %d files not increasing: %v (totals %v)", n, seen, totals)
				}
			}
			t.Logf("%d files: %v", n, seen)
		})
	}
}
