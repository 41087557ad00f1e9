// Package kvcount wraps a kv.Store and counts what its readers visit (the
// keys handed to Scan callbacks, the Scans and the Gets) and its write
// transactions, so that a test can assert how much an operation reads and
// writes instead of how long it takes.
package kvcount

import (
	"fmt"
	"sync/atomic"

	"github.com/padfs/padfs/mvcc/kv"
)

// Store is a counting kv.Store.
type Store struct {
	kv.Store
	keys, scans, gets, updates atomic.Int64
}

// Counts is what the readers visited so far, and the Updates run.
type Counts struct{ Keys, Scans, Gets, Updates int64 }

// New wraps s.
func New(s kv.Store) *Store { return &Store{Store: s} }

// Counts returns the totals so far.
func (s *Store) Counts() Counts {
	return Counts{Keys: s.keys.Load(), Scans: s.scans.Load(), Gets: s.gets.Load(), Updates: s.updates.Load()}
}

// View counts the reads of fn.
func (s *Store) View(fn func(kv.Reader) error) error {
	return s.Store.View(func(r kv.Reader) error { return fn(reader{r, s}) })
}

// Update counts itself and the reads of fn. (kvcount is no
// kv.BulkUpdater: kv.UpdateBulk comes here too.)
func (s *Store) Update(fn func(kv.Txn) error) error {
	s.updates.Add(1)
	return s.Store.Update(func(tx kv.Txn) error { return fn(txn{reader{tx, s}, tx}) })
}

// Compact compacts the wrapped store, if it can.
func (s *Store) Compact(progress func(done, total int64)) error {
	c, ok := s.Store.(kv.Compactor)
	if !ok {
		return fmt.Errorf("kvcount: %T cannot compact", s.Store)
	}
	return c.Compact(progress)
}

type reader struct {
	r kv.Reader
	s *Store
}

func (r reader) Get(k []byte) ([]byte, error) {
	r.s.gets.Add(1)
	return r.r.Get(k)
}

func (r reader) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) error {
	r.s.scans.Add(1)
	return r.r.Scan(start, end, func(k, v []byte) (bool, error) {
		r.s.keys.Add(1)
		return fn(k, v)
	})
}

type txn struct {
	reader
	w kv.Txn
}

func (t txn) Put(k, v []byte) error { return t.w.Put(k, v) }
func (t txn) Delete(k []byte) error { return t.w.Delete(k) }
