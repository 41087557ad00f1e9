package search

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/trigram"
)

// The wire protocol between a mount and its index worker (worker.go).
// A frame is
//
//	uint32 length of payload (big-endian)
//	uint32 CRC-32C of payload
//	payload: one msg (encodeMsg)
//
// The payload is a fixed sequence of fields, integers as uvarints and
// byte strings length-prefixed: simple enough that the decoder checks
// every bound (FuzzDecodeMsg), and a torn or damaged frame is an error,
// never a panic or a huge allocation.

// maxFrame bounds one frame: the largest document (MaxIndexedSize) plus
// room for its fields.
const maxFrame = MaxIndexedSize + 1<<20

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// errFrame is a frame that cannot be decoded.
var errFrame = errors.New("search worker protocol: bad frame")

// Message operations. Replies carry opReply and the request's ID;
// requests with ID 0 get no reply (their errors surface at the next
// flush or finish of the session).
const (
	opReply byte = iota + 1
	opCovered
	opIDs
	opSearch
	opStats
	opBegin
	opDel
	opDoc
	opFlush
	opFinish
	opAbort
	opDrop
	opMax
)

// msg is one request or reply. Which fields matter depends on Op.
type msg struct {
	Op  byte
	ID  uint64
	Sid mvcc.SessionID
	// Seq and HLC: covered position; Ino: a document's inode; N, N2, N3:
	// counts and sizes (batch bounds, result size).
	Seq, HLC, Ino, N, N2, N3 uint64
	// Path: document id or query argument; Field: query field; Text:
	// ranked-search query; Err: a reply's error.
	Path, Field, Text, Err string
	// HasData distinguishes an empty file from a document without content
	// (unindexed).
	HasData bool
	Data    []byte
	Strs    []string
	Floats  []float64
	Q       *trigram.Query
	// Stats: the reply to opStats.
	Stats *workerStats
}

// workerStats is what the worker reports of itself (BackendStats' fields
// that only the worker knows). The mount and its worker are always the
// same binary (the mount starts its own executable), so the frame layout
// changes freely with the code: no version of it needs decoding by
// another.
type workerStats struct {
	Indexed     uint64 // documents committed to bleve since the worker started
	QueryPolicy uint64 // the scheduling policy queries are answered at
	IdleRankers uint64 // rankers run at SCHED_IDLE
	MemLimit    int64  // soft memory limit in bytes (debug.SetMemoryLimit)
}

// maxQueryDepth bounds a decoded trigram query's nesting.
const maxQueryDepth = 256

func appendBytes(b, s []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendQuery(b []byte, q *trigram.Query) []byte {
	b = binary.AppendUvarint(b, uint64(q.Op))
	b = binary.AppendUvarint(b, uint64(len(q.Trigram)))
	for _, t := range q.Trigram {
		b = appendBytes(b, []byte(t))
	}
	b = binary.AppendUvarint(b, uint64(len(q.Sub)))
	for _, s := range q.Sub {
		b = appendQuery(b, s)
	}
	return b
}

// encodeMsg appends the payload of m to b.
func encodeMsg(b []byte, m *msg) []byte {
	b = append(b, m.Op)
	b = binary.AppendUvarint(b, m.ID)
	b = append(b, m.Sid[:]...)
	for _, v := range []uint64{m.Seq, m.HLC, m.Ino, m.N, m.N2, m.N3} {
		b = binary.AppendUvarint(b, v)
	}
	for _, s := range []string{m.Path, m.Field, m.Text, m.Err} {
		b = appendBytes(b, []byte(s))
	}
	if m.HasData {
		b = append(b, 1)
		b = appendBytes(b, m.Data)
	} else {
		b = append(b, 0)
	}
	b = binary.AppendUvarint(b, uint64(len(m.Strs)))
	for _, s := range m.Strs {
		b = appendBytes(b, []byte(s))
	}
	b = binary.AppendUvarint(b, uint64(len(m.Floats)))
	for _, f := range m.Floats {
		b = binary.BigEndian.AppendUint64(b, math.Float64bits(f))
	}
	if m.Q != nil {
		b = append(b, 1)
		b = appendQuery(b, m.Q)
	} else {
		b = append(b, 0)
	}
	if s := m.Stats; s != nil {
		b = append(b, 1)
		for _, v := range []uint64{s.Indexed, s.QueryPolicy, s.IdleRankers} {
			b = binary.AppendUvarint(b, v)
		}
		b = binary.AppendVarint(b, s.MemLimit)
	} else {
		b = append(b, 0)
	}
	return b
}

// decoder reads a payload; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errFrame
	}
	d.b = nil
}

func (d *decoder) byte1() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a number of elements, each of which takes at least min
// bytes: more than the rest of the payload holds is an error (so a bad
// count never allocates).
func (d *decoder) count(min int) int {
	n := d.uvarint()
	if n > uint64(len(d.b)/min) {
		d.fail()
		return 0
	}
	return int(n)
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	s := d.b[:n:n]
	d.b = d.b[n:]
	return s
}

func (d *decoder) query(depth int) *trigram.Query {
	if depth > maxQueryDepth {
		d.fail()
		return nil
	}
	op := d.uvarint()
	if op > uint64(trigram.Or) {
		d.fail()
		return nil
	}
	q := &trigram.Query{Op: trigram.Op(op)}
	if n := d.count(1); n > 0 {
		q.Trigram = make([]string, n)
		for i := range q.Trigram {
			q.Trigram[i] = string(d.bytes())
		}
	}
	if n := d.count(3); n > 0 {
		q.Sub = make([]*trigram.Query, n)
		for i := range q.Sub {
			if q.Sub[i] = d.query(depth + 1); d.err != nil {
				return nil
			}
		}
	}
	return q
}

// decodeMsg decodes one payload. Data aliases p.
func decodeMsg(p []byte) (*msg, error) {
	d := &decoder{b: p}
	m := &msg{Op: d.byte1()}
	if m.Op == 0 || m.Op >= opMax {
		return nil, errFrame
	}
	m.ID = d.uvarint()
	if len(d.b) < len(m.Sid) {
		return nil, errFrame
	}
	copy(m.Sid[:], d.b)
	d.b = d.b[len(m.Sid):]
	for _, v := range []*uint64{&m.Seq, &m.HLC, &m.Ino, &m.N, &m.N2, &m.N3} {
		*v = d.uvarint()
	}
	for _, s := range []*string{&m.Path, &m.Field, &m.Text, &m.Err} {
		*s = string(d.bytes())
	}
	switch d.byte1() {
	case 0:
	case 1:
		m.HasData = true
		m.Data = d.bytes()
	default:
		d.fail()
	}
	if n := d.count(1); n > 0 {
		m.Strs = make([]string, n)
		for i := range m.Strs {
			m.Strs[i] = string(d.bytes())
		}
	}
	if n := d.count(8); n > 0 {
		m.Floats = make([]float64, n)
		for i := range m.Floats {
			if len(d.b) < 8 {
				d.fail()
				break
			}
			m.Floats[i] = math.Float64frombits(binary.BigEndian.Uint64(d.b))
			d.b = d.b[8:]
		}
	}
	switch d.byte1() {
	case 0:
	case 1:
		m.Q = d.query(0)
	default:
		d.fail()
	}
	switch d.byte1() {
	case 0:
	case 1:
		s := &workerStats{}
		for _, v := range []*uint64{&s.Indexed, &s.QueryPolicy, &s.IdleRankers} {
			*v = d.uvarint()
		}
		s.MemLimit = d.varint()
		m.Stats = s
	default:
		d.fail()
	}
	if d.err != nil {
		return nil, d.err
	}
	if len(d.b) != 0 {
		return nil, fmt.Errorf("%w: %d trailing bytes", errFrame, len(d.b))
	}
	return m, nil
}

// writeFrame writes m as one frame (buf is scratch space, returned for
// reuse).
func writeFrame(w io.Writer, m *msg, buf []byte) ([]byte, error) {
	buf = encodeMsg(append(buf[:0], make([]byte, 8)...), m)
	p := buf[8:]
	if len(p) > maxFrame {
		return buf, fmt.Errorf("search worker protocol: frame of %d bytes over %d", len(p), maxFrame)
	}
	binary.BigEndian.PutUint32(buf[0:4], uint32(len(p)))
	binary.BigEndian.PutUint32(buf[4:8], crc32.Checksum(p, crcTable))
	_, err := w.Write(buf)
	return buf, err
}

// readFrame reads and decodes one frame.
func readFrame(r io.Reader) (*msg, error) {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[0:4])
	if n > maxFrame {
		return nil, fmt.Errorf("%w: length %d over %d", errFrame, n, maxFrame)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if crc32.Checksum(p, crcTable) != binary.BigEndian.Uint32(h[4:8]) {
		return nil, fmt.Errorf("%w: checksum mismatch", errFrame)
	}
	return decodeMsg(p)
}
