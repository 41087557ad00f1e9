package postgres_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/kvtest"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func open(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), url, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	kvtest.Run(t, func(t *testing.T) kv.Store { return open(t, pgtest.DB(t)) })
}

// Two stores on one database are two processes: each sees the other's
// commits, and their writes serialize.
func TestTwoProcesses(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	if err := a.Update(func(tx kv.Txn) error { return tx.Put([]byte("k"), []byte("a")) }); err != nil {
		t.Fatal(err)
	}
	var got []byte
	if err := b.View(func(r kv.Reader) error {
		v, err := r.Get([]byte("k"))
		got = append([]byte(nil), v...)
		return err
	}); err != nil || string(got) != "a" {
		t.Fatalf("second store: Get = %q, %v; want a", got, err)
	}
	// Read-modify-write from both: no lost update.
	const n = 50
	done := make(chan error, 2)
	for _, s := range []*postgres.Store{a, b} {
		go func() {
			for range n {
				err := s.Update(func(tx kv.Txn) error {
					v, err := tx.Get([]byte("n"))
					if err != nil {
						return err
					}
					return tx.Put([]byte("n"), append(v, 'x'))
				})
				if err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if err := a.View(func(r kv.Reader) error {
		v, err := r.Get([]byte("n"))
		got = append([]byte(nil), v...)
		return err
	}); err != nil || len(got) != 2*n {
		t.Fatalf("counter = %d, %v; want %d", len(got), err, 2*n)
	}
}

func TestLeaseHeld(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := context.Background()
	la, err := a.Acquire(ctx, "S1", postgres.LeaseOptions{Host: "hosta", Pid: 11})
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(ctx, "S1", postgres.LeaseOptions{Host: "hostb", Pid: 22})
	var he *postgres.HeldError
	if !errors.As(err, &he) || !errors.Is(err, postgres.ErrHeld) || he.Host != "hosta" || he.Pid != 11 {
		t.Fatalf("second Acquire = %v; want held by hosta pid 11", err)
	}
	if _, err := b.Acquire(ctx, postgres.AllNames, postgres.LeaseOptions{Host: "hostb", Pid: 22}); !errors.Is(err, postgres.ErrHeld) {
		t.Fatalf("Acquire(*) beside a session lease = %v; want ErrHeld", err)
	}
	lb2, err := b.Acquire(ctx, "S2", postgres.LeaseOptions{Host: "hostb", Pid: 22})
	if err != nil {
		t.Fatalf("another name: %v", err)
	}
	// Commits of both holders go through.
	for _, s := range []*postgres.Store{a, b} {
		if err := s.Update(func(tx kv.Txn) error { return tx.Put([]byte("x"), nil) }); err != nil {
			t.Fatalf("commit under a live lease: %v", err)
		}
	}
	if err := la.Release(); err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "S1", postgres.LeaseOptions{Host: "hostb", Pid: 22})
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if lb.Token() <= la.Token() {
		t.Errorf("token %d after %d; want it to grow", lb.Token(), la.Token())
	}
	lb.Release()
	lb2.Release()
}

// A holder that stops renewing (paused, partitioned) loses its lease when
// it expires; once another process took it over, the former holder's
// commits fail and write nothing.
func TestLeaseFencing(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	ctx := context.Background()
	if _, err := a.Acquire(ctx, "S", postgres.LeaseOptions{Host: "a", Pid: 1, TTL: 300 * time.Millisecond, NoRenew: true}); err != nil {
		t.Fatal(err)
	}
	var lb *postgres.Lease
	for {
		var err error
		lb, err = b.Acquire(ctx, "S", postgres.LeaseOptions{Host: "b", Pid: 2})
		if err == nil {
			break
		}
		if !errors.Is(err, postgres.ErrHeld) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	defer lb.Release()
	err := a.Update(func(tx kv.Txn) error { return tx.Put([]byte("stale"), []byte("1")) })
	if !errors.Is(err, postgres.ErrFenced) {
		t.Fatalf("stale holder's commit = %v; want ErrFenced", err)
	}
	if err := b.View(func(r kv.Reader) error {
		v, err := r.Get([]byte("stale"))
		if v != nil {
			t.Errorf("the fenced commit wrote %q", v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx kv.Txn) error { return tx.Put([]byte("new"), []byte("1")) }); err != nil {
		t.Fatalf("new holder's commit: %v", err)
	}
}

// TestCompact: hard forget's compaction step runs (VACUUM FULL) and keeps
// the live rows.
func TestCompact(t *testing.T) {
	s := open(t, pgtest.DB(t))
	t.Cleanup(func() { s.Close() })
	if err := s.Update(func(tx kv.Txn) error {
		if err := tx.Put([]byte("keep"), []byte("1")); err != nil {
			return err
		}
		return tx.Put([]byte("gone"), []byte("secret"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx kv.Txn) error { return tx.Delete([]byte("gone")) }); err != nil {
		t.Fatal(err)
	}
	var calls int
	if err := s.Compact(func(done, total int64) { calls++ }); err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Error("Compact reported no progress")
	}
	if err := s.View(func(r kv.Reader) error {
		v, err := r.Get([]byte("keep"))
		if string(v) != "1" {
			t.Errorf("after Compact: keep = %q", v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseRevived: a lease that expired while its holder could not renew
// it (the server was away), and that nobody took over, is renewed again:
// commits fail while it is expired and succeed once it is renewed.
func TestLeaseRevived(t *testing.T) {
	s := open(t, pgtest.DB(t))
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	l, err := s.Acquire(ctx, "S", postgres.LeaseOptions{Host: "a", Pid: 1, TTL: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	put := func() error { return s.Update(func(tx kv.Txn) error { return tx.Put([]byte("k"), nil) }) }
	if _, err := s.Pool().Exec(ctx, "UPDATE padfs_lease SET expires = clock_timestamp() - interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	if err := put(); !errors.Is(err, postgres.ErrFenced) {
		t.Fatalf("commit under an expired lease = %v; want ErrFenced", err)
	}
	for put() != nil { // until the next renewal
		time.Sleep(20 * time.Millisecond)
	}
	if l.Lost() {
		t.Error("lease marked lost after it was renewed")
	}
}

// TestUpdatePanics: a callback that panics has its writes undone and
// leaves the store usable (the panic reaches the caller, as with bbolt).
func TestUpdatePanics(t *testing.T) {
	s := open(t, pgtest.DB(t))
	t.Cleanup(func() { s.Close() })
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v; want the callback's panic", r)
			}
		}()
		s.Update(func(tx kv.Txn) error {
			tx.Put([]byte("p"), []byte("1"))
			panic("boom")
		})
	}()
	if err := s.Update(func(tx kv.Txn) error { return tx.Put([]byte("q"), []byte("2")) }); err != nil {
		t.Fatalf("Update after a panicking one: %v", err)
	}
	if err := s.View(func(r kv.Reader) error {
		if v, _ := r.Get([]byte("p")); v != nil {
			t.Errorf("the panicking Update's write is there: %q", v)
		}
		v, err := r.Get([]byte("q"))
		if string(v) != "2" {
			t.Errorf("q = %q", v)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

// TestServerRestart: a transaction that begins while the server is down
// waits for it (Options.RetryFor) and goes through once it is back; past
// RetryFor it fails with ErrUnavailable, which does not pass for a file
// that does not exist (the unix socket's ENOENT), so that the file system
// says EIO.
func TestServerRestart(t *testing.T) {
	srv := pgtest.StartT(t)
	url := srv.DB(t)
	s, err := postgres.Open(context.Background(), url, postgres.Options{RetryFor: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	quick, err := postgres.Open(context.Background(), url, postgres.Options{RetryFor: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); quick.Close() })
	putKV(t, s, "k", "1")
	srv.Halt()
	err = quick.View(func(kv.Reader) error { return nil })
	if !errors.Is(err, postgres.ErrUnavailable) || errors.Is(err, os.ErrNotExist) {
		t.Errorf("View with the server down = %v; want ErrUnavailable, not ErrNotExist", err)
	}
	done := make(chan error, 1)
	go func() {
		done <- s.Update(func(tx kv.Txn) error { return tx.Put([]byte("k"), []byte("2")) })
	}()
	time.Sleep(200 * time.Millisecond) // into the outage (nothing asserts on it)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Update across the restart: %v", err)
	}
	if got := dump(t, quick, "", "", "k"); got != "k=2 | k=2" {
		t.Errorf("after the restart: %q", got)
	}
}
