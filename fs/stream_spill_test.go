package fs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/wal"
	"golang.org/x/sys/unix"
)

// A file written in order keeps only the bytes its stream has not stored
// yet in pages (no spill file); reads of the rest, and whatever breaks the
// sequence afterwards (an overwrite, a truncate, a hole punched, an fsync),
// read the stream's stored chunks, and every commit stores what was
// written, with an orphan sweep in between.
func TestStreamDropsStoredPages(t *testing.T) {
	mnt, st, m := mountTest(t)
	const head = 40 << 20 // written before the check; 32 MiB of it get stored

	cases := []struct {
		name  string
		after func(t *testing.T, f *os.File, want []byte) []byte // the content after it
	}{
		{"read", nil},
		{"overwrite", func(t *testing.T, f *os.File, want []byte) []byte {
			off := int64(100*pageSize - 2) // across two dropped pages
			if _, err := f.WriteAt([]byte("again"), off); err != nil {
				t.Fatal(err)
			}
			copy(want[off:], "again")
			return want
		}},
		{"truncate", func(t *testing.T, f *os.File, want []byte) []byte {
			if err := f.Truncate(20<<20 + 12345); err != nil {
				t.Fatal(err)
			}
			return want[:20<<20+12345]
		}},
		{"extend", func(t *testing.T, f *os.File, want []byte) []byte {
			if err := f.Truncate(int64(len(want)) + 3<<20); err != nil {
				t.Fatal(err)
			}
			return append(want, make([]byte, 3<<20)...)
		}},
		{"truncate-zero", func(t *testing.T, f *os.File, want []byte) []byte {
			if err := f.Truncate(0); err != nil {
				t.Fatal(err)
			}
			return want[:0]
		}},
		{"punch", func(t *testing.T, f *os.File, want []byte) []byte {
			if err := punch(f, 5<<20+3, 4<<20+5); err != nil {
				t.Fatal(err)
			}
			clear(want[5<<20+3 : 9<<20+8])
			return want
		}},
		{"fsync", func(t *testing.T, f *os.File, want []byte) []byte {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			// Durable once fsync returned: in the store itself.
			if got := storedContent(t, st, sessionOf(t, m), filepath.Base(f.Name())); got != string(want) {
				t.Fatalf("after fsync the store holds %d bytes, not the %d written", len(got), len(want))
			}
			return want
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Bytes of its own: no chunk is shared with another file.
			data := streamTestData(48 << 20)
			clear(data[7<<20 : 8<<20]) // a hole among the stored chunks
			f, buf := streamPastStored(t, m, filepath.Join(mnt, c.name), data[:head+1<<20])
			defer f.Close()
			buf.mu.RLock()
			spilled, dropped, inRAM := buf.spill != nil, buf.strm.dropped*pageSize, len(buf.mem)*pageSize
			buf.mu.RUnlock()
			if spilled || dropped < 30<<20 || inRAM > streamWindow+spillAt {
				t.Fatalf("streamed %d MiB: spill file %v, %d MiB of pages dropped, %d MiB in RAM; want no spill file, 30 MiB or more dropped",
					head>>20+1, spilled, dropped>>20, inRAM>>20)
			}
			want := bytes.Clone(data[:head+1<<20])
			checkReads(t, buf, f.Name(), want)
			if c.after != nil {
				want = c.after(t, f, want)
				checkReads(t, buf, f.Name(), want)
			}
			// Chunks the buffer still reads are not orphans to a sweep,
			// streaming or once the stream stopped (if it did).
			buf.mu.RLock()
			u, streaming := buf.strm.under, buf.strm.st != nil
			buf.mu.RUnlock()
			if u != nil && !streaming {
				<-u.Ended()
			}
			if err := st.Compact(nil); err != nil {
				t.Fatal(err)
			}
			checkReads(t, buf, f.Name(), want)
			// More in order at the end.
			tail := data[head+1<<20:]
			writeInMiB(t, f, tail, int64(len(want)))
			want = append(want, tail...)
			checkReads(t, buf, f.Name(), want)
			b0 := streamCommits.Load()
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			streamed := streamCommits.Load() - b0
			if wantStreamed := c.after == nil || c.name == "truncate-zero"; wantStreamed != (streamed == 1) {
				t.Errorf("%d streamed commits at the close, want streamed %v", streamed, wantStreamed)
			}
			if got := storedContent(t, st, sessionOf(t, m), c.name); got != string(want) {
				t.Fatalf("stored %d bytes, want the %d written", len(got), len(want))
			}
			if err := st.Compact(nil); err != nil {
				t.Fatal(err)
			}
			if got := storedContent(t, st, sessionOf(t, m), c.name); got != string(want) {
				t.Fatalf("after a sweep the store holds %d bytes, want %d", len(got), len(want))
			}
		})
	}
}

// streamPastStored creates path and writes p in order in writes of 1 MiB:
// all but its last MiB, then, once the stream has stored 30 MiB of it, the
// last MiB (the write after which the stored pages may go).
func streamPastStored(t *testing.T, m *Server, path string, p []byte) (*os.File, *fileState) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	head := int64(len(p) - 1<<20)
	writeInMiB(t, f, p[:head], 0)
	buf := bufferOf(t, m, f)
	waitStored(t, buf, 30<<20)
	writeInMiB(t, f, p[head:], head)
	return f, buf
}

// writeInMiB writes p at off in writes of 1 MiB.
func writeInMiB(t *testing.T, f *os.File, p []byte, off int64) {
	t.Helper()
	for len(p) > 0 {
		n := min(len(p), 1<<20)
		if _, err := f.WriteAt(p[:n], off); err != nil {
			t.Fatal(err)
		}
		p, off = p[n:], off+int64(n)
	}
}

// bufferOf returns the dirty buffer of open file f.
func bufferOf(t *testing.T, m *Server, f *os.File) *fileState {
	t.Helper()
	b := m.file(sessionOf(t, m), mvcc.Ino(fdIno(t, int(f.Fd()))))
	if b == nil {
		t.Fatalf("%s: no buffer", f.Name())
	}
	return b
}

// waitStored waits until b's stream has stored n bytes.
func waitStored(t *testing.T, b *fileState, n uint64) {
	t.Helper()
	b.mu.RLock()
	st := b.strm.st
	b.mu.RUnlock()
	if st == nil {
		t.Fatal("the file written in order does not stream")
	}
	for st.Stored().Size < n {
		time.Sleep(5 * time.Millisecond)
	}
}

// checkReads reads the file at path through the mount (after dropping the
// kernel's pages of it, so that padfs serves the reads) and from its
// buffer b, and compares both with want.
func checkReads(t *testing.T, b *fileState, path string, want []byte) {
	t.Helper()
	r, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := unix.Fadvise(int(r.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want)+1)
	n, _ := r.ReadAt(got, 0)
	if !bytes.Equal(got[:n], want) {
		t.Fatalf("read through the mount: %d bytes, differ from the %d written at %d", n, len(want), firstDiff(got[:n], want))
	}
	n, _ = b.readAt(context.Background(), got, 0)
	if !bytes.Equal(got[:n], want) {
		t.Fatalf("read from the buffer: %d bytes, differ from the %d written at %d", n, len(want), firstDiff(got[:n], want))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Under memory pressure (the dirty pages of all buffers past memCap) a
// file written in order spills its pages as any other, and still drops
// those its stream stored: their slots in the spill file are reused, and
// reads, an overwrite and the commit read the stored chunks.
func TestStreamSpilledDropsStoredPages(t *testing.T) {
	mnt, st, m := mountTest(t)
	m.memBytes.Add(memCap) // as if other buffers held the cap
	defer m.memBytes.Add(-memCap)
	data := streamTestData(88 << 20)
	f, err := os.Create(filepath.Join(mnt, "spilled"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	writeInMiB(t, f, data[:40<<20], 0)
	buf := bufferOf(t, m, f)
	waitStored(t, buf, 30<<20)
	writeInMiB(t, f, data[40<<20:80<<20], 40<<20)
	buf.mu.RLock()
	spilled, spillEnd, dropped := buf.spill != nil, buf.spillEnd, buf.strm.dropped*pageSize
	buf.mu.RUnlock()
	if !spilled || dropped < 30<<20 || spillEnd > 64<<20 {
		t.Fatalf("80 MiB streamed under memory pressure: spill file %v, %d MiB of it used, %d MiB of pages dropped; want a spill file, at most 64 MiB of it, 30 MiB or more dropped",
			spilled, spillEnd>>20, dropped>>20)
	}
	want := bytes.Clone(data[:80<<20])
	checkReads(t, buf, f.Name(), want)
	off := int64(200*pageSize - 3) // across two dropped pages
	if _, err := f.WriteAt([]byte("again"), off); err != nil {
		t.Fatal(err)
	}
	copy(want[off:], "again")
	writeInMiB(t, f, data[80<<20:], 80<<20)
	want = append(want, data[80<<20:]...)
	checkReads(t, buf, f.Name(), want)
	if err := st.Compact(nil); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if got := storedContent(t, st, sessionOf(t, m), "spilled"); got != string(want) {
		t.Fatalf("stored %d bytes, want the %d written", len(got), len(want))
	}
}

// sharedKV is the bbolt store behind the log, announced as one that other
// processes write too (kv.Sharer, as PostgreSQL is).
type sharedKV struct{ *wal.Store }

func (sharedKV) SharedStore() {}

// On a store other processes write, a pin keeps a chunk from this
// process's sweeps only: a streamed file keeps its pages, so that when
// another host sweeps the stream's chunks before the commit names them
// (here: every chunk deleted behind the mount's back) the commit stores
// the bytes again from them and loses nothing.
func TestStreamSharedStoreKeepsPages(t *testing.T) {
	dir := t.TempDir()
	var w *wal.Store
	st := openStoreOver(t, dir, func(l *wal.Store) kv.Store { w = l; return sharedKV{l} })
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("shared", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	m := mountAt(t, st, mnt, Options{Session: &h.ID, SpillDir: filepath.Join(dir, "spill")})
	if !m.sharedStore {
		t.Fatal("a store that announces kv.Sharer is not taken as shared")
	}
	const head = 40 << 20
	data := streamTestData(head + 1<<20)
	f, buf := streamPastStored(t, m, filepath.Join(mnt, "big"), data)
	defer f.Close()
	buf.mu.RLock()
	dropped := buf.strm.dropped
	buf.mu.RUnlock()
	if dropped != 0 {
		t.Fatalf("%d pages of a streamed file dropped on a shared store; want them kept", dropped)
	}
	// Another host's sweep: no version names the stream's chunks yet.
	deleted := 0
	if err := w.Update(func(tx kv.Txn) error {
		var keys [][]byte
		if err := tx.Scan([]byte{'C'}, []byte{'D'}, func(k, _ []byte) (bool, error) {
			keys = append(keys, bytes.Clone(k))
			return true, nil
		}); err != nil {
			return err
		}
		for _, k := range keys {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		deleted = len(keys)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if deleted == 0 {
		t.Fatal("no chunk stored before the close: the sweep proves nothing")
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close after the stream's chunks were swept elsewhere: %v", err)
	}
	if got := storedContent(t, st, h.ID, "big"); got != string(data) {
		t.Fatalf("stored %d bytes, want the %d written", len(got), len(data))
	}
}
