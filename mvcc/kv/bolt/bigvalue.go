package bolt

import (
	"errors"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Large values (content chunks, ~80 KiB) are each kept in a bucket of
// their own nested under their key, holding the value under bigKey. In a
// bbolt leaf, values sit side by side and a leaf of four keys or fewer is
// never split, so a flat chunk shares its leaf with up to three others
// and every new chunk landing beside them (chunk keys are random) rewrote
// them all: about 2.4 to 4 times the new bytes. A nested bucket's value
// has pages of its own; the leaf beside its neighbours holds only a
// 16-byte bucket header. Values of bigValue bytes or fewer stay flat, and
// both forms read alike, so a store written before keeps its flat chunks
// (Compact moves them). A store holding nested values is not readable by
// a padfs that predates them: MinFormat has the mvcc layer raise its
// format, so that such a padfs refuses the store.
const bigValue = 4096

var bigKey = []byte{0}

// MinFormat is the mvcc store format that makes an older padfs refuse a
// store this driver wrote (kv.MinFormater).
func (s *Store) MinFormat() uint64 {
	if s.opts.Flat {
		return 0
	}
	return FormatNestedValues
}

// FormatNestedValues is the mvcc format of stores with nested values.
const FormatNestedValues = 4

// getValue returns the value of k in b, flat or nested; nil if absent.
func getValue(b *bbolt.Bucket, k []byte) []byte {
	if v := b.Get(k); v != nil {
		return v
	}
	return nested(b, k)
}

// entryValue is the value of the cursor entry (k, v) of b: a cursor gives a
// nested bucket's entry as a nil v.
func entryValue(b *bbolt.Bucket, k, v []byte) []byte {
	if v != nil {
		return v
	}
	return nested(b, k)
}

func nested(b *bbolt.Bucket, k []byte) []byte {
	if nb := b.Bucket(k); nb != nil {
		return nb.Get(bigKey)
	}
	return nil
}

// putValue puts v under k in b, nested if it is large (unless flat),
// replacing what was there in either form. bbolt keeps k and v until the
// transaction ends.
func putValue(b *bbolt.Bucket, k, v []byte, flat bool) error {
	if len(v) <= bigValue || flat {
		err := b.Put(k, v)
		if errors.Is(err, berrors.ErrIncompatibleValue) { // a nested value was there
			if err = b.DeleteBucket(k); err == nil {
				err = b.Put(k, v)
			}
		}
		return err
	}
	nb, err := b.CreateBucket(k)
	switch {
	case errors.Is(err, berrors.ErrBucketExists):
		nb, err = b.Bucket(k), nil
	case errors.Is(err, berrors.ErrIncompatibleValue): // a flat value was there
		if err = b.Delete(k); err == nil {
			nb, err = b.CreateBucket(k)
		}
	}
	if err != nil {
		return err
	}
	return nb.Put(bigKey, v)
}

// deleteValue deletes k from b, in either form.
func deleteValue(b *bbolt.Bucket, k []byte) error {
	err := b.Delete(k)
	if errors.Is(err, berrors.ErrIncompatibleValue) {
		err = b.DeleteBucket(k)
	}
	return err
}
