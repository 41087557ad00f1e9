// Package kv is the narrow storage interface the mvcc layer is written
// against: a transactional, ordered key-value store. Keys sort as raw bytes
// (bytes.Compare). Drivers live in sub-packages (bolt, wal); every driver
// must pass the conformance suite in kvtest.
//
// Values and keys handed to callbacks are only valid until the callback or
// transaction returns: copy what you keep (bbolt hands out mmap'd memory).
package kv

import "errors"

// ErrClosed is returned by every call on a closed store.
var ErrClosed = errors.New("kv: store closed")

// ErrLocked is wrapped by a driver's Open when another process has the
// store open (drivers re-export it: bolt.ErrLocked, wal.ErrLocked).
var ErrLocked = errors.New("store is locked by another padfs process")

// Store is an ordered key-value store with serializable transactions.
type Store interface {
	// View runs fn against a consistent read-only snapshot.
	View(fn func(Reader) error) error
	// Update runs fn in a read-write transaction. Updates are serialized:
	// at most one runs at a time. Its writes become visible to later
	// transactions atomically when fn returns nil and are discarded when fn
	// returns an error. A committed Update survives a crash of the process;
	// it survives a power loss once Sync has returned (drivers document if
	// they are stronger).
	Update(fn func(Txn) error) error
	// Sync returns when every Update committed before the call is durable
	// against power loss.
	Sync() error
	// Close flushes and releases the store.
	Close() error
}

// Reader reads inside a transaction.
type Reader interface {
	// Get returns the value of key, or nil (and no error) if it is absent.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for each key k with start <= k < end in ascending order
	// (end == nil: no upper bound) until fn returns false or an error.
	Scan(start, end []byte, fn func(k, v []byte) (more bool, err error)) error
}

// Txn is a read-write transaction. Reads see the transaction's own writes.
type Txn interface {
	Reader
	Put(key, value []byte) error
	Delete(key []byte) error
}

// StablePutter is implemented by transactions that can keep the caller's
// slices instead of copying them: PutStable is Put of a key and value that
// the caller leaves unchanged until the transaction has ended (a layer
// moving its own immutable buffers into the store, such as the WAL's fold).
type StablePutter interface {
	PutStable(key, value []byte) error
}

// Put puts through PutStable when tx has it: key and value must then stay
// unchanged until tx ends.
func PutStable(tx Txn, key, value []byte) error {
	if sp, ok := tx.(StablePutter); ok {
		return sp.PutStable(key, value)
	}
	return tx.Put(key, value)
}

// BulkUpdater is implemented by stores with a log in front of their base
// (the WAL): UpdateBulk is Update for content-addressed values, which may
// reach the base without being written to the log first (the bytes hit
// the disk once, not twice). Its writes survive a crash of the process once
// it returns, like Update's, and a power loss once Sync has returned (or
// sooner); unlike Update's they may survive a power loss that loses
// earlier Updates. Values put in fn must stay unchanged until UpdateBulk
// returns.
type BulkUpdater interface {
	UpdateBulk(fn func(Txn) error) error
}

// UpdateBulk runs fn through s's UpdateBulk when it has one, else Update.
func UpdateBulk(s Store, fn func(Txn) error) error {
	if b, ok := s.(BulkUpdater); ok {
		return b.UpdateBulk(fn)
	}
	return s.Update(fn)
}

// Firster is implemented by readers that find the first key of a range
// more cheaply than a Scan stopped at its first key (no callback, no
// iterator): mvcc's seek to a chain's newest version, three of them in an
// unlink. The value is valid as long as one a Scan gives.
type Firster interface {
	First(start, end []byte) (k, v []byte, err error)
}

// First returns the first key k with start <= k < end and its value, or
// nil (no error) if there is none.
func First(r Reader, start, end []byte) (k, v []byte, err error) {
	if f, ok := r.(Firster); ok {
		return f.First(start, end)
	}
	return scanFirst(r, start, end)
}

// scanFirst is First by Scan (apart, so that First's Firster path leaves
// nothing on the heap for the closure).
func scanFirst(r Reader, start, end []byte) (k, v []byte, err error) {
	err = r.Scan(start, end, func(kk, vv []byte) (bool, error) {
		k, v = kk, vv
		return false, nil
	})
	return k, v, err
}

// Compactor is implemented by drivers that can rewrite their files so that
// no byte of deleted data remains on disk (used by hard forget and redact).
type Compactor interface {
	Compact(progress func(done, total int64)) error
}

// Sharer is implemented by drivers that other processes write at the same
// time (a database server that several hosts use). What one process keeps
// in memory about the store, such as the pins of chunks no version names
// yet, does not bind the others.
type Sharer interface {
	SharedStore()
}

// Shared reports whether s is shared with other processes (Sharer).
func Shared(s Store) bool {
	_, ok := s.(Sharer)
	return ok
}

// Retainer is implemented by drivers whose server keeps copies of deleted
// data that Compact cannot reach (a database server's write-ahead log,
// replicas, archives, backups). Retained says where, and what their
// administrator can do, for the receipts of hard forget and redaction.
type Retainer interface {
	Retained() string
}

// Retained is s's Retainer text, or "" when s keeps nothing of the kind.
func Retained(s Store) string {
	if r, ok := s.(Retainer); ok {
		return r.Retained()
	}
	return ""
}

// MinFormater is implemented by drivers whose files a padfs older than
// some mvcc store format would misread: the mvcc layer raises the store's
// format to MinFormat (0: none) when it opens the store, so that such a
// padfs refuses it.
type MinFormater interface {
	MinFormat() uint64
}

// PrefixEnd returns the smallest key greater than every key starting with
// prefix, or nil if there is none (prefix is all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}

// Generation identifies how far a driver's files have come: TxID grows with
// every committed Update as long as File (e.g. the inode number) stays the
// same.
type Generation struct {
	File uint64
	TxID uint64
}

// Generationer is implemented by drivers that can tell their Generation, so
// that a layer above can notice a store that went back in time.
type Generationer interface {
	Generation() (Generation, error)
}
