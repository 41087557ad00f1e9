package postgres_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

// putDeferred is putKV with kv.Defer: it may return before its commit.
func putDeferred(s kv.Store, k, v string) error {
	return s.Update(func(tx kv.Txn) error {
		kv.Defer(tx)
		return tx.Put([]byte(k), []byte(v))
	})
}

// TestDeferredUpdates: an Update that called kv.Defer, right after a
// commit (in the batch that commit began ahead), returns before its
// COMMIT; this process's Views see it at once (through the open batch),
// another process once it has committed: at the latest DeferFor later,
// with the next Update that waits, or at Sync. Updates stay in order: an
// Update that waits commits every deferred one before it. A deferred
// commit that fails is reported by the next Sync.
func TestDeferredUpdates(t *testing.T) {
	url := pgtest.DB(t)
	a := openOpts(t, url, postgres.Options{AheadIdle: time.Hour, DeferFor: time.Hour})
	other := openOpts(t, url, postgres.Options{})
	putKV(t, a, "Mwarm", "1") // begins the next batch ahead

	st0 := a.Stats()
	for _, k := range []string{"Md1", "Md2", "Md3"} {
		if err := putDeferred(a, k, "v"); err != nil {
			t.Fatal(err)
		}
	}
	d := a.Stats().Sub(st0)
	if d.Deferred != 3 || d.Commits != 0 {
		t.Fatalf("three deferred Updates in a batch begun ahead: %v; want 3 deferred, no commit yet", d)
	}
	if v := get(t, a, "Md2"); v != "v" {
		t.Fatalf("this process's View read %q for a deferred Update's key; want v", v)
	}
	if d := a.Stats().Sub(st0); d.DeferViews != 1 || d.Commits != 0 {
		t.Fatalf("a View while deferred Updates wait: %v; want it read through their batch, without a commit", d)
	}
	if v := get(t, other, "Md1"); v != "-" {
		t.Fatalf("another process read %q before the deferred commit; want nothing yet", v)
	}
	// An Update that waits commits them, in its transaction.
	putKV(t, a, "Mafter", "w")
	for _, k := range []string{"Md1", "Md2", "Md3", "Mafter"} {
		if v := get(t, other, k); v == "-" {
			t.Fatalf("%s missing in another process after a later Update returned", k)
		}
	}
	if d := a.Stats().Sub(st0); d.Commits != 1 {
		t.Fatalf("%v; want the deferred Updates and the one after them in one commit", d)
	}

	// Sync commits them too.
	if err := putDeferred(a, "Md4", "v"); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	if v := get(t, other, "Md4"); v != "v" {
		t.Fatalf("after Sync another process read %q; want v", v)
	}

	// A deferred commit that fails (a key too long for PostgreSQL's
	// index) is logged and reported by the next Sync, once.
	putKV(t, a, "Mwarm", "2")
	if err := putDeferred(a, "Mlong"+strings.Repeat("x", 1<<20), "v"); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err == nil || !strings.Contains(err.Error(), "deferred commit") {
		t.Fatalf("Sync after a deferred commit failed: %v; want its error", err)
	}
	if err := a.Sync(); err != nil {
		t.Fatalf("second Sync: %v; want the failure reported once", err)
	}
	putKV(t, a, "Mok", "v")
	if v := get(t, other, "Mok"); v != "v" {
		t.Fatalf("an Update after the failed deferred commit: %q", v)
	}

	// With the default window, a deferred Update commits by itself.
	b := openOpts(t, url, postgres.Options{AheadIdle: time.Hour})
	putKV(t, b, "Mwarm", "3")
	if err := putDeferred(b, "Mtimed", "v"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the deferred commit", func() bool { return get(t, other, "Mtimed") == "v" })

	// Not in a batch begun ahead (no earlier commit to follow): it waits.
	c := openOpts(t, url, postgres.Options{AheadIdle: -1})
	st0 = c.Stats()
	if err := putDeferred(c, "Mcold", "v"); err != nil {
		t.Fatal(err)
	}
	if d := c.Stats().Sub(st0); d.Deferred != 0 || d.Commits != 1 {
		t.Fatalf("a deferrable Update outside a batch begun ahead: %v; want it committed before it returned", d)
	}
}

// deferKillEnv names the database a child of TestDeferredKill9 writes to
// before it kills itself.
const deferKillEnv = "PADFS_DEFER_KILL_URL"

// TestDeferredKill9: a process killed with SIGKILL loses only the deferred
// Updates after the last Update that waited, never one before it (those
// committed in its transaction), and never out of order. The child makes
// deferred Updates b0..b9, an Update that waits (mid), deferred Updates
// a0..a9 (its window is an hour: they are still in memory), and kills
// itself; the parent reads what the database holds.
func TestDeferredKill9(t *testing.T) {
	if url := os.Getenv(deferKillEnv); url != "" {
		s, err := postgres.Open(context.Background(), url, postgres.Options{AheadIdle: time.Hour, DeferFor: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		putKV(t, s, "Mwarm", "1")
		for i := range 10 {
			if err := putDeferred(s, fmt.Sprintf("Mb%d", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		putKV(t, s, "Mmid", "v")
		for i := range 10 {
			if err := putDeferred(s, fmt.Sprintf("Ma%d", i), "v"); err != nil {
				t.Fatal(err)
			}
		}
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	url := pgtest.DB(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestDeferredKill9$", "-test.count=1")
	cmd.Env = append(os.Environ(), deferKillEnv+"="+url)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL\n%s", err, out)
	}
	s := openOpts(t, url, postgres.Options{})
	for i := range 10 {
		if v := get(t, s, fmt.Sprintf("Mb%d", i)); v != "v" {
			t.Errorf("Mb%d: %q after the kill; want v (deferred before an Update that returned)", i, v)
		}
	}
	if v := get(t, s, "Mmid"); v != "v" {
		t.Errorf("Mmid: %q; want v", v)
	}
	for i := range 10 {
		if v := get(t, s, fmt.Sprintf("Ma%d", i)); v != "-" {
			t.Errorf("Ma%d: %q after the kill; want it lost (deferred, never committed)", i, v)
		}
	}
}
