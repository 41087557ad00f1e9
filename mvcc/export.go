package mvcc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
)

// Getting work out: a session's tree as of T (ExportTree, for tar and
// host-directory exports), and a whole session with its history as one
// checksummed archive (ExportSession; ImportSession reads it back).
//
// Session archive format, version 1:
//
//	file    = magic frame{'V'} frame{'K' | 'C'}* frame{'T'} EOF
//	magic   = "padfs-session\n"                                  (14 bytes)
//	frame   = type[1] length[4] payload[length] crc32c[4]         (crc of type, length and payload)
//	'V'     = version[4] format[8] session[16]                    (format: the store format the records need)
//	'K'     = keylen[4] key value                                 (a key of the session and its stored value)
//	'C'     = sha256[32] value                                    (a chunk the session references, as stored: crc32c[4] bytes)
//	'T'     = count[8] sha256[32]                                 (count of K and C frames; SHA-256 of every byte before the trailer)
//
// Integers are big-endian. The K records are every key under the
// session's prefixes (sessionPrefixes: header, state, counters,
// checkpoints, log, entries, inodes, xattrs) with the value exactly as
// stored, so every record keeps its own CRC and HLC; chunk references
// ("R" keys) and live-entry keys ("L") are derived again on import. A fork's records are complete
// (Fork copies the tree's metadata; the chunks are exported like any
// other), so a fork exports and imports without its parent; its header
// still names the parent and the HLC it was forked from, as provenance.

const (
	archiveMagic   = "padfs-session\n"
	archiveVersion = 1
	// maxArchiveFrame bounds one frame's payload (an inode record of a
	// file of many extents is the largest).
	maxArchiveFrame = 1 << 30
)

// ErrArchive means a session archive is damaged, truncated or not one.
var ErrArchive = errors.New("not a valid padfs session archive")

// ArchiveInfo describes a session archive.
type ArchiveInfo struct {
	Version int
	Format  uint64
	Session SessionID
	Count   uint64 // K and C records
}

// archiveWriter frames records onto w and hashes every byte.
type archiveWriter struct {
	w     *bufio.Writer
	sum   hash.Hash
	count uint64
	err   error
}

func (aw *archiveWriter) write(b []byte) {
	if aw.err != nil {
		return
	}
	aw.sum.Write(b)
	_, aw.err = aw.w.Write(b)
}

func (aw *archiveWriter) frame(typ byte, parts ...[]byte) {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	head := make([]byte, 5)
	head[0] = typ
	binary.BigEndian.PutUint32(head[1:], uint32(n))
	crc := crc32.Update(0, castagnoli, head)
	aw.write(head)
	for _, p := range parts {
		crc = crc32.Update(crc, castagnoli, p)
		aw.write(p)
	}
	aw.write(binary.BigEndian.AppendUint32(nil, crc))
	if typ == 'K' || typ == 'C' {
		aw.count++
	}
}

// ExportSession writes session sid with all of its history (every version,
// the log, checkpoints) and the chunks it references to w as a session
// archive. The metadata is read in one snapshot; the chunks, which never
// change, each in a short one.
//
// ctx ends it early (between chunks) with ctx.Err(); what was written to w
// by then is no archive (it has no trailer).
func (s *Store) ExportSession(ctx context.Context, sid SessionID, w io.Writer) (*ArchiveInfo, error) {
	recs, chunks, format, err := s.exportRecords(sid)
	if err != nil {
		return nil, err
	}
	aw := &archiveWriter{w: bufio.NewWriterSize(w, 1<<20), sum: sha256.New()}
	aw.write([]byte(archiveMagic))
	aw.frame('V', binary.BigEndian.AppendUint32(nil, archiveVersion), u64(format), sid[:])
	for _, r := range recs {
		aw.frame('K', binary.BigEndian.AppendUint32(nil, uint32(len(r.k))), r.k, r.v)
	}
	for _, h := range chunks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, err := s.exportChunk(sid, h)
		if err != nil {
			return nil, err
		}
		aw.frame('C', h[:], v)
		if aw.err != nil {
			break
		}
	}
	count := aw.count
	digest := aw.sum.Sum(nil)
	aw.frame('T', u64(count), digest)
	if aw.err == nil {
		aw.err = aw.w.Flush()
	}
	if aw.err != nil {
		return nil, fmt.Errorf("export session %s: %w", sid, aw.err)
	}
	return &ArchiveInfo{Version: archiveVersion, Format: format, Session: sid, Count: count}, nil
}

// exportRecords reads, in one snapshot, the records of session sid an
// archive holds, the chunks it references and the store format they need.
func (s *Store) exportRecords(sid SessionID) ([]archiveRec, []Hash, uint64, error) {
	var recs []archiveRec
	var chunks []Hash
	format := uint64(formatInline)
	err := s.View(func(t *ReadTx) error {
		if _, err := t.Header(sid); err != nil {
			return err
		}
		for _, p := range sessionPrefixes(sid) {
			if err := scanKeys(t.r, p, func(k, v []byte) error {
				v, keep, err := exportValue(k, v)
				if err != nil || !keep {
					return err
				}
				recs = append(recs, archiveRec{k, v})
				if p[0] == pXattr {
					format = formatXattrChains
				}
				return nil
			}); err != nil {
				return err
			}
		}
		cs, err := t.sessionChunks(sid)
		chunks = sortedHashes(cs)
		return err
	})
	return recs, chunks, format, err
}

// exportValue is the value an archive holds for record k; false for a
// record it leaves out.
func exportValue(k, v []byte) ([]byte, bool, error) {
	switch k[0] {
	case pLive:
		return nil, false, nil // derived from the entries: import rebuilds it
	case pSuperseded:
		// S records name keys by inode number, which import renumbers:
		// the importing store prunes this history by a scan of its chains
		// instead.
		return nil, false, nil
	case pPrune:
		// Keep the prune point and the kept checkpoints; what the records
		// and counts covered is the source's.
		ps := pruneState{}
		if err := decode(k, v, &ps); err != nil {
			return nil, false, err
		}
		ps.RecordsSince, ps.ScannedTo, ps.Counted = 0, 0, false
		v, err := encode(&ps)
		return v, err == nil, err
	}
	return v, true, nil
}

// exportChunk reads chunk h, as stored, in a short read transaction of
// its own and checks its frame.
func (s *Store) exportChunk(sid SessionID, h Hash) ([]byte, error) {
	var v []byte
	if err := s.View(func(t *ReadTx) error {
		got, err := t.r.Get(chunkKey(h))
		if got == nil && err == nil {
			err = fmt.Errorf("%w: session %s references missing chunk %x", ErrCorrupt, sid, h)
		}
		v = append(v[:0], got...)
		return err
	}); err != nil {
		return nil, err
	}
	if _, err := unframe(chunkKey(h), v); err != nil {
		return nil, err
	}
	return v, nil
}

// archiveReader reads frames and hashes the bytes it consumed.
type archiveReader struct {
	r   *bufio.Reader
	sum hash.Hash
	off int64
	buf bytes.Buffer
}

func (ar *archiveReader) errf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrArchive, ar.off, fmt.Sprintf(format, args...))
}

// next reads one frame; the payload is valid until the next call.
func (ar *archiveReader) next() (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(ar.r, head[:]); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return 0, nil, ar.errf("truncated (no trailer)")
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n > maxArchiveFrame {
		return 0, nil, ar.errf("frame of %d bytes", n)
	}
	ar.buf.Reset()
	// CopyN grows the buffer as bytes arrive: a damaged length does not
	// allocate a gigabyte for a short file.
	if _, err := io.CopyN(&ar.buf, ar.r, int64(n)+4); err != nil {
		if errors.Is(err, io.EOF) {
			return 0, nil, ar.errf("truncated frame")
		}
		return 0, nil, err
	}
	b := ar.buf.Bytes()
	payload, tail := b[:n], b[n:]
	crc := crc32.Update(crc32.Update(0, castagnoli, head[:]), castagnoli, payload)
	if binary.BigEndian.Uint32(tail) != crc {
		return 0, nil, ar.errf("checksum mismatch in a %q frame", head[0])
	}
	if head[0] != 'T' {
		ar.sum.Write(head[:])
		ar.sum.Write(b)
	}
	ar.off += 5 + int64(n) + 4
	return head[0], payload, nil
}

// ReadSessionArchive checks a session archive from r and calls fn for each
// record: kind 'K' (a session key and its stored value) or 'C' (a chunk's
// hash and stored value; the hash is checked). k and v are valid only
// during the call. It returns nil only when the whole archive is intact
// (every frame's CRC, the count and the whole-file SHA-256 in the trailer,
// nothing after it): a caller commits what fn gathered only then.
func ReadSessionArchive(r io.Reader, fn func(kind byte, k, v []byte) error) (*ArchiveInfo, error) {
	ar := &archiveReader{r: bufio.NewReaderSize(r, 64<<10), sum: sha256.New()}
	magic := make([]byte, len(archiveMagic))
	if _, err := io.ReadFull(ar.r, magic); err != nil || string(magic) != archiveMagic {
		return nil, fmt.Errorf("%w: no padfs-session header", ErrArchive)
	}
	ar.sum.Write(magic)
	ar.off = int64(len(magic))
	typ, p, err := ar.next()
	if err != nil {
		return nil, err
	}
	if typ != 'V' || len(p) != 4+8+16 {
		return nil, ar.errf("no version frame")
	}
	info := &ArchiveInfo{Version: int(binary.BigEndian.Uint32(p)), Format: binary.BigEndian.Uint64(p[4:])}
	copy(info.Session[:], p[12:])
	if info.Version != archiveVersion {
		return nil, fmt.Errorf("%w: archive version %d, this padfs reads version %d", ErrArchive, info.Version, archiveVersion)
	}
	if info.Format > FormatVersion {
		return nil, fmt.Errorf("%w: the archive's records are store format %d, newer than this padfs understands (%d); upgrade padfs",
			ErrFormat, info.Format, FormatVersion)
	}
	for {
		digest := ar.sum.Sum(nil)
		typ, p, err := ar.next()
		if err != nil {
			return nil, err
		}
		switch typ {
		case 'K':
			if len(p) < 4 || uint64(binary.BigEndian.Uint32(p)) > uint64(len(p)-4) {
				return nil, ar.errf("bad key record")
			}
			kl := binary.BigEndian.Uint32(p)
			if err := fn('K', p[4:4+kl], p[4+kl:]); err != nil {
				return nil, err
			}
		case 'C':
			if len(p) < 32 {
				return nil, ar.errf("bad chunk record")
			}
			data, err := unframe(p[:32], p[32:])
			if err != nil || sha256.Sum256(data) != Hash(p[:32]) {
				return nil, ar.errf("chunk %x does not match its hash", p[:32])
			}
			if err := fn('C', p[:32], p[32:]); err != nil {
				return nil, err
			}
		case 'T':
			if len(p) != 8+32 {
				return nil, ar.errf("bad trailer")
			}
			if got := binary.BigEndian.Uint64(p); got != info.Count {
				return nil, ar.errf("trailer counts %d records, the archive holds %d", got, info.Count)
			}
			if !bytes.Equal(p[8:], digest) {
				return nil, ar.errf("whole-file checksum mismatch")
			}
			if _, err := ar.r.ReadByte(); err != io.EOF {
				return nil, ar.errf("bytes after the trailer")
			}
			return info, nil
		default:
			return nil, ar.errf("unknown frame type %q", typ)
		}
		info.Count++
	}
}

// ExportEntry is one name of a tree being exported.
type ExportEntry struct {
	Path   string // "." for the root, else relative, "/"-separated
	Node   *Inode
	Xattrs map[string][]byte
	// LinkTo is set on the second and later names of a hard-linked inode:
	// the path of its first name in this walk.
	LinkTo string
}

// ExportTree calls fn for the root and then every name of session sid's
// tree as of at, parents before children, names in byte order. The
// metadata comes from one snapshot; fn runs outside it and reads content
// with Store.Reader (versions never change). ctx ends it early (between
// names, in the walk and between the calls of fn) with ctx.Err().
func (s *Store) ExportTree(ctx context.Context, sid SessionID, at HLC, fn func(ExportEntry) error) error {
	var ents []ExportEntry
	err := s.View(func(t *ReadTx) error {
		h, err := t.Header(sid)
		if err != nil {
			return err
		}
		if at != Latest && at < h.Created {
			return fmt.Errorf("%w: session %s did not exist yet at %s (created %s)", ErrNotFound, sid, at, h.Created)
		}
		root, err := t.Inode(sid, h.Root, at)
		if err != nil {
			return err
		}
		xs, err := t.xattrsOf(sid, root, at)
		if err != nil {
			return err
		}
		ents = append(ents, ExportEntry{Path: ".", Node: root, Xattrs: xs})
		first := map[Ino]string{}
		return t.WalkTree(sid, at, func(e TreeEntry) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			x := ExportEntry{Path: e.Path, Node: e.Node}
			if p, ok := first[e.Node.Ino]; ok && !e.Node.IsDir() {
				x.LinkTo = p
			} else {
				first[e.Node.Ino] = e.Path
				if x.Xattrs, err = t.xattrsOf(sid, e.Node, at); err != nil {
					return err
				}
			}
			ents = append(ents, x)
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// HoleBytes returns how many bytes of n's content are holes (stored as
// nothing).
func (n *Inode) HoleBytes() uint64 {
	if n.Extents == nil {
		if n.Size > uint64(len(n.Inline)) {
			return n.Size - uint64(len(n.Inline))
		}
		return 0
	}
	var h, total uint64
	for _, e := range n.Extents {
		total += uint64(e.Len)
		if e.Chunk == nil {
			h += uint64(e.Len)
		}
	}
	if n.Size > total {
		h += n.Size - total
	}
	return h
}

// DataExtents calls fn for each stored run of n's content (offset and
// length), skipping holes, so a writer can leave holes unwritten.
func (n *Inode) DataExtents(fn func(off, n int64) error) error {
	if n.Extents == nil {
		if l := min(uint64(len(n.Inline)), n.Size); l > 0 {
			return fn(0, int64(l))
		}
		return nil
	}
	var off int64
	for _, e := range n.Extents {
		if e.Chunk != nil && off < int64(n.Size) {
			if err := fn(off, min(int64(e.Len), int64(n.Size)-off)); err != nil {
				return err
			}
		}
		off += int64(e.Len)
	}
	return nil
}
