package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/kvtest"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

// sessionKinds are the key kinds of a session's keys (the mvcc layout:
// kind byte, then the 16-byte session id); of them, guardedKinds are those
// only a lease holder may change (all but the log and checkpoint names).
const (
	sessionKinds = "HZNKEDIXSPLW"
	guardedKinds = "HZDIXSPLW"
)

func get(t *testing.T, s kv.Store, k string) string {
	t.Helper()
	var out string
	if err := s.View(func(r kv.Reader) error {
		v, err := r.Get([]byte(k))
		if v == nil {
			out = "-"
		} else {
			out = string(v)
		}
		return err
	}); err != nil {
		t.Fatalf("get %q: %v", k, err)
	}
	return out
}

// scanAll reads every row of [start, end) in one View.
func scanAll(t *testing.T, s kv.Store, start, end string) string {
	t.Helper()
	var b strings.Builder
	if err := s.View(func(r kv.Reader) error {
		return r.Scan([]byte(start), []byte(end), func(k, v []byte) (bool, error) {
			fmt.Fprintf(&b, "%s=%s ", k, v)
			return true, nil
		})
	}); err != nil {
		t.Fatalf("scan %q: %v", start, err)
	}
	return b.String()
}

// TestLeaseLocalReads: two processes on one server, a holding session S's
// lease. a's reads of S's keys take no round trip once cached; b tries to
// change S in every way a process can (a commit to each kind of S's keys,
// SQL by hand) and is refused, naming the holder, but for S's log and
// checkpoint names (a checkpoint from another host), which go through and
// a reads at once (not from its cache); whatever b did, a never
// reads a value of S other than the one the database holds (with the
// guard turned off, b's writes go through and a reads stale values: this
// test fails). Keys outside S (the store's, another session's) are read
// with a check: a sees b's writes to them at once.
func TestLeaseLocalReads(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := context.Background()
	sid, other := strings.Repeat("s", 16), strings.Repeat("o", 16)
	la, err := a.Acquire(ctx, "S", postgres.LeaseOptions{Host: "hosta", Pid: 11, Session: []byte(sid)})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	var kvs []string
	for _, kind := range sessionKinds {
		kvs = append(kvs, string(kind)+sid+"k", "a0")
	}
	putKV(t, a, kvs...)
	putKV(t, a, "M"+"hlc", "1", "D"+other+"k", "o0")
	// Warm: the first View of a key may need the server.
	for _, kind := range sessionKinds {
		get(t, a, string(kind)+sid+"k")
	}
	scanAll(t, a, "D"+sid, "D"+sid+"~")
	st0 := a.Stats()
	for _, kind := range guardedKinds {
		if got := get(t, a, string(kind)+sid+"k"); got != "a0" {
			t.Fatalf("%c key of the leased session = %q; want a0", kind, got)
		}
	}
	if got := scanAll(t, a, "D"+sid, "D"+sid+"~"); got != "D"+sid+"k=a0 " {
		t.Fatalf("scan of the leased session's entries = %q", got)
	}
	if d := a.Stats().Sub(st0); d.Trips != 0 || d.LocalViews != int64(len(guardedKinds))+1 {
		t.Errorf("reads of the leased session's cached keys: %v; want no round trip", d)
	}

	// b changes S: refused for the guarded kinds of keys; its log and
	// checkpoint names (a checkpoint from another host) go through, and
	// the holder reads them at once.
	for i, kind := range sessionKinds {
		k := string(kind) + sid + "k"
		guarded := strings.ContainsRune(guardedKinds, kind)
		err := b.Update(func(tx kv.Txn) error { return tx.Put([]byte(k), []byte(fmt.Sprint("b", i))) })
		if guarded && (!errors.Is(err, postgres.ErrHeld) || !strings.Contains(err.Error(), "mounted read-write by pid 11 on host hosta")) {
			t.Errorf("another process's commit to the leased session's %c key: %v; want it refused, naming the holder", kind, err)
		}
		if !guarded && err != nil {
			t.Errorf("another process's commit to the leased session's %c key (log, checkpoint names): %v; want it to go through", kind, err)
		}
		want := "a0"
		if err == nil {
			want = fmt.Sprint("b", i)
		}
		if got := get(t, a, k); got != want || get(t, b, k) != want {
			t.Errorf("after another process's commit to %q (err %v): holder reads %q, the other %q; want %q", k, err, got, get(t, b, k), want)
		}
		// A delete, and a new key of the session.
		err = b.Update(func(tx kv.Txn) error {
			return errors.Join(tx.Delete([]byte(k)), tx.Put([]byte(string(kind)+sid+"new"), []byte("b")))
		})
		if guarded && err == nil {
			t.Errorf("another process deleted %q from the leased session", k)
		}
		if got, want := get(t, a, string(kind)+sid+"new"), get(t, b, string(kind)+sid+"new"); got != want {
			t.Errorf("holder reads %q of a new key; the database holds %q", got, want)
		}
	}
	// SQL by hand.
	if _, err := b.Pool().Exec(ctx, "UPDATE padfs_kv SET v = 'sql' WHERE k = $1", []byte("D"+sid+"k")); err == nil {
		t.Errorf("SQL by hand changed the leased session")
	}
	if got := get(t, a, "D"+sid+"k"); got != get(t, b, "D"+sid+"k") {
		t.Errorf("after SQL by hand the holder reads %q; the database holds %q", got, get(t, b, "D"+sid+"k"))
	}
	// Keys that are not the leased session's: b's commits go through and
	// a reads them at once.
	putKV(t, b, "Mhlc", "2", "D"+other+"k", "o1", "C"+strings.Repeat("h", 32), "chunk")
	for k, want := range map[string]string{"Mhlc": "2", "D" + other + "k": "o1", "C" + strings.Repeat("h", 32): "chunk"} {
		if got := get(t, a, k); got != want {
			t.Errorf("holder reads %q = %q after another process wrote %q", k, got, want)
		}
	}
	// The holder's own commits: read back at once, locally.
	putKV(t, a, "D"+sid+"k", "a1")
	st0 = a.Stats()
	if got := get(t, a, "D"+sid+"k"); got != "a1" {
		t.Errorf("holder reads its own commit as %q; want a1", got)
	}
	if d := a.Stats().Sub(st0); d.Trips != 0 {
		t.Errorf("reading its own commit back: %v; want no round trip", d)
	}
	// Released: b may write, and a reads what b wrote.
	if err := la.Release(); err != nil {
		t.Fatal(err)
	}
	putKV(t, b, "D"+sid+"k", "b9")
	if got := get(t, a, "D"+sid+"k"); got != "b9" {
		t.Errorf("after the lease was released and another process wrote b9, the former holder reads %q", got)
	}
}

// TestLeaseLocalLapse: a holder that stops renewing (paused) stops reading
// locally before its lease runs out on the server: once another process
// took the lease and committed, the former holder reads the new value.
func TestLeaseLocalLapse(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := context.Background()
	sid := strings.Repeat("p", 16)
	k := "I" + sid + "k"
	la, err := a.Acquire(ctx, "S", postgres.LeaseOptions{Host: "hosta", Pid: 11, Session: []byte(sid), TTL: 500 * time.Millisecond, NoRenew: true})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	putKV(t, a, k, "a0")
	get(t, a, k)
	var lb *postgres.Lease
	for lb == nil {
		if lb, err = b.Acquire(ctx, "S", postgres.LeaseOptions{Host: "hostb", Pid: 22, Session: []byte(sid)}); err != nil && !errors.Is(err, postgres.ErrHeld) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer lb.Release()
	putKV(t, b, k, "b0")
	if got := get(t, a, k); got != "b0" {
		t.Errorf("the former holder reads %q after its lease ran out and another process wrote b0", got)
	}
	if err := a.Update(func(tx kv.Txn) error { return tx.Put([]byte(k), []byte("a1")) }); !errors.Is(err, postgres.ErrFenced) {
		t.Errorf("the former holder's commit: %v; want ErrFenced", err)
	}
}

// TestLeaseTakeOver: TakeOver takes a live lease (forget --force): the
// holder's commits fail from then on, TakeOver returns once the holder's
// lease-local reads have stopped, and the holder reads what the taker
// commits.
func TestLeaseTakeOver(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := context.Background()
	sid := strings.Repeat("t", 16)
	k := "Z" + sid + "k"
	la, err := a.Acquire(ctx, "S", postgres.LeaseOptions{Host: "hosta", Pid: 11, Session: []byte(sid), TTL: 600 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	putKV(t, a, k, "a0")
	get(t, a, k)
	lb, held, err := b.TakeOver(ctx, "S", postgres.LeaseOptions{Host: "hostb", Pid: 22, Session: []byte(sid)})
	if err != nil || held == nil || held.Pid != 11 {
		t.Fatalf("TakeOver = %v, held by %v; want it taken from pid 11", err, held)
	}
	defer lb.Release()
	putKV(t, b, k, "b0")
	if got := get(t, a, k); got != "b0" {
		t.Errorf("the former holder reads %q after the lease was taken over and b0 written", got)
	}
	if err := a.Update(func(tx kv.Txn) error { return tx.Put([]byte(k), []byte("a1")) }); !errors.Is(err, postgres.ErrFenced) {
		t.Errorf("the former holder's commit: %v; want ErrFenced", err)
	}
}

// TestLeaseLocalConsistent: lease-local Views see one generation while the
// holder commits beside them: x and y, written together, are read equal,
// also by Views that go on to read keys that need the server.
func TestLeaseLocalConsistent(t *testing.T) {
	url := pgtest.DB(t)
	a := open(t, url)
	t.Cleanup(func() { a.Close() })
	sid := strings.Repeat("c", 16)
	la, err := a.Acquire(context.Background(), "S", postgres.LeaseOptions{Host: "h", Pid: 1, Session: []byte(sid)})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	x, y := []byte("I"+sid+"x"), []byte("D"+sid+"y")
	putKV(t, a, string(x), "0", string(y), "0", "Mhlc", "0")
	const n = 200
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= n; i++ {
			v := []byte(fmt.Sprint(i))
			if err := a.Update(func(tx kv.Txn) error {
				return errors.Join(tx.Put(x, v), tx.Put(y, v), tx.Put([]byte("Mhlc"), v))
			}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range 2 * n {
		if err := a.View(func(r kv.Reader) error {
			vx, err := r.Get(x)
			if err != nil {
				return err
			}
			vx = append([]byte(nil), vx...)
			var vm []byte
			if i%2 == 1 { // a key of the store: the View begins a transaction
				if vm, err = r.Get([]byte("Mhlc")); err != nil {
					return err
				}
			}
			vy, err := r.Get(y)
			if err != nil {
				return err
			}
			if string(vx) != string(vy) || vm != nil && string(vm) != string(vx) {
				return fmt.Errorf("View read x=%s y=%s hlc=%s: two generations", vx, vy, vm)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if st := a.Stats(); st.LocalViews == 0 {
		t.Errorf("no View was lease-local: %v", st)
	}
}

// TestConformanceLeaseLocal runs the conformance suite on keys that are
// all a leased session's: every View goes through the lease-local path
// (snapshot reads, then a transaction at its first miss). But for
// SnapshotIsolation: a lease-local View takes its snapshot at its first
// read, not when it begins (still between its start and its end, so
// nothing it reads is stale), and that test's View reads only after an
// Update it started has committed.
func TestConformanceLeaseLocal(t *testing.T) {
	sid := strings.Repeat("q", 16)
	prefix := []byte("D" + sid)
	var local atomic.Int64
	kvtest.Run(t, func(t *testing.T) kv.Store {
		s := open(t, pgtest.DB(t))
		t.Cleanup(func() { local.Add(s.Stats().LocalViews) })
		if !strings.HasSuffix(t.Name(), "/SnapshotIsolation") {
			if _, err := s.Acquire(context.Background(), "Q", postgres.LeaseOptions{Host: "h", Pid: 1, Session: []byte(sid)}); err != nil {
				t.Fatal(err)
			}
		}
		return prefixed{s, s, prefix}
	})
	if local.Load() == 0 {
		t.Error("no View of the suite was lease-local")
	}
}

// prefixed is a kv.Store whose keys are those of st under prefix p.
type prefixed struct {
	kv.Store
	pg *postgres.Store
	p  []byte
}

func (s prefixed) View(fn func(kv.Reader) error) error {
	return s.Store.View(func(r kv.Reader) error { return fn(preader{r, s.p}) })
}

func (s prefixed) Update(fn func(kv.Txn) error) error {
	return s.Store.Update(func(tx kv.Txn) error { return fn(ptxn{preader{tx, s.p}, tx}) })
}

type preader struct {
	r kv.Reader
	p []byte
}

func (r preader) key(k []byte) []byte { return append(append([]byte(nil), r.p...), k...) }

func (r preader) Get(k []byte) ([]byte, error) { return r.r.Get(r.key(k)) }

func (r preader) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) error {
	e := kv.PrefixEnd(r.p)
	if end != nil {
		e = r.key(end)
	}
	return r.r.Scan(r.key(start), e, func(k, v []byte) (bool, error) { return fn(k[len(r.p):], v) })
}

type ptxn struct {
	preader
	w kv.Txn
}

func (t ptxn) Put(k, v []byte) error {
	if len(k) == 0 {
		return errors.New("empty key")
	}
	return t.w.Put(t.key(k), v)
}

func (t ptxn) Delete(k []byte) error {
	if len(k) == 0 {
		return nil
	}
	return t.w.Delete(t.key(k))
}

// TestLeaseLocalViewAcrossOwnCommit: a lease-local View that waits for an
// Update of its own process (which cannot wait for it for long) goes on
// reading the generation it began with, also the keys it must ask the
// server for (a miss, a store key). It used to fail ("a commit changed
// what a lease-local read had read").
func TestLeaseLocalViewAcrossOwnCommit(t *testing.T) {
	a := open(t, pgtest.DB(t))
	t.Cleanup(func() { a.Close() })
	sid := strings.Repeat("w", 16)
	la, err := a.Acquire(context.Background(), "S", postgres.LeaseOptions{Host: "h", Pid: 1, Session: []byte(sid)})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	x, miss := []byte("I"+sid+"x"), []byte("D"+sid+"miss")
	putKV(t, a, string(x), "0", "Mhlc", "0")
	get(t, a, string(x))
	st0 := a.Stats()
	if err := a.View(func(r kv.Reader) error {
		if v, err := r.Get(x); err != nil || string(v) != "0" {
			return fmt.Errorf("x = %q, %v", v, err)
		}
		if err := a.Update(func(tx kv.Txn) error {
			return errors.Join(tx.Put(x, []byte("1")), tx.Put(miss, []byte("1")), tx.Put([]byte("Mhlc"), []byte("1")))
		}); err != nil {
			return err
		}
		for _, k := range [][]byte{x, miss, []byte("Mhlc")} {
			v, err := r.Get(k)
			if err != nil {
				return err
			}
			if want := map[string]string{string(x): "0", string(miss): "", "Mhlc": "0"}[string(k)]; string(v) != want {
				return fmt.Errorf("after an Update of its own process the View reads %s = %q; want %q", k, v, want)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if d := a.Stats().Sub(st0); d.LocalViews != 0 || d.Views != 1 {
		t.Errorf("%v", d)
	}
	if got := get(t, a, string(miss)); got != "1" {
		t.Errorf("after the View: %q", got)
	}
}
