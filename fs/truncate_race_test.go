package fs

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// A truncate by path racing an open must not be undone by the writes of
// that open: truncate(f, 0) || open(f); then write "y" at 0 and close
// leaves exactly "y", whichever of truncate and open came first.
func TestTruncateRacesOpen(t *testing.T) {
	mnt, st, m := mountTest(t)
	p := filepath.Join(mnt, "f")
	big := bytes.Repeat([]byte("x"), 100<<10)
	for i := 0; i < 60; i++ {
		if err := os.WriteFile(p, big, 0o644); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var fh *os.File
		var terr, oerr error
		wg.Add(2)
		go func() { defer wg.Done(); terr = os.Truncate(p, 0) }()
		go func() { defer wg.Done(); fh, oerr = os.OpenFile(p, os.O_WRONLY, 0) }()
		wg.Wait()
		if terr != nil || oerr != nil {
			t.Fatal(terr, oerr)
		}
		if _, err := fh.WriteAt([]byte("y"), 0); err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(p); err != nil || string(got) != "y" {
			in, _ := st.Walk(sessionOf(t, m), "f", mvcc.Latest)
			t.Fatalf("store size %d; round %d: after truncate || open, write, close: %d bytes (%v), want \"y\"", in.Size, i, len(got), err)
		}
	}
}
