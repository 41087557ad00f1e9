package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"runtime/debug"
)

// bbolt's file starts with two meta pages (page 0 and 1); the valid one with
// the higher transaction id is current. Each page has a 16-byte header
// (id u64, flags u16, count u16, overflow u32), then the meta:
//
//	magic u32 | version u32 | pageSize u32 | flags u32 | root u64 | sequence u64
//	| freelist u64 | pgid u64 (pages in use) | txid u64 | checksum u64 (FNV-64a of the fields before it)
//
// in the machine's byte order. CheckFile reads them before bbolt maps the
// file: bbolt trusts them, and a page past the end of a truncated file is a
// SIGBUS inside the mapping, not an error.
const (
	metaOffset  = 16
	metaSize    = 64 // magic .. checksum
	metaMagic   = 0xED0CDAED
	metaVersion = 2
	maxPageSize = 64 << 10
)

// Meta is what a meta page says.
type Meta struct {
	Page     int // 0 or 1
	Valid    bool
	Problem  string // why it is not valid
	PageSize uint32
	Pages    uint64 // the high-water mark: pages 0..Pages-1 are in use
	TxID     uint64
}

// FileInfo is what CheckFile found.
type FileInfo struct {
	Size    int64
	Empty   bool    // a new file: bbolt will initialize it
	Metas   [2]Meta // as read; Metas[i].Page == i
	Current int     // the meta bbolt will use
}

// TxID is the transaction id of the current meta page.
func (fi *FileInfo) TxID() uint64 { return fi.Metas[fi.Current].TxID }

// NewerMetaDamaged reports whether the meta page bbolt will not use claims
// a newer transaction but fails its checksum: bbolt then silently serves an
// older state of the store.
func (fi *FileInfo) NewerMetaDamaged() (m Meta, ok bool) {
	o := fi.Metas[1-fi.Current]
	return o, !o.Valid && o.Problem == "checksum mismatch" && o.TxID > fi.TxID()
}

var native = binary.NativeEndian

// parseMeta decodes the meta at the start of page (which holds at least
// metaOffset+metaSize bytes).
func parseMeta(page []byte, n int) Meta {
	m := Meta{Page: n}
	if len(page) < metaOffset+metaSize {
		m.Problem = "truncated"
		return m
	}
	b := page[metaOffset : metaOffset+metaSize]
	magic, version := native.Uint32(b[0:]), native.Uint32(b[4:])
	m.PageSize = native.Uint32(b[8:])
	m.Pages, m.TxID = native.Uint64(b[40:]), native.Uint64(b[48:])
	h := fnv.New64a()
	h.Write(b[:56])
	switch {
	case magic != metaMagic:
		m.Problem = "not a bbolt meta page (bad magic)"
	case version != metaVersion:
		m.Problem = fmt.Sprintf("bbolt format version %d, want %d", version, metaVersion)
	case native.Uint64(b[56:]) != h.Sum64():
		m.Problem = "checksum mismatch"
	case m.PageSize < 512 || m.PageSize > maxPageSize || m.PageSize&(m.PageSize-1) != 0:
		m.Problem = fmt.Sprintf("page size %d", m.PageSize)
	case m.Pages < 4:
		m.Problem = fmt.Sprintf("%d pages in use", m.Pages)
	default:
		m.Valid = true
	}
	return m
}

// checkHeader checks the first bytes of a bbolt file of the given size
// (head holds min(size, 2*maxPageSize) bytes).
func checkHeader(head []byte, size int64) (*FileInfo, error) {
	fi := &FileInfo{Size: size}
	if size == 0 {
		fi.Empty = true
		return fi, nil
	}
	fi.Metas[0] = parseMeta(head, 0)
	// Page 1 starts one page in: at meta 0's page size, or else at the
	// first candidate size holding a valid meta.
	sizes := []uint32{4096, uint32(os.Getpagesize()), 8192, 16384, 32768, 65536}
	if fi.Metas[0].Valid {
		sizes = []uint32{fi.Metas[0].PageSize}
	}
	fi.Metas[1] = Meta{Page: 1, Problem: "truncated"}
	for _, ps := range sizes {
		if int64(ps) >= int64(len(head)) {
			continue
		}
		m := parseMeta(head[ps:], 1)
		if m.Valid || fi.Metas[1].Problem == "truncated" {
			fi.Metas[1] = m
		}
		if m.Valid {
			break
		}
	}
	m0, m1 := fi.Metas[0], fi.Metas[1]
	switch {
	case !m0.Valid && m0.Problem == "truncated":
		return fi, fmt.Errorf("%w: truncated to %d bytes, shorter than a meta page", ErrCorrupt, size)
	case !m0.Valid && !m1.Valid:
		return fi, fmt.Errorf("%w: %d bytes and no valid meta page (page 0: %s; page 1: %s)", ErrCorrupt, size, m0.Problem, m1.Problem)
	case m0.Valid && m1.Valid && m1.TxID > m0.TxID, !m0.Valid:
		fi.Current = 1
	}
	cur := fi.Metas[fi.Current]
	if o := fi.Metas[1-fi.Current]; o.Valid && o.PageSize != cur.PageSize {
		return fi, fmt.Errorf("%w: the meta pages disagree on the page size (%d, %d)", ErrCorrupt, o.PageSize, cur.PageSize)
	}
	if need := int64(cur.Pages) * int64(cur.PageSize); size < need {
		return fi, fmt.Errorf("%w: truncated: %d bytes, but meta page %d (txid %d) says %d pages of %d bytes (%d bytes)",
			ErrCorrupt, size, cur.Page, cur.TxID, cur.Pages, cur.PageSize, need)
	}
	return fi, nil
}

// CheckFile checks a bbolt file's meta pages and size before it is mapped.
// A missing file is reported as fs.ErrNotExist.
func CheckFile(path string) (*FileInfo, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	head := make([]byte, min(st.Size(), 2*maxPageSize))
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return checkHeader(head, st.Size())
}

// checkBeforeOpen refuses a file that bbolt would fault on.
func checkBeforeOpen(path string) error {
	_, err := CheckFile(path)
	switch {
	case err == nil, errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, ErrCorrupt):
		return fmt.Errorf("kv/bolt: %s: %w", path, err)
	}
	return fmt.Errorf("kv/bolt: open %s: %w", path, err)
}

// faultRecover, deferred with the result of debug.SetPanicOnFault(true),
// turns a fault on the memory map (a page the file no longer backs: SIGBUS)
// raised in the caller's callback into ErrCorrupt; any other panic goes on.
func (s *Store) faultRecover(old bool, err *error, p any) {
	debug.SetPanicOnFault(old)
	if p == nil {
		return
	}
	if _, ok := p.(interface{ Addr() uintptr }); ok {
		*err = s.broke(p)
		return
	}
	panic(p)
}

// broke records that bbolt panicked (on a corrupt page, or a fault on the
// mapping) and returns the error for it. bbolt's state is unknown after
// that, and it may hold its locks: every later call fails with the same
// error, and Close leaves the file to the process's exit.
func (s *Store) broke(p any) error {
	var err error
	if f, ok := p.(interface{ Addr() uintptr }); ok {
		err = fmt.Errorf("kv/bolt %s: %w: memory fault reading the file at %#x (truncated or unreadable?)", s.path, ErrCorrupt, f.Addr())
	} else {
		err = fmt.Errorf("kv/bolt %s: %w: %v", s.path, ErrCorrupt, p)
	}
	s.faulted.CompareAndSwap(nil, &err)
	return *s.faulted.Load()
}
