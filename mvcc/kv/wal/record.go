package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/padfs/padfs/mvcc/kv"
)

const (
	headerSize = 8 // len u32 + crc u32
	opPut      = 1
	opDelete   = 2
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errTorn means the bytes at the end of a segment are not a whole, valid
// record: the tail of a write cut short by a crash, or corruption.
var errTorn = errors.New("torn or corrupt record")

// errMalformed is a record that passed its CRC but does not parse: a bug or
// corruption, never a torn write.
var errMalformed = fmt.Errorf("%w: malformed record payload", ErrCorrupt)

// encodeRecord encodes the writes of one transaction, in key order, as one
// record ready for a single write(2).
func encodeRecord(writes *tree) ([]byte, error) {
	v, err := encodeRecordv(writes)
	if err != nil {
		return nil, err
	}
	return bytes.Join(v.bufs, nil), nil
}

// inlineVal is the largest value encodeRecordv copies into the record's
// own buffer; larger ones are written from where they are (pwritev).
const inlineVal = 4 << 10

// recordv is one record as pieces to write back to back: the framing, keys
// and small values in one buffer, large values as they are in the memtable
// entries, so that a commit of chunks does not copy them once more.
type recordv struct {
	bufs [][]byte
	n    int // bytes in all
}

// encodeRecordv is encodeRecord without copying the large values.
func encodeRecordv(writes *tree) (recordv, error) {
	size := binary.MaxVarintLen64
	writes.Scan(func(e entry) bool {
		size += 1 + 2*binary.MaxVarintLen64 + len(e.key)
		if len(e.val) <= inlineVal {
			size += len(e.val)
		}
		return true
	})
	// meta never grows past its capacity, so the pieces cut from it stay
	// valid.
	meta := make([]byte, headerSize, headerSize+size)
	meta = binary.AppendUvarint(meta, uint64(writes.Len()))
	var v recordv
	large := 0
	from := 0 // start of meta's piece not yet in v.bufs
	writes.Scan(func(e entry) bool {
		if e.del {
			meta = append(meta, opDelete)
			meta = binary.AppendUvarint(meta, uint64(len(e.key)))
			meta = append(meta, e.key...)
			return true
		}
		meta = append(meta, opPut)
		meta = binary.AppendUvarint(meta, uint64(len(e.key)))
		meta = append(meta, e.key...)
		meta = binary.AppendUvarint(meta, uint64(len(e.val)))
		if len(e.val) <= inlineVal {
			meta = append(meta, e.val...)
			return true
		}
		v.bufs = append(v.bufs, meta[from:len(meta):len(meta)], e.val)
		large += len(e.val)
		from = len(meta)
		return true
	})
	if from < len(meta) || len(v.bufs) == 0 {
		v.bufs = append(v.bufs, meta[from:len(meta):len(meta)])
	}
	v.n = len(meta) + large
	n := v.n - headerSize
	if uint64(n) > math.MaxUint32 {
		return recordv{}, fmt.Errorf("kv/wal: transaction of %d bytes is too large for one record", n)
	}
	binary.LittleEndian.PutUint32(meta[0:4], uint32(n))
	crc := crc32.Checksum(meta[0:4], castagnoli)
	for i, b := range v.bufs {
		if i == 0 {
			b = b[headerSize:]
		}
		crc = crc32.Update(crc, castagnoli, b)
	}
	binary.LittleEndian.PutUint32(meta[4:8], crc)
	return v, nil
}

func recordCRC(length, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(length, castagnoli), castagnoli, payload)
}

// nextRecord splits the first record off data and returns its payload and
// its whole size.
func nextRecord(data []byte) (payload []byte, size int, err error) {
	if len(data) < headerSize {
		return nil, 0, errTorn
	}
	n := binary.LittleEndian.Uint32(data[0:4])
	// A zero length is what a hole of zeros left by a power loss reads as.
	if n == 0 || uint64(n) > uint64(len(data)-headerSize) {
		return nil, 0, errTorn
	}
	payload = data[headerSize : headerSize+int(n)]
	if recordCRC(data[0:4], payload) != binary.LittleEndian.Uint32(data[4:8]) {
		return nil, 0, errTorn
	}
	return payload, headerSize + int(n), nil
}

// applyRecord performs the ops of one payload on tx.
func applyRecord(tx kv.Txn, payload []byte) error {
	bad := errMalformed
	count, n := binary.Uvarint(payload)
	if n <= 0 {
		return bad
	}
	p := payload[n:]
	field := func() ([]byte, bool) {
		l, n := binary.Uvarint(p)
		if n <= 0 || l > uint64(len(p)-n) {
			return nil, false
		}
		f := p[n : n+int(l)]
		p = p[n+int(l):]
		return f, true
	}
	for ; count > 0; count-- {
		if len(p) == 0 {
			return bad
		}
		op := p[0]
		p = p[1:]
		key, ok := field()
		if !ok {
			return bad
		}
		switch op {
		case opPut:
			val, ok := field()
			if !ok {
				return bad
			}
			// payload is the caller's until tx ends (replay reads each
			// segment into its own buffer).
			if err := kv.PutStable(tx, key, val); err != nil {
				return err
			}
		case opDelete:
			if err := tx.Delete(key); err != nil {
				return err
			}
		default:
			return bad
		}
	}
	if len(p) != 0 {
		return bad
	}
	return nil
}
