package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/padfs/padfs/mvcc/kv"
)

// The fold record, dir/STATE: after every fold into the base the WAL
// notes how far the base has come (its kv.Generation) outside the base's
// own file. bbolt keeps two meta pages and silently falls back to the
// older one when the newer is damaged, which loses the last commits
// without a word; Open compares the base with the record and refuses a
// base that went back in time.
//
//	"PADFSWS1" | file u64le | txid u64le | segment u64le | crc32c u32le (over the 32 bytes before it)
const (
	stateFile  = "STATE"
	stateMagic = "PADFSWS1"
	stateSize  = 8 + 3*8 + 4
)

// ErrRolledBack means the base is older than what the WAL folded into it.
var ErrRolledBack = errors.New("store rolled back")

// State is the fold record.
type State struct {
	Gen     kv.Generation
	Segment uint64 // the last segment folded (0: none yet)
}

// RollbackError is a base found older than the fold record.
type RollbackError struct {
	Path   string // the fold record
	Record State
	Found  kv.Generation
	Detail string // what the base is like instead, for a missing base
}

func (e *RollbackError) Error() string {
	if e.Detail != "" {
		return fmt.Sprintf("kv/wal: %s: %s, but %s records bolt txid %d after the last fold", ErrRolledBack, e.Detail, e.Path, e.Record.Gen.TxID)
	}
	return fmt.Sprintf("kv/wal: %s: the store is at bolt txid %d, but %s records txid %d after the last fold (a damaged meta page? commits after txid %d are gone)",
		ErrRolledBack, e.Found.TxID, e.Path, e.Record.Gen.TxID, e.Found.TxID)
}

func (e *RollbackError) Unwrap() error { return ErrRolledBack }

func encodeState(st State) []byte {
	b := make([]byte, 0, stateSize)
	b = append(b, stateMagic...)
	b = binary.LittleEndian.AppendUint64(b, st.Gen.File)
	b = binary.LittleEndian.AppendUint64(b, st.Gen.TxID)
	b = binary.LittleEndian.AppendUint64(b, st.Segment)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeState(b []byte) (State, error) {
	if len(b) != stateSize || string(b[:8]) != stateMagic {
		return State{}, fmt.Errorf("%w: not a fold record (%d bytes)", ErrCorrupt, len(b))
	}
	if crc32.Checksum(b[:stateSize-4], castagnoli) != binary.LittleEndian.Uint32(b[stateSize-4:]) {
		return State{}, fmt.Errorf("%w: fold record checksum mismatch", ErrCorrupt)
	}
	return State{
		Gen:     kv.Generation{File: binary.LittleEndian.Uint64(b[8:]), TxID: binary.LittleEndian.Uint64(b[16:])},
		Segment: binary.LittleEndian.Uint64(b[24:]),
	}, nil
}

// StatePath is the fold record of the WAL in dir.
func StatePath(dir string) string { return filepath.Join(dir, stateFile) }

// ReadState reads the fold record of the WAL in dir; ok is false if there
// is none (a WAL that never folded, or made before the record existed).
func ReadState(dir string) (st State, ok bool, err error) {
	b, err := os.ReadFile(StatePath(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, false, nil
	}
	if err != nil {
		return State{}, false, fmt.Errorf("kv/wal: %w", err)
	}
	st, err = decodeState(b)
	if err != nil {
		return State{}, false, fmt.Errorf("kv/wal: %s: %w", StatePath(dir), err)
	}
	return st, true, nil
}

// RemoveState deletes the fold record: the base as it is becomes the
// truth (fsck --repair's acceptance of a rolled-back store).
func RemoveState(dir string) error {
	if err := os.Remove(StatePath(dir)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("kv/wal: %w", err)
	}
	return syncDir(dir)
}

// writeState replaces the fold record atomically and durably.
func writeState(dir string, st State) error {
	tmp := StatePath(dir) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("kv/wal: fold record: %w", err)
	}
	_, err = f.Write(encodeState(st))
	if err == nil {
		err = fdatasync(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, StatePath(dir))
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("kv/wal: fold record %s: %w", StatePath(dir), err)
	}
	return nil
}

// checkState refuses a base older than the fold record. A base in a
// different file (a compaction's copy renamed over it) restarts the count.
func (s *Store) checkState() error { return CheckBase(s.dir, s.base) }

// CheckBase is Open's check of base against the fold record of the WAL in
// dir: a *RollbackError if the base went back in time.
func CheckBase(dir string, base kv.Store) error {
	g, ok := base.(kv.Generationer)
	if !ok {
		return nil
	}
	st, found, err := ReadState(dir)
	if err != nil || !found {
		return err
	}
	cur, err := g.Generation()
	if err != nil {
		return err
	}
	if cur.File == st.Gen.File && cur.TxID < st.Gen.TxID {
		return &RollbackError{Path: StatePath(dir), Record: st, Found: cur}
	}
	return nil
}

// noteFold records the base's generation after a fold. A failure only
// leaves an older record, which checks nothing it should not: it is
// logged, not returned.
func (s *Store) noteFold(seg uint64) {
	g, ok := s.base.(kv.Generationer)
	if !ok {
		return
	}
	cur, err := g.Generation()
	if err == nil {
		err = writeState(s.dir, State{Gen: cur, Segment: seg})
	}
	if err != nil {
		s.log.Warn("kv/wal: cannot record the fold", "dir", s.dir, "err", err)
	}
}
