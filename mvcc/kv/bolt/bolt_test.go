package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/kvtest"
)

func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "padfs.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Store { return openTemp(t) })
}

func put(t *testing.T, s kv.Store, k, v string) {
	t.Helper()
	if err := s.Update(func(tx kv.Txn) error { return tx.Put([]byte(k), []byte(v)) }); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, s kv.Store, k string) string {
	t.Helper()
	var v string
	if err := s.View(func(r kv.Reader) error {
		b, err := r.Get([]byte(k))
		v = string(b)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "padfs.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "k", "v")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := get(t, s, "k"); got != "v" {
		t.Fatalf("after reopen: %q", got)
	}
}

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "padfs.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// flock conflicts between two opens even within one process: the
	// second Open gives up with ErrLocked after its Timeout, never blocks.
	_, err = Open(path, Options{Timeout: 200 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: %v; want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "another padfs process") {
		t.Errorf("error %q should name the file and say who holds it", err)
	}
}

func TestCorruptFile(t *testing.T) {
	dir := t.TempDir()
	valid := filepath.Join(dir, "valid.db")
	s, err := Open(valid, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		put(t, s, string(rune('a'+i%26))+strings.Repeat("x", i), strings.Repeat("v", 100))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(valid)
	if err != nil {
		t.Fatal(err)
	}

	cases := map[string][]byte{
		"text":      []byte("this is not a database\n"),
		"short":     good[:100],
		"one-page":  good[:4096],
		"zero-meta": append(make([]byte, 8192), good[8192:]...),
		"garbage":   bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 8192),
	}
	// Meta pages intact, every other page trashed: bbolt's own checks pass
	// and it reads garbage where it expects the freelist and the tree.
	trashed := bytes.Clone(good)
	for i := 8192; i < len(trashed); i++ {
		trashed[i] = byte(i*31) ^ 0x5a
	}
	cases["trashed-pages"] = trashed

	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".db")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, Options{})
			if err == nil {
				// Opened anyway: reads must fail cleanly, not panic.
				defer s.Close()
				err = s.View(func(r kv.Reader) error {
					return r.Scan(nil, nil, func(k, v []byte) (bool, error) { return true, nil })
				})
				if err == nil {
					t.Skip("bbolt found nothing wrong with this file")
				}
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
			t.Logf("%v", err)
		})
	}
	// A corrupt file must not stay locked by the failed attempt.
	path := filepath.Join(dir, "trashed-pages.db")
	if err := os.WriteFile(path, good, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{Timeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("reopening a repaired file: %v", err)
	}
	s.Close()
}

func TestCallerPanicPassesThrough(t *testing.T) {
	s := openTemp(t)
	defer s.Close()
	put(t, s, "a", "1")
	defer func() {
		if p := recover(); p != "mine" {
			t.Fatalf("recovered %v; want the caller's own panic", p)
		}
		// The store still works after the panic unwound its transaction.
		put(t, s, "b", "2")
	}()
	_ = s.View(func(r kv.Reader) error {
		return r.Scan(nil, nil, func(k, v []byte) (bool, error) { panic("mine") })
	})
}

func TestCompact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "padfs.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	marker := "SECRET-MARKER-" + strings.Repeat("q", 64)
	for i := range 500 {
		put(t, s, "keep/"+string(rune('a'+i%26))+strings.Repeat("k", i%40), strings.Repeat("v", 200))
	}
	put(t, s, "secret", marker)
	if err := s.Update(func(tx kv.Txn) error { return tx.Delete([]byte("secret")) }); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if !bytes.Contains(raw, []byte(marker)) {
		t.Fatal("precondition: the deleted value should still be in a freed page")
	}

	var calls, last, total int64
	err = s.Compact(func(done, tot int64) { calls++; last, total = done, tot })
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 || last != total || total != 500 {
		t.Errorf("progress: %d calls, last %d/%d", calls, last, total)
	}
	raw, _ = os.ReadFile(path)
	if bytes.Contains(raw, []byte(marker)) {
		t.Error("deleted value still in the file after Compact")
	}
	if _, err := os.Stat(compactPath(path)); !os.IsNotExist(err) {
		t.Errorf("temporary copy left behind: %v", err)
	}
	// Still the same store, still locked, still writable.
	if got := get(t, s, "keep/a"); got != strings.Repeat("v", 200) {
		t.Errorf("keep/a = %q after Compact", got)
	}
	put(t, s, "after", "1")
	if _, err := Open(path, Options{Timeout: 100 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Errorf("Open during use after Compact: %v; want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "after"); got != "1" {
		t.Errorf("after reopen: %q", got)
	}
}

// TestCompactLetsViewsRun: a View runs to its end while Compact copies
// (the old Compact held every transaction off for the whole copy: this
// test hung), and an Update that arrives during the copy waits for it and
// then lands in the new file.
func TestCompactLetsViewsRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "padfs.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 300 {
		put(t, s, fmt.Sprintf("k%03d", i), strings.Repeat("v", 100))
	}
	var viewed string
	updated := make(chan error, 1)
	first := true
	err = s.Compact(func(done, total int64) {
		if !first {
			return
		}
		first = false
		ch := make(chan error, 1)
		go func() {
			ch <- s.View(func(r kv.Reader) error {
				v, err := r.Get([]byte("k007"))
				viewed = string(v)
				return err
			})
		}()
		if err := <-ch; err != nil {
			t.Errorf("View during the copy: %v", err)
		}
		go func() { updated <- s.Update(func(tx kv.Txn) error { return tx.Put([]byte("during"), []byte("copy")) }) }()
	})
	if err != nil {
		t.Fatal(err)
	}
	if viewed != strings.Repeat("v", 100) {
		t.Errorf("View during the copy read %q", viewed)
	}
	if err := <-updated; err != nil {
		t.Fatal(err)
	}
	if got := get(t, s, "during"); got != "copy" {
		t.Errorf("the Update made during the copy reads %q after it", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if got := get(t, s2, "during"); got != "copy" {
		t.Errorf("after a reopen, the Update made during the copy reads %q", got)
	}
}

// mappedBytes is the size of this process's memory maps of path, from
// /proc/self/maps.
func mappedBytes(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skipf("no /proc/self/maps: %v", err)
	}
	var n int64
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) < 6 || f[len(f)-1] != path {
			continue
		}
		var lo, hi int64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err != nil {
			t.Fatalf("maps line %q: %v", l, err)
		}
		n += hi - lo
	}
	return n
}

// TestMapCoversGrowth: the default map is large enough that a store
// growing by gigabytes (a redaction's new chunks beside the old ones) is
// never remapped in a fold, which stalls every reader; a compaction's new
// file gets the same map. (With the old 1 GiB default it failed.)
func TestMapCoversGrowth(t *testing.T) {
	if strconv.IntSize != 64 {
		t.Skip("32-bit: bbolt's default map")
	}
	path := filepath.Join(t.TempDir(), "padfs.db")
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	put(t, s, "k", "v")
	if got := mappedBytes(t, path); got < DefaultMmapSize {
		t.Fatalf("padfs.db mapped: %d bytes, want at least %d", got, int64(DefaultMmapSize))
	}
	if err := s.Compact(nil); err != nil {
		t.Fatal(err)
	}
	if got := mappedBytes(t, path); got < DefaultMmapSize {
		t.Fatalf("padfs.db mapped after compact: %d bytes, want at least %d", got, int64(DefaultMmapSize))
	}
	if v := get(t, s, "k"); v != "v" {
		t.Fatalf("after compact: k = %q", v)
	}
}
