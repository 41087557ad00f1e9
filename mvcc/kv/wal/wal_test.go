package wal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/kvtest"
)

// testLog collects what the store logs, for the test's output and checks.
type testLog struct {
	t   testing.TB
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Logf("%s", bytes.TrimSpace(p))
	return l.buf.Write(p)
}

func (l *testLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// openDir opens wal-over-bolt in dir: dir/padfs.db and dir/wal/.
func openDir(dir string, opts Options) (*Store, error) {
	b, err := bolt.Open(filepath.Join(dir, "padfs.db"), bolt.Options{})
	if err != nil {
		return nil, err
	}
	s, err := Open(filepath.Join(dir, "wal"), b, opts)
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	return s, nil
}

// openBase opens dir/padfs.db, for a test that wraps the base of the
// WAL it opens over it.
func openBase(t testing.TB, dir string) kv.Store {
	t.Helper()
	b, err := bolt.Open(filepath.Join(dir, "padfs.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustOpen(t testing.TB, dir string, opts Options) (*Store, *testLog) {
	t.Helper()
	log := &testLog{t: t}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(log, nil))
	}
	s, err := openDir(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	return s, log
}

// crash abandons s the way kill -9 would: nothing flushed, nothing synced,
// locks released.
func (s *Store) crash() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	s.closed = true
	g := s.seg
	s.mu.Unlock()
	if g != nil {
		g.abandon()
	}
	_ = s.base.Close()
	_ = s.lock.Close()
}

func key(i int) []byte { return fmt.Appendf(nil, "key/%08d", i) }

func value(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "v%d.", i), 8) }

func putN(t testing.TB, s kv.Store, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := s.Update(func(tx kv.Txn) error { return tx.Put(key(i), value(i)) }); err != nil {
			t.Fatalf("Update %d: %v", i, err)
		}
	}
}

// checkN fails unless keys [0, n) hold their values and no other key/ exists.
func checkN(t testing.TB, s kv.Store, n int) {
	t.Helper()
	i := 0
	err := s.View(func(r kv.Reader) error {
		return r.Scan([]byte("key/"), kv.PrefixEnd([]byte("key/")), func(k, v []byte) (bool, error) {
			if !bytes.Equal(k, key(i)) || !bytes.Equal(v, value(i)) {
				return false, fmt.Errorf("entry %d is %q=%q; want %q", i, k, v, key(i))
			}
			i++
			return true, nil
		})
	})
	if err != nil || i != n {
		t.Fatalf("found %d keys, want %d: %v", i, n, err)
	}
}

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "wal", "*"+segmentExt))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConformance(t *testing.T) {
	open := func(opts Options) func(t *testing.T) kv.Store {
		return func(t *testing.T) kv.Store {
			s, _ := mustOpen(t, t.TempDir(), opts)
			return s
		}
	}
	t.Run("default", func(t *testing.T) { kvtest.Run(t, open(Options{})) })
	// Flushing all the time puts keys in every layer at once.
	t.Run("eager-flush", func(t *testing.T) {
		kvtest.Run(t, open(Options{FlushInterval: time.Millisecond, MemtableSize: 4 << 10}))
	})
}

func TestReopen(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	putN(t, s, 0, 100)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := segmentFiles(t, dir); len(segs) != 0 {
		t.Errorf("Close left segments behind: %v", segs)
	}
	s, _ = mustOpen(t, dir, Options{})
	defer s.Close()
	checkN(t, s, 100)
}

func TestLocked(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{})
	defer s.Close()
	b, err := bolt.Open(filepath.Join(t.TempDir(), "other.db"), bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = Open(filepath.Join(dir, "wal"), b, Options{})
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second Open of one WAL dir: %v; want ErrLocked naming the dir", err)
	}
}

func TestCrashWithoutClose(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	putN(t, s, 0, 500)
	s.crash()
	s, log := mustOpen(t, dir, Options{})
	defer s.Close()
	checkN(t, s, 500)
	if !strings.Contains(log.String(), "records=500") {
		t.Errorf("recovery should log the 500 records: %s", log)
	}
	if segs := segmentFiles(t, dir); len(segs) != 0 {
		t.Errorf("replayed segments left behind: %v", segs)
	}
}

func TestTornTail(t *testing.T) {
	w := newTree()
	w.Set(entry{key: key(99), val: value(99)})
	rec, err := encodeRecord(w)
	if err != nil {
		t.Fatal(err)
	}
	tails := map[string][]byte{
		"half-record": rec[:len(rec)/2],
		"header-only": rec[:headerSize],
		"bad-crc":     append(append([]byte(nil), rec[:len(rec)-1]...), rec[len(rec)-1]^1),
		"zeros":       make([]byte, 4096),
		"garbage":     []byte("\x17\x00\x00\x00garbage that is no record"),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
			putN(t, s, 0, 10)
			s.crash()
			segs := segmentFiles(t, dir)
			if len(segs) != 1 {
				t.Fatalf("segments: %v", segs)
			}
			f, err := os.OpenFile(segs[0], os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tail); err != nil {
				t.Fatal(err)
			}
			f.Close()

			s, log := mustOpen(t, dir, Options{})
			defer s.Close()
			checkN(t, s, 10)
			if !strings.Contains(log.String(), "torn") {
				t.Errorf("dropping the tail should be logged: %s", log)
			}
		})
	}
}

func TestCorruptOlderSegment(t *testing.T) {
	dir := t.TempDir()
	walDir := filepath.Join(dir, "wal")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := func(i int) []byte {
		w := newTree()
		w.Set(entry{key: key(i), val: value(i)})
		r, err := encodeRecord(w)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	older := slicesConcat(rec(0), []byte("not a record at all"), rec(1))
	if err := os.WriteFile(segmentPath(walDir, 1), older, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segmentPath(walDir, 2), rec(2), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := openDir(dir, Options{})
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), segmentPath(walDir, 1)) {
		t.Fatalf("Open: %v; want ErrCorrupt naming the older segment", err)
	}
	t.Log(err)
	// Nothing of the replay reached the base.
	b := openBase(t, dir)
	defer b.Close()
	checkN(t, b, 0)
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestFlushNeverHidesKeys(t *testing.T) {
	s, _ := mustOpen(t, t.TempDir(), Options{FlushInterval: time.Millisecond, MemtableSize: 8 << 10})
	defer s.Close()
	const n = 2000
	var committed atomic.Int64
	committed.Store(-1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writer
		defer wg.Done()
		defer close(done)
		for i := range n {
			if err := s.Update(func(tx kv.Txn) error { return tx.Put(key(i), value(i)) }); err != nil {
				t.Errorf("Update: %v", err)
				return
			}
			committed.Store(int64(i))
		}
	}()
	wg.Add(1)
	go func() { // explicit flushes on top of the 1ms ticker
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := s.Flush(); err != nil {
				t.Errorf("Flush: %v", err)
				return
			}
		}
	}()
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			for {
				select {
				case <-done:
					return
				default:
				}
				c := int(committed.Load())
				if c < 0 {
					continue
				}
				err := s.View(func(rd kv.Reader) error {
					for _, i := range []int{c, rng.IntN(c + 1)} {
						v, err := rd.Get(key(i))
						if err != nil {
							return err
						}
						if !bytes.Equal(v, value(i)) {
							return fmt.Errorf("committed key %d invisible (got %q)", i, v)
						}
					}
					count := 0
					err := rd.Scan([]byte("key/"), nil, func(k, v []byte) (bool, error) {
						count++
						return true, nil
					})
					if err == nil && count < c+1 {
						err = fmt.Errorf("scan found %d keys; %d were committed", count, c+1)
					}
					return err
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	checkN(t, s, n)
}

func TestCompactRemovesDeleted(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	defer s.Close()
	marker := []byte("SECRET-MARKER-7f3a9c-" + strings.Repeat("s", 100))
	marker2 := []byte("OTHER-SECRET-51c2e0-" + strings.Repeat("t", 100))
	putN(t, s, 0, 300)
	if err := s.Update(func(tx kv.Txn) error { return tx.Put([]byte("secret"), marker) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// secret2 never reaches the base: only the log and memtable hold it.
	for _, w := range []func(kv.Txn) error{
		func(tx kv.Txn) error { return tx.Put([]byte("secret2"), marker2) },
		func(tx kv.Txn) error { return tx.Delete([]byte("secret")) },
		func(tx kv.Txn) error { return tx.Delete([]byte("secret2")) },
	} {
		if err := s.Update(w); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Contains(readAll(t, dir), marker2) {
		t.Fatal("precondition: secret2 should be in the log")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readAll(t, dir), marker) {
		t.Fatal("precondition: the deleted value should still be in a freed page of the base")
	}

	var last, total int64
	if err := s.Compact(func(d, tot int64) { last, total = d, tot }); err != nil {
		t.Fatal(err)
	}
	if total != 300 || last != total {
		t.Errorf("progress ended at %d/%d; want 300/300", last, total)
	}
	raw := readAll(t, dir)
	for _, m := range [][]byte{marker, marker2} {
		if bytes.Contains(raw, m) {
			t.Errorf("%.20s... still on disk after Compact", m)
		}
	}
	checkN(t, s, 300)
	putN(t, s, 300, 310)
	checkN(t, s, 310)
}

// readAll returns the bytes of every file under dir.
func readAll(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		all = append(all, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func TestFailedWriteFailsUpdate(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
	putN(t, s, 0, 5)
	// Swap the segment's descriptor for a read-only one: the next write
	// fails, and so does cutting the file back.
	s.writeMu.Lock()
	ro, err := os.Open(s.seg.path)
	if err != nil {
		t.Fatal(err)
	}
	s.seg.f.Close()
	s.seg.f = ro
	s.writeMu.Unlock()

	err = s.Update(func(tx kv.Txn) error {
		if err := tx.Put(key(0), []byte("changed")); err != nil {
			return err
		}
		return tx.Put(key(5), value(5))
	})
	if err == nil {
		t.Fatal("Update succeeded though its record could not be written")
	}
	checkN(t, s, 5) // nothing of the failed Update is visible
	if err := s.Update(func(tx kv.Txn) error { return tx.Put(key(5), value(5)) }); err == nil {
		t.Error("a log that could not be cut back took another record")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close should still flush the committed writes: %v", err)
	}
	s, _ = mustOpen(t, dir, Options{})
	defer s.Close()
	checkN(t, s, 5)
}

// flakyBase fails Updates on demand. It has no Compact method.
type flakyBase struct {
	kv.Store
	fail atomic.Bool
}

var errDisk = errors.New("disk on fire")

func (f *flakyBase) Update(fn func(kv.Txn) error) error {
	if f.fail.Load() {
		return errDisk
	}
	return f.Store.Update(fn)
}

func TestBaseFailure(t *testing.T) {
	dir := t.TempDir()
	b := openBase(t, dir)
	base := &flakyBase{Store: b}
	log := &testLog{t: t}
	s, err := Open(filepath.Join(dir, "wal"), base, Options{
		FlushInterval: time.Millisecond,
		MemtableSize:  4 << 10,
		Logger:        slog.New(slog.NewTextHandler(log, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	base.fail.Store(true)
	// Updates go on into the log until the buffer is full and a flush
	// has failed, then fail. Until the flusher first runs, nothing is
	// frozen and the active memtable takes every write (as during a
	// compaction), so on a loaded machine the loop pauses now and then
	// to let it run (bounded: a flusher that never runs fails the test).
	n := 0
	deadline := time.Now().Add(30 * time.Second)
	for ; time.Now().Before(deadline); n++ {
		err = s.Update(func(tx kv.Txn) error { return tx.Put(key(n), value(n)) })
		if err != nil {
			break
		}
		if n%50 == 49 {
			time.Sleep(time.Millisecond)
		}
	}
	if !errors.Is(err, errDisk) {
		t.Fatalf("after %d Updates in 30 s: %v; want the base's error once the buffer is full", n, err)
	}
	checkN(t, s, n) // still readable from the memtables
	if err := s.Compact(nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Compact over a base without it: %v", err)
	}
	base.fail.Store(false)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	putN(t, s, n, n+10)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(log.String(), "disk on fire") {
		t.Errorf("the failing flush should be logged: %s", log)
	}
	s, _ = mustOpen(t, dir, Options{})
	defer s.Close()
	checkN(t, s, n+10)
}

func TestPutLimits(t *testing.T) {
	s, _ := mustOpen(t, t.TempDir(), Options{MaxKeySize: 8, MaxValueSize: 16})
	defer s.Close()
	for _, kvp := range [][2]string{{"123456789", "v"}, {"k", strings.Repeat("v", 17)}} {
		if err := s.Update(func(tx kv.Txn) error { return tx.Put([]byte(kvp[0]), []byte(kvp[1])) }); err == nil {
			t.Errorf("Put(%d-byte key, %d-byte value) beyond the limits succeeded", len(kvp[0]), len(kvp[1]))
		}
	}
}

// TestMidLogDamage flips one byte inside a whole record of the newest
// segment, with acknowledged records after it: that is damage, not a torn
// tail, and Open must refuse rather than drop every later commit.
func TestMidLogDamage(t *testing.T) {
	for _, where := range []string{"payload", "length", "crc"} {
		t.Run(where, func(t *testing.T) {
			dir := t.TempDir()
			s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour})
			putN(t, s, 0, 10)
			s.crash()
			segs := segmentFiles(t, dir)
			if len(segs) != 1 {
				t.Fatalf("segments: %v", segs)
			}
			data, err := os.ReadFile(segs[0])
			if err != nil {
				t.Fatal(err)
			}
			// Records are equal-sized here: damage the fourth one.
			recSize := len(data) / 10
			off := 3 * recSize
			switch where {
			case "payload":
				data[off+headerSize+5] ^= 0x40
			case "length":
				data[off] ^= 0x01
			case "crc":
				data[off+5] ^= 0x80
			}
			if err := os.WriteFile(segs[0], data, 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = openDir(dir, Options{})
			var ce *CorruptError
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) {
				t.Fatalf("Open: %v; want a CorruptError", err)
			}
			if ce.Path != segs[0] || ce.Offset != int64(off) {
				t.Errorf("error names %s at %d; want %s at %d", ce.Path, ce.Offset, segs[0], off)
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, segs[0]) ||
				!strings.Contains(msg, fmt.Sprintf("offset %d", off)) {
				t.Errorf("want one line naming the file and offset: %q", msg)
			}
			t.Log(err)
			// The segment is kept as it was, for fsck.
			if got, _ := os.ReadFile(segs[0]); !bytes.Equal(got, data) {
				t.Error("Open changed the damaged segment")
			}

			// Salvage keeps the intact prefix and quarantines the rest.
			q := filepath.Join(dir, "quarantine")
			lost, err := Salvage(filepath.Join(dir, "wal"), q)
			if err != nil {
				t.Fatal(err)
			}
			if len(lost) != 1 || lost[0].Offset != int64(off) || lost[0].Records != 6 {
				t.Fatalf("Salvage lost %+v; want one tail at %d with 6 intact records after the damage", lost, off)
			}
			if ops := lost[0].Ops; len(ops) != 6 || !bytes.Equal(ops[0].Key, key(4)) || !bytes.Equal(ops[0].Value, value(4)) {
				t.Errorf("lost writes %+v; want key/00000004...", ops)
			}
			if qd, err := os.ReadFile(lost[0].Quarantine); err != nil || !bytes.Equal(qd, data[off:]) {
				t.Errorf("quarantined tail %s: %v", lost[0].Quarantine, err)
			}
			s, _ = mustOpen(t, dir, Options{})
			defer s.Close()
			checkN(t, s, 3)
		})
	}
}

// TestSalvageOlderSegment: damage in an older segment cuts it there and
// moves every newer segment to quarantine whole; Open then works.
func TestSalvageOlderSegment(t *testing.T) {
	dir := t.TempDir()
	walDir := filepath.Join(dir, "wal")
	if err := os.MkdirAll(walDir, 0o700); err != nil {
		t.Fatal(err)
	}
	rec := func(i int) []byte {
		w := newTree()
		w.Set(entry{key: key(i), val: value(i)})
		r, err := encodeRecord(w)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	bad := rec(1)
	bad[headerSize+2] ^= 1
	if err := os.WriteFile(segmentPath(walDir, 1), slicesConcat(rec(0), bad, rec(2)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(segmentPath(walDir, 2), slicesConcat(rec(3), rec(4)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openDir(dir, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v", err)
	}
	lost, err := Salvage(walDir, filepath.Join(dir, "quarantine"))
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 2 || lost[0].Records != 1 || lost[1].Offset != 0 || lost[1].Records != 2 || lost[1].Reason != "" {
		t.Fatalf("lost %+v", lost)
	}
	if segs := segmentFiles(t, dir); len(segs) != 1 {
		t.Errorf("segments after salvage: %v", segs)
	}
	s, _ := mustOpen(t, dir, Options{})
	defer s.Close()
	checkN(t, s, 1)
	// Nothing left to salvage.
	if lost, err := Salvage(walDir, filepath.Join(dir, "quarantine")); err == nil || len(lost) != 0 {
		t.Errorf("second Salvage beside an open store: %+v, %v (want the lock error)", lost, err)
	}
}

// TestWriterReadsActiveUnderViews: Updates read the active memtable as it
// is (no copy) while Views take snapshots of it. Each Update reads a
// counter and writes it back incremented to two keys; a View must see the
// pair equal, and the same value on a second read of its snapshot, while
// the Updates go on; and no increment may be lost.
func TestWriterReadsActiveUnderViews(t *testing.T) {
	s, _ := mustOpen(t, t.TempDir(), Options{FlushInterval: time.Hour, MemtableSize: 64 << 20})
	defer s.Close()
	const n = 3000
	get := func(r kv.Reader, k string) (int, error) {
		v, err := r.Get([]byte(k))
		if err != nil || v == nil {
			return 0, err
		}
		var i int
		_, err = fmt.Sscan(string(v), &i)
		return i, err
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				err := s.View(func(r kv.Reader) error {
					a, err := get(r, "a")
					if err != nil {
						return err
					}
					for _, k := range []string{"b", "a", "b"} {
						if v, err := get(r, k); err != nil {
							return err
						} else if v != a {
							return fmt.Errorf("snapshot changed under a View: a=%d, then %s=%d", a, k, v)
						}
					}
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range n {
		err := s.Update(func(tx kv.Txn) error {
			c, err := get(tx, "a")
			if err != nil {
				return err
			}
			if c != i {
				return fmt.Errorf("Update %d read counter %d", i, c)
			}
			v := fmt.Appendf(nil, "%d", c+1)
			if err := tx.Put([]byte("a"), v); err != nil {
				return err
			}
			// Filler keys grow the tree past one node, so that applies
			// split and copy nodes a View may hold.
			if err := tx.Put(key(i), value(i)); err != nil {
				return err
			}
			return tx.Put([]byte("b"), v)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	wg.Wait()
	if err := s.View(func(r kv.Reader) error {
		if c, err := get(r, "b"); err != nil || c != n {
			return fmt.Errorf("counter %d after %d Updates (%v)", c, n, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
