package wal

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc/kv"
)

// TestFoldInBoundedSteps: a memtable of several foldBatch (what collects
// during a compaction's copy) reaches the base in several transactions, and
// readers see every write all along and after a reopen.
func TestFoldInBoundedSteps(t *testing.T) {
	dir := t.TempDir()
	s, _ := mustOpen(t, dir, Options{FlushInterval: time.Hour, MemtableSize: 1 << 30})
	big := func(i int) []byte { return bytes.Repeat(fmt.Appendf(nil, "%d.", i), 1000) }
	const n = 12000 // about 3 foldBatch of values and entries
	for i := 0; i < n; i += 200 {
		err := s.Update(func(tx kv.Txn) error {
			for j := i; j < i+200; j++ {
				if err := tx.Put(key(j), big(j)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	count := func() (int, error) {
		got := 0
		err := s.View(func(r kv.Reader) error {
			return r.Scan([]byte("key/"), nil, func(k, v []byte) (bool, error) {
				if !bytes.Equal(v, big(got)) || !bytes.Equal(k, key(got)) {
					return false, fmt.Errorf("entry %d is %q", got, k)
				}
				got++
				return true, nil
			})
		})
		return got, err
	}
	g0, err := s.base.(kv.Generationer).Generation()
	if err != nil {
		t.Fatal(err)
	}
	var stop atomic.Bool
	seen := make(chan error, 1)
	go func() {
		for !stop.Load() {
			if got, err := count(); err != nil || got != n {
				seen <- fmt.Errorf("a View during the fold saw %d of %d keys: %v", got, n, err)
				return
			}
		}
		seen <- nil
	}()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	if err := <-seen; err != nil {
		t.Fatal(err)
	}
	g1, err := s.base.(kv.Generationer).Generation()
	if err != nil {
		t.Fatal(err)
	}
	if parts := g1.TxID - g0.TxID; parts < 3 {
		t.Errorf("the fold took %d base transactions; want 3 or more", parts)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, _ = mustOpen(t, dir, Options{})
	defer s.Close()
	if got, err := count(); err != nil || got != n {
		t.Fatalf("after reopen %d of %d keys: %v", got, n, err)
	}
}

// gatedBase holds every base Update at its gate while closed is set.
type gatedBase struct {
	kv.Store
	closed  atomic.Bool
	reached chan struct{} // an Update waits at the gate
	open    chan struct{}
}

func (g *gatedBase) Update(fn func(kv.Txn) error) error {
	if g.closed.Load() {
		g.reached <- struct{}{}
		<-g.open
	}
	return g.Store.Update(fn)
}

// TestWritesGoOnWhileALargeMemtableFolds: the memtable a compaction's
// copy let grow past MemtableSize folds while Updates go on into the
// active one, up to what is left to fold, instead of waiting for the
// whole fold once they have put MemtableSize. (If they waited, the
// Updates below would never return and the test would time out.)
func TestWritesGoOnWhileALargeMemtableFolds(t *testing.T) {
	dir := t.TempDir()
	b := openBase(t, dir)
	g := &gatedBase{Store: b, reached: make(chan struct{}), open: make(chan struct{})}
	s, err := Open(filepath.Join(dir, "wal"), g, Options{FlushInterval: time.Hour, MemtableSize: 4 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// What collects while a compaction holds flushMu: 16 memtables' worth.
	s.flushMu.Lock()
	putN(t, s, 0, 400)
	g.closed.Store(true)
	s.flushMu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default: // the puts kicked it already
	}
	<-g.reached // the fold of the 400 puts waits at the gate
	s.mu.Lock()
	frozen := s.frozen.size
	s.mu.Unlock()
	// Half as much again: far past MemtableSize, under the frozen size
	// (nothing of it is folded yet).
	putN(t, s, 400, 600)
	s.mu.Lock()
	active := s.active.size
	s.mu.Unlock()
	if active <= s.opts.MemtableSize || active >= frozen {
		t.Fatalf("active memtable %d bytes, frozen %d: the test should put more than MemtableSize and less than the frozen", active, frozen)
	}
	g.closed.Store(false)
	close(g.open)
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	checkN(t, s, 600)
}
