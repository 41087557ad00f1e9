package search

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDamagedTrigramSegments: a trigram segment damaged in its postings
// (found by the first query that reads them), cut short under its final
// name, or a temp file that a worker killed amid writing one leaves,
// never crash the process nor change grep's answer. Damage drops the
// index for a rebuild, with a log line; the temp file is only removed,
// the index kept.
func TestDamagedTrigramSegments(t *testing.T) {
	files, want := damageCorpus()
	for _, c := range []struct {
		name    string
		rebuilt bool
		logged  string // what the log says of the damage
		damage  func(t *testing.T, dir string, segs []string)
	}{
		{"postings", true, "postings of key", func(t *testing.T, _ string, segs []string) {
			b, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			// The middle of the postings section (its offset and length
			// are at 36 and 44 in the header).
			off, n := binary.LittleEndian.Uint64(b[36:]), binary.LittleEndian.Uint64(b[44:])
			flipBytes(t, segs[0], int(off+n/2), 4)
		}},
		{"half-written", true, "sections do not fit", func(t *testing.T, _ string, segs []string) {
			b, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(segs[0], b[:len(b)/2], 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"temp-file", false, "", func(t *testing.T, dir string, segs []string) {
			b, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ".tmp-1234"), b[:len(b)/2], 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, data := openStore(t)
			sid := loadSession(t, st, files)
			open, logs := loggedOpener(t, data, st)
			ix := open()
			waitCovered(t, ix, st, sid)
			if err := ix.Close(); err != nil {
				t.Fatal(err)
			}
			dir := filepath.Join(data, "index", sid.String(), "triseg")
			segs, _ := filepath.Glob(filepath.Join(dir, "*.tri"))
			if len(segs) == 0 {
				t.Fatalf("no trigram segment in %s", dir)
			}
			c.damage(t, dir, segs)
			ix = open()
			defer ix.Close()
			for range 3 {
				if out, code, _ := padGrep(t, ix, sid, []string{"-rn", "needle"}); out != want || code != 0 {
					t.Fatalf("damaged segment: exit %d, output differs:\n%s", code, diffLines(out, want))
				}
			}
			putFile(t, st, sid, "new.txt", []byte("a new needle\n"))
			want := want + "new.txt:1:a new needle\n"
			waitCovered(t, ix, st, sid)
			out, code, stats := padGrep(t, ix, sid, []string{"-rn", "needle"})
			if out != want || code != 0 || stats.Scanned {
				t.Fatalf("after the damage: exit %d %+v, output differs:\n%s", code, stats, diffLines(out, want))
			}
			if got := strings.Contains(logs.String(), "damaged"); got != c.rebuilt {
				t.Errorf("logged damage %v, want %v:\n%s", got, c.rebuilt, logs.String())
			}
			if !strings.Contains(logs.String(), c.logged) {
				t.Errorf("the log does not say %q:\n%s", c.logged, logs.String())
			}
			if _, err := os.Stat(filepath.Join(dir, ".tmp-1234")); err == nil {
				t.Error("the temp file is still there")
			}
		})
	}
}
