// Package kvtest is the conformance suite every kv.Store driver must pass:
//
//	func TestConformance(t *testing.T) {
//		kvtest.Run(t, func(t *testing.T) kv.Store { ... a new, empty store ... })
//	}
//
// Run closes each store it opens; open should not.
package kvtest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

// Run runs every conformance test, each against a fresh store from open.
func Run(t *testing.T, open func(t *testing.T) kv.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, kv.Store)
	}{
		{"GetPutDelete", testGetPutDelete},
		{"EmptyValue", testEmptyValue},
		{"BadKey", testBadKey},
		{"CallerBuffers", testCallerBuffers},
		{"ScanOrder", testScanOrder},
		{"ScanBounds", testScanBounds},
		{"ScanStop", testScanStop},
		{"ScanPrefix", testScanPrefix},
		{"First", testFirst},
		{"ReadYourWrites", testReadYourWrites},
		{"Rollback", testRollback},
		{"WriteDuringScan", testWriteDuringScan},
		{"SnapshotIsolation", testSnapshotIsolation},
		{"Concurrency", testConcurrency},
		{"BigTxn", testBigTxn},
		{"LargeValue", testLargeValue},
		{"Sync", testSync},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil && !errors.Is(err, kv.ErrClosed) {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
	t.Run("PrefixEnd", testPrefixEnd)
}

// --- helpers ---

func put(t *testing.T, s kv.Store, kvs ...string) {
	t.Helper()
	if len(kvs)%2 != 0 {
		t.Fatal("put: odd number of arguments")
	}
	err := s.Update(func(tx kv.Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			if err := tx.Put([]byte(kvs[i]), []byte(kvs[i+1])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func del(t *testing.T, s kv.Store, keys ...string) {
	t.Helper()
	err := s.Update(func(tx kv.Txn) error {
		for _, k := range keys {
			if err := tx.Delete([]byte(k)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
}

// get returns the value of key and whether it exists.
func get(t *testing.T, s kv.Store, key string) (string, bool) {
	t.Helper()
	var v []byte
	err := s.View(func(r kv.Reader) error {
		var err error
		v, err = r.Get([]byte(key))
		v = bytes.Clone(v) // keeps nil nil
		return err
	})
	if err != nil {
		t.Fatalf("View: %v", err)
	}
	return string(v), v != nil
}

func wantGet(t *testing.T, s kv.Store, key, want string) {
	t.Helper()
	if got, ok := get(t, s, key); !ok || got != want {
		t.Errorf("Get(%q) = %q, %v; want %q", key, got, ok, want)
	}
}

func wantAbsent(t *testing.T, s kv.Store, key string) {
	t.Helper()
	if got, ok := get(t, s, key); ok {
		t.Errorf("Get(%q) = %q; want absent", key, got)
	}
}

// scanAll returns "k=v" for each key of r in [start, end).
func scanAll(t *testing.T, r kv.Reader, start, end []byte) []string {
	t.Helper()
	var out []string
	err := r.Scan(start, end, func(k, v []byte) (bool, error) {
		out = append(out, string(k)+"="+string(v))
		return true, nil
	})
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out
}

func viewScan(t *testing.T, s kv.Store, start, end []byte) []string {
	t.Helper()
	var out []string
	if err := s.View(func(r kv.Reader) error {
		out = scanAll(t, r, start, end)
		return nil
	}); err != nil {
		t.Fatalf("View: %v", err)
	}
	return out
}

func wantList(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got  %q\n want %q", what, got, want)
	}
}

// --- tests ---

func testGetPutDelete(t *testing.T, s kv.Store) {
	wantAbsent(t, s, "a")
	put(t, s, "a", "1", "b", "2")
	wantGet(t, s, "a", "1")
	wantGet(t, s, "b", "2")
	put(t, s, "a", "3")
	wantGet(t, s, "a", "3")
	del(t, s, "a", "never-existed")
	wantAbsent(t, s, "a")
	wantGet(t, s, "b", "2")
	put(t, s, "a", "4")
	wantGet(t, s, "a", "4")
}

func testEmptyValue(t *testing.T, s kv.Store) {
	// An empty or nil value is a present key: Get returns non-nil.
	err := s.Update(func(tx kv.Txn) error {
		if err := tx.Put([]byte("nil"), nil); err != nil {
			return err
		}
		if err := tx.Put([]byte("empty"), []byte{}); err != nil {
			return err
		}
		for _, k := range []string{"nil", "empty"} {
			v, err := tx.Get([]byte(k))
			if err != nil {
				return err
			}
			if v == nil || len(v) != 0 {
				t.Errorf("in txn: Get(%q) = %#v; want empty, non-nil", k, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantGet(t, s, "nil", "")
	wantGet(t, s, "empty", "")
	wantList(t, "scan", viewScan(t, s, nil, nil), []string{"empty=", "nil="})
}

func testBadKey(t *testing.T, s kv.Store) {
	err := s.Update(func(tx kv.Txn) error { return tx.Put(nil, []byte("v")) })
	if err == nil {
		t.Error("Put with an empty key succeeded")
	}
	wantList(t, "scan after failed put", viewScan(t, s, nil, nil), nil)
}

func testCallerBuffers(t *testing.T, s kv.Store) {
	// The store must copy what Put is given: callers reuse buffers.
	k, v := []byte("key"), []byte("value")
	err := s.Update(func(tx kv.Txn) error {
		if err := tx.Put(k, v); err != nil {
			return err
		}
		copy(k, "XXX")
		copy(v, "XXXXX")
		got, err := tx.Get([]byte("key"))
		if string(got) != "value" {
			t.Errorf("in txn: Get = %q after the caller reused its buffers", got)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantGet(t, s, "key", "value")
	wantAbsent(t, s, "XXX")
}

// randomKeys returns n distinct keys with awkward bytes (0x00, 0xff) and
// lengths, unsorted.
func randomKeys(rng *rand.Rand, n int) []string {
	seen := map[string]bool{}
	var keys []string
	for len(keys) < n {
		b := make([]byte, 1+rng.IntN(12))
		for i := range b {
			switch rng.IntN(4) {
			case 0:
				b[i] = 0x00
			case 1:
				b[i] = 0xff
			default:
				b[i] = byte('a' + rng.IntN(4))
			}
		}
		if !seen[string(b)] {
			seen[string(b)] = true
			keys = append(keys, string(b))
		}
	}
	return keys
}

func testScanOrder(t *testing.T, s kv.Store) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := randomKeys(rng, 300)
	// Spread over several Updates, with deletes, so that layered drivers
	// hold keys in more than one place.
	var live []string
	for i := 0; i < len(keys); i += 50 {
		var kvs []string
		for _, k := range keys[i : i+50] {
			kvs = append(kvs, k, "v"+k)
		}
		put(t, s, kvs...)
		del(t, s, keys[i], keys[i+7])
		live = append(live, keys[i+1:i+7]...)
		live = append(live, keys[i+8:i+50]...)
	}
	sort.Strings(live)
	var want []string
	for _, k := range live {
		want = append(want, k+"=v"+k)
	}
	wantList(t, "full scan", viewScan(t, s, nil, nil), want)
}

// testFirst checks kv.First (a driver's own, if it has one) against the
// first key of a Scan, in views and in a transaction over its own writes,
// with keys deleted and rewritten across Updates.
func testFirst(t *testing.T, s kv.Store) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := randomKeys(rng, 200)
	check := func(what string, r kv.Reader) {
		t.Helper()
		for i := 0; i < 300; i++ {
			start := []byte(keys[rng.IntN(len(keys))])
			if i%3 == 0 {
				start = start[:rng.IntN(len(start)+1)]
			}
			var end []byte
			if i%4 != 0 {
				end = []byte(keys[rng.IntN(len(keys))])
			}
			var want []string
			if len(end) == 0 || bytes.Compare(start, end) < 0 {
				if all := scanAll(t, r, start, end); len(all) > 0 {
					want = all[:1]
				}
			}
			var got []string
			k, v, err := kv.First(r, start, end)
			if err != nil {
				t.Fatalf("%s: First(%q, %q): %v", what, start, end, err)
			}
			if k != nil {
				got = []string{string(k) + "=" + string(v)}
			}
			wantList(t, fmt.Sprintf("%s: First(%q, %q)", what, start, end), got, want)
		}
	}
	for round := 0; round < 4; round++ {
		var kvs []string
		for _, k := range keys {
			if rng.IntN(3) == 0 {
				v := fmt.Sprintf("v%d%s", round, k)
				if rng.IntN(4) == 0 { // a large value: drivers may keep those apart (kv/bolt nests them)
					v += strings.Repeat("x", 5000)
				}
				kvs = append(kvs, k, v)
			}
		}
		put(t, s, kvs...)
		var gone []string
		for _, k := range keys {
			if rng.IntN(4) == 0 {
				gone = append(gone, k)
			}
		}
		del(t, s, gone...)
		if err := s.View(func(r kv.Reader) error { check(fmt.Sprintf("view %d", round), r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	err := s.Update(func(tx kv.Txn) error {
		for _, k := range keys {
			switch rng.IntN(5) {
			case 0:
				if err := tx.Delete([]byte(k)); err != nil {
					return err
				}
			case 1:
				if err := tx.Put([]byte(k), []byte("t"+k)); err != nil {
					return err
				}
			}
		}
		check("txn", tx)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testScanBounds(t *testing.T, s kv.Store) {
	put(t, s, "a", "1", "b", "2", "ba", "3", "c", "4", "d", "5")
	cases := []struct {
		start, end string
		nilEnd     bool
		want       []string
	}{
		{"", "", true, []string{"a=1", "b=2", "ba=3", "c=4", "d=5"}},
		{"b", "", true, []string{"b=2", "ba=3", "c=4", "d=5"}},
		{"b", "c", false, []string{"b=2", "ba=3"}},
		{"ab", "bb", false, []string{"b=2", "ba=3"}},
		{"", "b", false, []string{"a=1"}},
		{"c", "c", false, nil},
		{"d", "a", false, nil},
		{"e", "", true, nil},
		{"d\x00", "", true, nil},
	}
	for _, c := range cases {
		var start, end []byte
		if c.start != "" {
			start = []byte(c.start)
		}
		if !c.nilEnd {
			end = []byte(c.end)
		}
		wantList(t, fmt.Sprintf("Scan(%q, %q)", start, end), viewScan(t, s, start, end), c.want)
	}
}

func testScanStop(t *testing.T, s kv.Store) {
	put(t, s, "a", "1", "b", "2", "c", "3", "d", "4")
	boom := errors.New("boom")
	err := s.View(func(r kv.Reader) error {
		var seen []string
		if err := r.Scan(nil, nil, func(k, v []byte) (bool, error) {
			seen = append(seen, string(k))
			return len(seen) < 2, nil
		}); err != nil {
			return err
		}
		wantList(t, "stopped scan", seen, []string{"a", "b"})
		seen = nil
		err := r.Scan(nil, nil, func(k, v []byte) (bool, error) {
			seen = append(seen, string(k))
			if string(k) == "c" {
				return true, boom
			}
			return true, nil
		})
		if !errors.Is(err, boom) {
			t.Errorf("Scan error = %v; want the callback's", err)
		}
		wantList(t, "failed scan", seen, []string{"a", "b", "c"})
		return err
	})
	if !errors.Is(err, boom) {
		t.Errorf("View error = %v; want the callback's", err)
	}
}

func testScanPrefix(t *testing.T, s kv.Store) {
	put(t, s, "a", "", "a\x00", "", "a\xff", "", "a\xff\xff", "", "ab", "", "b", "", "\xff", "", "\xff\xff", "")
	cases := map[string][]string{
		"a":     {"a=", "a\x00=", "ab=", "a\xff=", "a\xff\xff="},
		"a\xff": {"a\xff=", "a\xff\xff="},
		"\xff":  {"\xff=", "\xff\xff="},
		"c":     nil,
	}
	for p, want := range cases {
		got := viewScan(t, s, []byte(p), kv.PrefixEnd([]byte(p)))
		wantList(t, fmt.Sprintf("prefix %q", p), got, want)
	}
}

func testPrefixEnd(t *testing.T) {
	cases := []struct{ in, want []byte }{
		{[]byte("a"), []byte("b")},
		{[]byte("ab"), []byte("ac")},
		{[]byte("a\xff"), []byte("b")},
		{[]byte("a\xff\xff"), []byte("b")},
		{[]byte{0x00}, []byte{0x01}},
		{[]byte{0xff}, nil},
		{[]byte{0xff, 0xff}, nil},
		{nil, nil},
	}
	for _, c := range cases {
		in := bytes.Clone(c.in)
		if got := kv.PrefixEnd(in); !bytes.Equal(got, c.want) || (got == nil) != (c.want == nil) {
			t.Errorf("PrefixEnd(%q) = %q; want %q", c.in, got, c.want)
		}
		if !bytes.Equal(in, c.in) {
			t.Errorf("PrefixEnd(%q) modified its argument", c.in)
		}
	}
}

func testReadYourWrites(t *testing.T, s kv.Store) {
	put(t, s, "a", "1", "b", "2", "c", "3", "d", "4")
	err := s.Update(func(tx kv.Txn) error {
		for _, w := range []struct{ k, v string }{{"b", "2'"}, {"e", "5"}, {"0", "0"}} {
			if err := tx.Put([]byte(w.k), []byte(w.v)); err != nil {
				return err
			}
		}
		if err := tx.Delete([]byte("c")); err != nil {
			return err
		}
		for k, want := range map[string]string{"b": "2'", "e": "5", "a": "1"} {
			if v, err := tx.Get([]byte(k)); err != nil || string(v) != want {
				t.Errorf("in txn: Get(%q) = %q, %v; want %q", k, v, err, want)
			}
		}
		if v, err := tx.Get([]byte("c")); err != nil || v != nil {
			t.Errorf("in txn: Get(deleted) = %q, %v; want nil", v, err)
		}
		wantList(t, "txn scan", scanAll(t, tx, nil, nil), []string{"0=0", "a=1", "b=2'", "d=4", "e=5"})
		wantList(t, "txn range scan", scanAll(t, tx, []byte("b"), []byte("e")), []string{"b=2'", "d=4"})
		// Delete then re-put within one transaction.
		if err := tx.Delete([]byte("e")); err != nil {
			return err
		}
		if err := tx.Put([]byte("c"), []byte("3'")); err != nil {
			return err
		}
		wantList(t, "txn scan 2", scanAll(t, tx, nil, nil), []string{"0=0", "a=1", "b=2'", "c=3'", "d=4"})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantList(t, "after commit", viewScan(t, s, nil, nil), []string{"0=0", "a=1", "b=2'", "c=3'", "d=4"})
}

func testRollback(t *testing.T, s kv.Store) {
	put(t, s, "a", "1", "b", "2")
	boom := errors.New("boom")
	err := s.Update(func(tx kv.Txn) error {
		_ = tx.Put([]byte("x"), []byte("9"))
		_ = tx.Put([]byte("a"), []byte("changed"))
		_ = tx.Delete([]byte("b"))
		return fmt.Errorf("wrapped: %w", boom)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v; want the callback's", err)
	}
	wantList(t, "after rollback", viewScan(t, s, nil, nil), []string{"a=1", "b=2"})
	put(t, s, "c", "3")
	wantList(t, "after next commit", viewScan(t, s, nil, nil), []string{"a=1", "b=2", "c=3"})
}

func testWriteDuringScan(t *testing.T, s kv.Store) {
	// The mvcc layer supersedes versions while scanning them: writing the
	// key just visited, or keys behind it, must not derail the scan.
	// (Whether a scan sees keys its callback writes ahead of it is up to
	// the driver.)
	var kvs, want []string
	for i := range 20 {
		k := fmt.Sprintf("k%02d", i)
		kvs = append(kvs, k, "old")
		want = append(want, k)
	}
	put(t, s, kvs...)
	var seen []string
	err := s.Update(func(tx kv.Txn) error {
		return tx.Scan([]byte("k"), kv.PrefixEnd([]byte("k")), func(k, v []byte) (bool, error) {
			seen = append(seen, string(k))
			key := bytes.Clone(k)
			if err := tx.Put(key, []byte("new")); err != nil {
				return false, err
			}
			if key[len(key)-1]%2 == 1 {
				if err := tx.Delete(key); err != nil {
					return false, err
				}
			}
			return true, tx.Put(append([]byte("a-"), key...), []byte("x"))
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	wantList(t, "visited", seen, want)
	var after []string
	for i := range 20 {
		after = append(after, fmt.Sprintf("a-k%02d=x", i))
	}
	for i := 0; i < 20; i += 2 {
		after = append(after, fmt.Sprintf("k%02d=new", i))
	}
	wantList(t, "after", viewScan(t, s, nil, nil), after)
}

func testSnapshotIsolation(t *testing.T, s kv.Store) {
	var kvs, want []string
	for i := range 50 {
		k := fmt.Sprintf("p/%02d", i)
		kvs = append(kvs, k, "v1")
		want = append(want, k+"=v1")
	}
	put(t, s, append(kvs, "k", "old")...)

	err := s.View(func(r kv.Reader) error {
		updated := make(chan error, 1)
		go func() {
			updated <- s.Update(func(tx kv.Txn) error {
				if err := tx.Put([]byte("k"), []byte("new")); err != nil {
					return err
				}
				for i := range 25 {
					if err := tx.Delete([]byte(fmt.Sprintf("p/%02d", i))); err != nil {
						return err
					}
				}
				return tx.Put([]byte("p/99"), []byte("v2"))
			})
		}()
		// An Update that waits for the open View never returns: go test
		// -timeout reports that.
		if err := <-updated; err != nil {
			t.Errorf("concurrent Update: %v", err)
		}
		if v, err := r.Get([]byte("k")); err != nil || string(v) != "old" {
			t.Errorf("View saw Get(k) = %q, %v after a concurrent Update; want old", v, err)
		}
		wantList(t, "View's scan after a concurrent Update", scanAll(t, r, []byte("p/"), kv.PrefixEnd([]byte("p/"))), want)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	wantGet(t, s, "k", "new")
	if got := viewScan(t, s, []byte("p/"), kv.PrefixEnd([]byte("p/"))); len(got) != 26 {
		t.Errorf("after: %d p/ keys; want 26", len(got))
	}
}

func testConcurrency(t *testing.T, s kv.Store) {
	// Writers increment a counter (read-modify-write) and keep a == b;
	// readers check that every snapshot is consistent.
	const writers, perWriter, readers = 4, 50, 4
	put(t, s, "a", "0", "b", "0", "n", "0")
	var stop atomic.Bool
	var wg, rg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				err := s.Update(func(tx kv.Txn) error {
					v, err := tx.Get([]byte("n"))
					if err != nil {
						return err
					}
					var n int
					fmt.Sscan(string(v), &n)
					n++
					for _, k := range []string{"n", "a", "b"} {
						if err := tx.Put([]byte(k), []byte(fmt.Sprint(n))); err != nil {
							return err
						}
					}
					return tx.Put([]byte(fmt.Sprintf("w/%d/%03d", w, i)), []byte("x"))
				})
				if err != nil {
					t.Errorf("Update: %v", err)
					return
				}
			}
		}()
	}
	for range readers {
		rg.Add(1)
		go func() {
			defer rg.Done()
			last := 0
			for !stop.Load() {
				err := s.View(func(r kv.Reader) error {
					a, err := r.Get([]byte("a"))
					if err != nil {
						return err
					}
					b, err := r.Get([]byte("b"))
					if err != nil {
						return err
					}
					count := 0
					err = r.Scan([]byte("w/"), kv.PrefixEnd([]byte("w/")), func(k, v []byte) (bool, error) {
						count++
						return true, nil
					})
					if string(a) != string(b) || string(a) != fmt.Sprint(count) {
						t.Errorf("inconsistent snapshot: a=%s b=%s w/ keys=%d", a, b, count)
					}
					if count < last {
						t.Errorf("went back in time: %d w/ keys after %d", count, last)
					}
					last = count
					return err
				})
				if err != nil {
					t.Errorf("View: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	rg.Wait()
	wantGet(t, s, "n", fmt.Sprint(writers*perWriter))
	if got := viewScan(t, s, []byte("w/"), kv.PrefixEnd([]byte("w/"))); len(got) != writers*perWriter {
		t.Errorf("%d w/ keys; want %d", len(got), writers*perWriter)
	}
}

func testBigTxn(t *testing.T, s kv.Store) {
	const n = 20000
	err := s.Update(func(tx kv.Txn) error {
		for i := range n {
			if err := tx.Put([]byte(fmt.Sprintf("big/%06d", i)), []byte(fmt.Sprint(i))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	err = s.View(func(r kv.Reader) error {
		return r.Scan([]byte("big/"), nil, func(k, v []byte) (bool, error) {
			if want := fmt.Sprintf("big/%06d", i); string(k) != want || string(v) != fmt.Sprint(i) {
				return false, fmt.Errorf("key %d: got %q=%q, want %q", i, k, v, want)
			}
			i++
			return true, nil
		})
	})
	if err != nil || i != n {
		t.Fatalf("scanned %d of %d keys: %v", i, n, err)
	}
}

func testLargeValue(t *testing.T, s kv.Store) {
	v := make([]byte, 3<<20)
	for i := range v {
		v[i] = byte(i * 7)
	}
	put(t, s, "large", string(v))
	if got, _ := get(t, s, "large"); got != string(v) {
		t.Errorf("large value: got %d bytes back, not the %d put", len(got), len(v))
	}
}

func testSync(t *testing.T, s kv.Store) {
	put(t, s, "a", "1")
	if err := s.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantGet(t, s, "a", "1")
}

func testClosed(t *testing.T, s kv.Store) {
	put(t, s, "a", "1")
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	noop := func(kv.Reader) error { return nil }
	for name, err := range map[string]error{
		"View":   s.View(noop),
		"Update": s.Update(func(kv.Txn) error { return nil }),
		"Sync":   s.Sync(),
		"Close":  s.Close(),
	} {
		if !errors.Is(err, kv.ErrClosed) {
			t.Errorf("%s on a closed store = %v; want kv.ErrClosed", name, err)
		}
	}
}
