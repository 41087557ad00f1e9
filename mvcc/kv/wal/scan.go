package wal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/padfs/padfs/mvcc/kv"
)

// CorruptError is a bad record that is not a torn tail: it is in an older
// segment, or valid records follow it. It wraps ErrCorrupt.
type CorruptError struct {
	Path   string // the segment file
	Offset int64  // where the bad record starts
	Reason string
	After  int // whole records found after it in the same file
}

func (e *CorruptError) Error() string {
	after := ""
	if e.After > 0 {
		after = fmt.Sprintf(", %d intact records after it", e.After)
	}
	return fmt.Sprintf("kv/wal: %s: record at offset %d: %s (%s%s)", e.Path, e.Offset, ErrCorrupt, e.Reason, after)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// segmentDamage is the outcome of scanning one segment.
type segmentDamage struct {
	end    int    // offset of the first byte that is not part of a whole, valid record
	reason string // why the record at end is bad ("" if end == len(data))
	resync int    // offset of the first valid record after end, or -1
}

// scanSegment calls fn with each whole record of data, in order, until the
// first bad one. A record whose checksum passes but whose payload does not
// parse stops the scan too. fn's error is returned as is.
func scanSegment(data []byte, fn func(off int, payload []byte) error) (segmentDamage, error) {
	off := 0
	for off < len(data) {
		payload, n, err := nextRecord(data[off:])
		if err != nil {
			return segmentDamage{end: off, reason: tornReason(data[off:]), resync: resync(data, off)}, nil
		}
		if _, err := recordKeys(payload); err != nil {
			return segmentDamage{end: off, reason: "malformed payload", resync: resync(data, off)}, nil
		}
		if fn != nil {
			if err := fn(off, payload); err != nil {
				return segmentDamage{}, err
			}
		}
		off += n
	}
	return segmentDamage{end: off, resync: -1}, nil
}

// tornReason says what is wrong with the record at the start of data.
func tornReason(data []byte) string {
	switch _, _, err := nextRecord(data); {
	case err == nil:
		return "malformed payload"
	case len(data) < headerSize:
		return fmt.Sprintf("%d bytes, shorter than a record header", len(data))
	}
	n := uint32(data[0]) | uint32(data[1])<<8 | uint32(data[2])<<16 | uint32(data[3])<<24
	switch {
	case n == 0:
		return "zero length"
	case uint64(n) > uint64(len(data)-headerSize):
		return fmt.Sprintf("length %d runs past the end of the file", n)
	}
	return "checksum mismatch"
}

// resync returns the offset of the first valid record that starts after
// from, or -1. It decides whether a bad record is a torn tail: a write cut
// short by a crash leaves nothing valid after it.
func resync(data []byte, from int) int {
	for off := from + 1; off+headerSize < len(data); off++ {
		if payload, _, err := nextRecord(data[off:]); err == nil {
			if _, err := recordKeys(payload); err == nil {
				return off
			}
		}
	}
	return -1
}

// countFrom counts the valid records chained from off and returns their
// writes.
func countFrom(data []byte, off int) (records int, ops []Op) {
	for off >= 0 && off < len(data) {
		payload, n, err := nextRecord(data[off:])
		if err != nil {
			off = resync(data, off)
			continue
		}
		c := keyCollector{vals: true}
		if err := applyRecord(&c, payload); err != nil {
			off = resync(data, off)
			continue
		}
		records++
		ops = append(ops, c.ops...)
		off += n
	}
	return records, ops
}

// checkSegment scans one segment's data as Open does: a bad record is a
// torn tail only at the end of the newest segment with nothing valid after
// it. It returns the length of the valid prefix and the torn bytes.
func checkSegment(path string, data []byte, newest bool, fn func(off int, payload []byte) error) (valid, torn int, err error) {
	d, err := scanSegment(data, fn)
	if err != nil {
		return 0, 0, err
	}
	if d.end == len(data) {
		return d.end, 0, nil
	}
	if newest && d.resync < 0 {
		return d.end, len(data) - d.end, nil
	}
	after, _ := countFrom(data, d.resync)
	return d.end, 0, &CorruptError{Path: path, Offset: int64(d.end), Reason: d.reason, After: after}
}

// recordKeys returns the keys a record's payload writes, or errMalformed.
func recordKeys(payload []byte) ([][]byte, error) {
	var c keyCollector
	if err := applyRecord(&c, payload); err != nil {
		return nil, err
	}
	return c.keys, nil
}

// keyCollector is a kv.Txn that notes the writes.
type keyCollector struct {
	keys [][]byte
	ops  []Op
	vals bool // keep the ops too
}

// Op is one write of a record.
type Op struct {
	Key, Value []byte
	Delete     bool
}

func (c *keyCollector) Get([]byte) ([]byte, error) { return nil, nil }
func (c *keyCollector) Scan(_, _ []byte, _ func(k, v []byte) (bool, error)) error {
	return nil
}
func (c *keyCollector) Put(k, v []byte) error {
	c.keys = append(c.keys, k)
	if c.vals {
		c.ops = append(c.ops, Op{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)})
	}
	return nil
}
func (c *keyCollector) Delete(k []byte) error {
	c.keys = append(c.keys, k)
	if c.vals {
		c.ops = append(c.ops, Op{Key: append([]byte(nil), k...), Delete: true})
	}
	return nil
}

var _ kv.Txn = (*keyCollector)(nil)

// Lost describes log bytes that Salvage moved out of the WAL.
type Lost struct {
	Segment    string // the segment file the bytes came from
	Offset     int64  // where they started in it
	Bytes      int64  // how many
	Reason     string // what was wrong at Offset ("" for a later segment moved whole)
	Records    int    // whole, valid records among them: acknowledged commits lost
	Ops        []Op   // the writes of those records
	Quarantine string // the file now holding the bytes
}

// Salvage keeps the intact prefix of the log in dir: from the first
// damaged record on (see CorruptError), every byte is moved into files in
// quarantineDir and the segments are cut there. A torn tail is left for
// Open to drop. It returns what was moved; nothing if the log is intact.
func Salvage(dir, quarantineDir string) ([]Lost, error) {
	lock, err := lockDir(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	segs, err := listSegments(dir)
	if err != nil {
		return nil, err
	}
	var lost []Lost
	cut := false // an earlier segment was damaged: move whole segments
	for i, g := range segs {
		data, err := os.ReadFile(g.path)
		if err != nil {
			return lost, fmt.Errorf("kv/wal: salvage: %w", err)
		}
		from, reason := 0, ""
		if !cut {
			valid, _, err := checkSegment(g.path, data, i == len(segs)-1, nil)
			var ce *CorruptError
			if !errors.As(err, &ce) {
				if err != nil {
					return lost, err
				}
				continue
			}
			from, reason, cut = valid, ce.Reason, true
		}
		start := from
		if reason != "" {
			start = resync(data, from) // the bad record itself is unreadable
		}
		records, ops := countFrom(data, start)
		q, err := quarantine(quarantineDir, g.path, from, data[from:])
		if err != nil {
			return lost, err
		}
		lost = append(lost, Lost{Segment: g.path, Offset: int64(from), Bytes: int64(len(data) - from),
			Reason: reason, Records: records, Ops: ops, Quarantine: q})
		if err := cutSegment(g.path, int64(from)); err != nil {
			return lost, err
		}
	}
	if len(lost) > 0 {
		if err := syncDir(dir); err != nil {
			return lost, err
		}
	}
	return lost, nil
}

// quarantine writes data, taken from path at off, durably into dir.
func quarantine(dir, path string, off int, data []byte) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("kv/wal: quarantine: %w", err)
	}
	q := filepath.Join(dir, fmt.Sprintf("%s.from-%d", filepath.Base(path), off))
	for n := 1; ; n++ {
		if _, err := os.Lstat(q); errors.Is(err, fs.ErrNotExist) {
			break
		}
		q = filepath.Join(dir, fmt.Sprintf("%s.from-%d.%d", filepath.Base(path), off, n))
	}
	f, err := os.OpenFile(q, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("kv/wal: quarantine: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		return "", fmt.Errorf("kv/wal: quarantine %s: %w", q, err)
	}
	return q, nil
}

// cutSegment truncates a segment to size durably; an empty one is removed.
func cutSegment(path string, size int64) error {
	if size == 0 {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("kv/wal: salvage: %w", err)
		}
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("kv/wal: salvage: %w", err)
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("kv/wal: salvage: cut %s: %w", path, err)
	}
	return nil
}
