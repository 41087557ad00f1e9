package mvcc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"

	"github.com/fxamacker/cbor/v2"
)

// FormatVersion is the newest on-disk format this build reads; a store with
// a newer one is refused at open with ErrFormat. New stores start at format
// 1, move to 2 with their first keyed xattr (xattr.go), to 3 with their
// first live-entry index (liveidx.go) and to 4 when a driver that keeps
// large values apart opens them (kv/bolt's nested values: the records are
// the same, but a padfs before format 4 would find such a value missing).
const FormatVersion = formatNestedValues

// formatNestedValues is the store format whose bolt file may keep large
// values in nested buckets (kv/bolt.FormatNestedValues).
const formatNestedValues = 4

// Records are CBOR maps with small integer keys (fields can be added without
// rewriting old records), framed as crc32c(payload)[4] || payload so that a
// flipped bit is reported as ErrCorrupt naming the key, never decoded.
//
// Names, paths and symlink targets are bytes (Linux allows any byte but '/'
// and NUL in a name), kept in Go strings and written as CBOR text strings
// that need not be valid UTF-8. The decoder accepts such text: stores
// written before it did hold it too, and refusing it made a whole session
// unreadable.

// Hash is a SHA-256 content address.
type Hash [32]byte

// Extent is a run of file content: a chunk, or a hole of zeros (Chunk nil).
// A chunk is at most 256 KiB; a hole may be as long as MaxFileSize. Len was
// a uint32 before holes could be long: CBOR encodes an unsigned integer in
// its shortest form whatever the Go type, so old records read the same.
type Extent struct {
	Chunk []byte `cbor:"1,keyasint,omitempty"` // SHA-256 of the chunk; nil for a hole
	Len   uint64 `cbor:"2,keyasint"`
}

// Inode is one version of a file, directory or symlink.
type Inode struct {
	Ino    Ino    `cbor:"1,keyasint"`
	Mode   uint32 `cbor:"2,keyasint"` // type bits (syscall.S_IFREG...) | permissions
	Uid    uint32 `cbor:"3,keyasint"`
	Gid    uint32 `cbor:"4,keyasint"`
	Nlink  uint32 `cbor:"5,keyasint"` // 0: unlinked (may still be open)
	Size   uint64 `cbor:"6,keyasint"`
	Atime  int64  `cbor:"7,keyasint"` // ns since the epoch
	Mtime  int64  `cbor:"8,keyasint"`
	Ctime  int64  `cbor:"9,keyasint"`
	Rdev   uint32 `cbor:"10,keyasint,omitempty"`
	Target string `cbor:"11,keyasint,omitempty"` // symlink target
	// Parent and Name locate the inode's most recent link, so that the commit
	// log can name paths without the caller spelling them out.
	Parent Ino    `cbor:"12,keyasint,omitempty"`
	Name   string `cbor:"13,keyasint,omitempty"`
	// Xattrs is the inline attribute set of format 1 stores, read but no
	// longer written: attributes have chains of their own (xattr.go).
	Xattrs map[string][]byte `cbor:"14,keyasint,omitempty"`
	// Content: Inline for small files, else Extents in file order.
	Inline  []byte   `cbor:"15,keyasint,omitempty"`
	Extents []Extent `cbor:"16,keyasint,omitempty"`
	// ContentHash is the SHA-256 of the whole content (what sha256sum
	// prints), or nil: since this build a content of more than one chunk,
	// or with holes, has none (each byte is hashed once, for its chunk).
	ContentHash []byte `cbor:"17,keyasint,omitempty"`
	// ContentHLC is the commit that last changed the content; equal values
	// mean equal bytes (the fs layer keeps the kernel's page cache on it).
	ContentHLC HLC `cbor:"18,keyasint,omitempty"`

	// HLC is the version's own commit stamp (from the key, not stored).
	HLC HLC `cbor:"-"`
}

// IsDir reports whether the inode is a directory.
func (n *Inode) IsDir() bool { return n.Mode&sIFMT == sIFDIR }

// IsRegular reports whether the inode is a regular file.
func (n *Inode) IsRegular() bool { return n.Mode&sIFMT == sIFREG }

// IsSymlink reports whether the inode is a symbolic link.
func (n *Inode) IsSymlink() bool { return n.Mode&sIFMT == sIFLNK }

// Blocks returns st_blocks (512-byte units) of the stored bytes: holes and
// empty files take none.
func (n *Inode) Blocks() uint64 {
	var b uint64
	if len(n.Inline) > 0 {
		b = uint64(len(n.Inline))
	}
	for _, e := range n.Extents {
		if e.Chunk != nil {
			b += uint64(e.Len)
		}
	}
	if n.IsSymlink() {
		b = uint64(len(n.Target))
	}
	return (b + 511) / 512
}

// Dentry is one version of a directory entry; Ino 0 is a tombstone.
type Dentry struct {
	Ino  Ino    `cbor:"1,keyasint,omitempty"`
	Type uint32 `cbor:"2,keyasint,omitempty"` // mode type bits of the target

	Name string `cbor:"-"` // from the key
	HLC  HLC    `cbor:"-"` // from the key
}

// SessionHeader is written when a session is created; only RenameSession
// changes it (the name).
type SessionHeader struct {
	ID      SessionID `cbor:"1,keyasint"`
	Name    string    `cbor:"2,keyasint,omitempty"`
	Created HLC       `cbor:"3,keyasint"`
	Root    Ino       `cbor:"4,keyasint"`
	// Parent and ForkedAt are set when the session was forked from another.
	Parent   *SessionID `cbor:"5,keyasint,omitempty"`
	ForkedAt HLC        `cbor:"6,keyasint,omitempty"`
	// Busy is set while a purge or redaction of the session runs (JobPurge,
	// JobRedact; job.go): Header then refuses the session.
	Busy string `cbor:"16,keyasint,omitempty" json:"-"`
}

// sessionState is one version of a session's lifecycle state.
type sessionState struct {
	Forgotten bool `cbor:"1,keyasint,omitempty"`
}

// counters are a session's derived, mutable counters.
type counters struct {
	NextSeq uint64 `cbor:"1,keyasint"`
	LastHLC HLC    `cbor:"2,keyasint"`
}

// Event is one entry of a session's commit log: every commit appends exactly
// one, with a per-session sequence number that has no gaps.
type Event struct {
	Seq   uint64 `cbor:"1,keyasint" json:"seq"`
	HLC   HLC    `cbor:"2,keyasint" json:"-"`
	Op    Op     `cbor:"3,keyasint" json:"op"`
	Path  string `cbor:"4,keyasint,omitempty" json:"path,omitempty"`
	Path2 string `cbor:"5,keyasint,omitempty" json:"to,omitempty"` // rename target, link name, fork parent
	Ino   Ino    `cbor:"6,keyasint,omitempty" json:"ino,omitempty"`
	Size  int64  `cbor:"7,keyasint,omitempty" json:"size,omitempty"`
	Hash  string `cbor:"8,keyasint,omitempty" json:"sha256,omitempty"`
	// Detail carries op-specific facts (e.g. a redaction's version count).
	Detail string `cbor:"9,keyasint,omitempty" json:"detail,omitempty"`
	// Also are a restore's further roots (Path is the first).
	Also []string `cbor:"10,keyasint,omitempty" json:"-"`
}

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	// Deterministic encoding: equal records are equal bytes.
	encMode = sync.OnceValues(func() (cbor.UserBufferEncMode, error) { return cbor.CoreDetEncOptions().UserBufferEncMode() })
	decMode = sync.OnceValues(func() (cbor.DecMode, error) {
		return cbor.DecOptions{MaxArrayElements: 1 << 26, MaxMapPairs: 1 << 20,
			UTF8: cbor.UTF8DecodeInvalid}.DecMode()
	})
)

// encode frames v as crc32c || cbor(v). It refuses a payload the decoder
// would not read back (its limits), so that a commit fails before anything
// is written instead of committing a record that bricks its readers.
func encode(v any) ([]byte, error) {
	em, err := encMode()
	if err != nil {
		return nil, err
	}
	payload, err := em.Marshal(v)
	if err != nil {
		return nil, err
	}
	dm, err := decMode()
	if err != nil {
		return nil, err
	}
	if err := dm.Wellformed(payload); err != nil {
		return nil, fmt.Errorf("record would not decode: %w", err)
	}
	return frame(payload), nil
}

// encodeTo is encode into buf, reset first: the record is valid until buf
// is next written (a commit's puts, which the store copies).
func encodeTo(buf *bytes.Buffer, v any) ([]byte, error) {
	em, err := encMode()
	if err != nil {
		return nil, err
	}
	buf.Reset()
	buf.Write([]byte{0, 0, 0, 0}) // the checksum, once the payload is known
	if err := em.MarshalToBuffer(v, buf); err != nil {
		return nil, err
	}
	dm, err := decMode()
	if err != nil {
		return nil, err
	}
	out := buf.Bytes()
	if err := dm.Wellformed(out[4:]); err != nil {
		return nil, fmt.Errorf("record would not decode: %w", err)
	}
	binary.BigEndian.PutUint32(out, crc32.Checksum(out[4:], castagnoli))
	return out, nil
}

func frame(payload []byte) []byte {
	out := make([]byte, 4+len(payload))
	binary.BigEndian.PutUint32(out, crc32.Checksum(payload, castagnoli))
	copy(out[4:], payload)
	return out
}

// unframe checks the checksum; k names the key in the error.
func unframe(k, val []byte) ([]byte, error) {
	if len(val) < 4 || binary.BigEndian.Uint32(val) != crc32.Checksum(val[4:], castagnoli) {
		return nil, fmt.Errorf("%w: checksum mismatch at key %q", ErrCorrupt, k)
	}
	return val[4:], nil
}

// decode checks and decodes a framed record stored under k into v.
func decode(k, val []byte, v any) error {
	payload, err := unframe(k, val)
	if err != nil {
		return err
	}
	dm, err := decMode()
	if err != nil {
		return err
	}
	if err := dm.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("%w: undecodable record at key %q: %v", ErrCorrupt, k, err)
	}
	return nil
}
