package wal

import (
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
	size := binary.MaxVarintLen64
	writes.Scan(func(e *entry) bool {
		size += 1 + 2*binary.MaxVarintLen64 + len(e.key) + len(e.val)
		return true
	})
	buf := make([]byte, headerSize, headerSize+size)
	buf = binary.AppendUvarint(buf, uint64(writes.Len()))
	writes.Scan(func(e *entry) bool {
		if e.del {
			buf = append(buf, opDelete)
			buf = binary.AppendUvarint(buf, uint64(len(e.key)))
			buf = append(buf, e.key...)
			return true
		}
		buf = append(buf, opPut)
		buf = binary.AppendUvarint(buf, uint64(len(e.key)))
		buf = append(buf, e.key...)
		buf = binary.AppendUvarint(buf, uint64(len(e.val)))
		buf = append(buf, e.val...)
		return true
	})
	n := len(buf) - headerSize
	if uint64(n) > math.MaxUint32 {
		return nil, fmt.Errorf("kv/wal: transaction of %d bytes is too large for one record", n)
	}
	binary.LittleEndian.PutUint32(buf[0:4], uint32(n))
	binary.LittleEndian.PutUint32(buf[4:8], recordCRC(buf[0:4], buf[headerSize:]))
	return buf, nil
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
			if err := tx.Put(key, val); err != nil {
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
