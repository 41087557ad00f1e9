package bolt

import (
	"bytes"
	"fmt"

	"github.com/padfs/padfs/mvcc/kv"
	"go.etcd.io/bbolt"
)

var (
	_ kv.Reader       = (*reader)(nil)
	_ kv.Firster      = (*reader)(nil)
	_ kv.Txn          = (*txn)(nil)
	_ kv.StablePutter = (*txn)(nil)
)

// reader is a kv.Reader over the bucket of one bbolt transaction.
type reader struct {
	s        *Store
	b        *bbolt.Bucket
	writable bool
	writes   int  // bumped by every Put and Delete: a Scan re-seeks after one
	inCaller bool // the caller's code is running: a panic now is its own
}

// enter marks the start of driver code and returns the mark to restore.
func (r *reader) enter() (outer bool) {
	outer, r.inCaller = r.inCaller, false
	return outer
}

// leave, deferred after enter, turns a panic raised by bbolt on a corrupt
// page into an error. A panic from the caller's callback is not ours to
// stop: the mark stays set so that every enclosing leave lets it pass too.
func (r *reader) leave(outer bool, err *error) {
	if r.inCaller {
		return
	}
	if p := recover(); p != nil {
		*err = r.s.broke(p)
	}
	r.inCaller = outer
}

// call runs the caller's code; only driver code (inside enter) calls it.
func (r *reader) call(fn func() error) error {
	r.inCaller = true
	err := fn()
	r.inCaller = false
	return err
}

func (r *reader) Get(key []byte) (v []byte, err error) {
	defer r.leave(r.enter(), &err)
	return getValue(r.b, key), nil
}

func (r *reader) First(start, end []byte) (k, v []byte, err error) {
	defer r.leave(r.enter(), &err)
	c := r.b.Cursor()
	if len(start) == 0 {
		k, v = c.First()
	} else {
		k, v = c.Seek(start)
	}
	if k == nil || (end != nil && bytes.Compare(k, end) >= 0) {
		return nil, nil, nil
	}
	return k, entryValue(r.b, k, v), nil
}

func (r *reader) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) (err error) {
	defer r.leave(r.enter(), &err)
	c := r.b.Cursor()
	var k, v []byte
	if len(start) == 0 {
		k, v = c.First()
	} else {
		k, v = c.Seek(start)
	}
	var last []byte
	for k != nil && (end == nil || bytes.Compare(k, end) < 0) {
		writes := r.writes
		if r.writable {
			last = append(last[:0], k...)
		}
		v = entryValue(r.b, k, v)
		r.inCaller = true
		more, err := fn(k, v)
		r.inCaller = false
		if err != nil || !more {
			return err
		}
		if r.writes != writes {
			// fn wrote to the bucket, which invalidates bbolt cursors:
			// find our place again, just past the key fn was given.
			if k, v = c.Seek(last); k != nil && bytes.Equal(k, last) {
				k, v = c.Next()
			}
			continue
		}
		k, v = c.Next()
	}
	return nil
}

// txn is a kv.Txn over the bucket of a bbolt read-write transaction.
type txn struct{ reader }

func (t *txn) Put(key, value []byte) (err error) {
	defer t.leave(t.enter(), &err)
	t.writes++
	// bbolt keeps both slices until commit: copy them so the caller may
	// reuse its buffers, and store an empty value as non-nil so Get tells
	// it from an absent key.
	k := append([]byte(nil), key...)
	v := make([]byte, len(value)) // make+copy: not zeroed first
	copy(v, value)
	if err := putValue(t.b, k, v, t.s.opts.Flat); err != nil {
		return fmt.Errorf("kv/bolt %s: put: %w", t.s.path, err)
	}
	return nil
}

// PutStable is Put without the copies: bbolt keeps key and value, which
// the caller leaves unchanged until the transaction ends.
func (t *txn) PutStable(key, value []byte) (err error) {
	defer t.leave(t.enter(), &err)
	t.writes++
	if value == nil {
		value = []byte{}
	}
	if err := putValue(t.b, key, value, t.s.opts.Flat); err != nil {
		return fmt.Errorf("kv/bolt %s: put: %w", t.s.path, err)
	}
	return nil
}

func (t *txn) Delete(key []byte) (err error) {
	defer t.leave(t.enter(), &err)
	t.writes++
	if err := deleteValue(t.b, key); err != nil {
		return fmt.Errorf("kv/bolt %s: delete: %w", t.s.path, err)
	}
	return nil
}
