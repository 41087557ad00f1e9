package fs

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

func streamTestData(n int) []byte {
	data := make([]byte, n)
	rand.Read(data)
	return data
}

// A file written start to end (past streamFrom) commits through its
// stream; writes that break the sequence (an overwrite, a truncate, a
// punched hole) fall back to the pages, and every commit stores what was
// written.
func TestStreamedWrites(t *testing.T) {
	mnt, st, m := mountTest(t)
	data := streamTestData(24<<20 + 777)

	before := streamCommits.Load()
	if err := os.WriteFile(filepath.Join(mnt, "seq"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got := streamCommits.Load() - before; got != 1 {
		t.Errorf("a 24 MiB file written in order: %d streamed commits, want 1", got)
	}
	if got := storedContent(t, st, sessionOf(t, m), "seq"); got != string(data) {
		t.Fatalf("streamed file stored %d bytes, not what was written", len(got))
	}

	cases := []struct {
		name  string
		after func(f *os.File) error // applied to the file after 12 MiB
		want  func([]byte) []byte
	}{
		{"overwrite", func(f *os.File) error { _, err := f.WriteAt([]byte("again"), 100); return err },
			func(b []byte) []byte { copy(b[100:], "again"); return b }},
		{"truncate", func(f *os.File) error { return f.Truncate(5 << 20) },
			func(b []byte) []byte { return b[:5<<20] }},
		{"truncate-zero", func(f *os.File) error { return f.Truncate(0) },
			func([]byte) []byte { return nil }},
		{"punch", func(f *os.File) error { return punch(f, 1<<20, 2<<20) },
			func(b []byte) []byte { clear(b[1<<20 : 3<<20]); return b }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := os.Create(filepath.Join(mnt, c.name))
			if err != nil {
				t.Fatal(err)
			}
			want := bytes.Clone(data[:12<<20])
			if _, err := f.Write(want); err != nil {
				t.Fatal(err)
			}
			if err := c.after(f); err != nil {
				t.Fatal(err)
			}
			want = c.want(want)
			// More in order at the new end (after a truncate: the end).
			fi, err := f.Stat()
			if err != nil {
				t.Fatal(err)
			}
			tail := data[12<<20 : 20<<20]
			if _, err := f.WriteAt(tail, fi.Size()); err != nil {
				t.Fatal(err)
			}
			want = append(want[:fi.Size():fi.Size()], tail...)
			b0 := streamCommits.Load()
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			streamed := streamCommits.Load() - b0
			if c.name == "truncate-zero" && streamed != 1 {
				t.Errorf("written in order again after a truncate to 0: %d streamed commits, want 1", streamed)
			} else if c.name != "truncate-zero" && streamed != 0 {
				t.Errorf("%d streamed commits after the sequence broke, want 0", streamed)
			}
			if got := storedContent(t, st, sessionOf(t, m), c.name); got != string(want) {
				t.Fatalf("stored %d bytes, want %d (the bytes written)", len(got), len(want))
			}
		})
	}
}

// punch is fallocate(PUNCH_HOLE|KEEP_SIZE).
func punch(f *os.File, off, n int64) error {
	return unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
}
