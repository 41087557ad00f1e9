package timetravel_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/timetravel"
)

// A time past what an HLC counts (int64 nanoseconds) is an error naming it
// and the range, not some other instant (it used to be taken as now).
func TestResolveOutOfRange(t *testing.T) {
	hs := newHistory(t)
	for _, name := range []string{"2262-04-12T00:00:00Z", "1969-12-31T23:59:59Z"} {
		at, err := timetravel.Resolve(hs.st, hs.h.ID, name)
		if !errors.Is(err, mvcc.ErrHLCRange) || !strings.Contains(err.Error(), name) ||
			!strings.Contains(err.Error(), mvcc.MaxHLC.String()) {
			t.Errorf("Resolve(%q) = %v, %v; want a range error naming both", name, at, err)
		}
	}
	if at, err := timetravel.Resolve(hs.st, hs.h.ID, mvcc.MaxHLC.String()); err != nil || at != mvcc.MaxHLC {
		t.Errorf("Resolve(MaxHLC) = %v, %v", at, err)
	}
}

// FuzzResolve: any .asof/ name resolves or fails with ErrNotFound or a
// range error; a resolved time is an HLC in range. Never a panic.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"2026-11-29T14:03:00Z", "2262-04-12T00:00:00Z", "cp", "latest", "", "\xff", "2026-11-29T14:03:00.123456789+05:30"} {
		f.Add(s)
	}
	st, err := storeopen.OpenDir(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("fuzz", 0, 0)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := st.CreateCheckpoint(h.ID, "cp"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, name string) {
		at, err := timetravel.Resolve(st, h.ID, name)
		switch {
		case err == nil:
			if at > mvcc.MaxHLC {
				t.Fatalf("Resolve(%q) = %d, past MaxHLC", name, at)
			}
		case errors.Is(err, mvcc.ErrNotFound), errors.Is(err, mvcc.ErrHLCRange):
		default:
			t.Fatalf("Resolve(%q): unexpected error %v", name, err)
		}
	})
}
