// Package compressed looks for a needle inside compressed data that padfs
// cannot rewrite in place: zlib streams (git loose objects), git packfiles,
// gzip, bzip2, zstd and zip archives. (Not xz: the decoder at hand
// allocates whatever dictionary a stream header declares, up to GiBs,
// before any byte could be counted against a limit.)
//
// The data is the user's, so every inspection is bounded: at most
// Limits.MaxOutput decompressed bytes per file (against zip bombs), nesting
// at most Limits.MaxDepth deep, and the search stops at the first hit. A
// corrupt or truncated stream is reported in Result.Err ("could not
// inspect"), never as a failure of the caller.
package compressed

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"
)

// Formats, as named in receipts.
const (
	Zlib      = "zlib"
	GitObject = "git object" // a zlib stream whose name is a loose object's
	GitPack   = "git pack"
	Gzip      = "gzip"
	Bzip2     = "bzip2"
	Zstd      = "zstd"
	Zip       = "zip"
)

// HeadSize is how many leading bytes Sniff needs.
const HeadSize = 16

// Limits bound one inspection.
type Limits struct {
	MaxOutput int64 // decompressed bytes read per file, all streams together
	MaxDepth  int   // nesting of compressed data inside compressed data
}

// DefaultLimits: 256 MiB of output (about a second of inflating), two
// levels (a .gz inside a zip).
var DefaultLimits = Limits{MaxOutput: 256 << 20, MaxDepth: 2}

// ErrLimit reports that the output bound was reached before the end.
var ErrLimit = errors.New("decompressed size limit reached")

// Result of one inspection.
type Result struct {
	Format string
	Found  bool
	// Err is why the data could not be inspected to its end (corrupt,
	// truncated, unsupported, ErrLimit); with Found false the needle may
	// still be in the part not read.
	Err error
	// Read counts the decompressed bytes read.
	Read int64
}

// Sniff returns the format the leading bytes announce, or "". name (the
// file's base name) tells a git loose object from other zlib data, whose
// two-byte header is weak evidence.
func Sniff(head []byte, name string) string {
	switch {
	case len(head) >= 12 && string(head[:4]) == "PACK" && (head[7] == 2 || head[7] == 3) && head[4]|head[5]|head[6] == 0:
		return GitPack
	case len(head) >= 3 && head[0] == 0x1f && head[1] == 0x8b && head[2] == 8:
		return Gzip
	case len(head) >= 10 && string(head[:3]) == "BZh" && head[3] >= '1' && head[3] <= '9' && string(head[4:10]) == "1AY&SY":
		return Bzip2
	case len(head) >= 4 && string(head[:4]) == "\x28\xb5\x2f\xfd":
		return Zstd
	case len(head) >= 4 && string(head[:4]) == "PK\x03\x04":
		return Zip
	case isZlibHeader(head):
		if isLooseObjectName(name) {
			return GitObject
		}
		return Zlib
	}
	return ""
}

func isZlibHeader(h []byte) bool {
	return len(h) >= 2 && h[0]&0x0f == 8 && h[0]>>4 <= 7 && h[1]&0x20 == 0 && (uint16(h[0])<<8|uint16(h[1]))%31 == 0
}

// isLooseObjectName: 38 hex digits (SHA-1) or 62 (SHA-256), the name of
// a file under .git/objects/XX/.
func isLooseObjectName(name string) bool {
	if len(name) != 38 && len(name) != 62 {
		return false
	}
	for _, c := range name {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Find inspects the size bytes of r, whose format Sniff returned, for
// needle. It never panics on hostile input and never reads more than
// lim.MaxOutput decompressed bytes.
func Find(r io.ReaderAt, size int64, format string, needle []byte, lim Limits) (res Result) {
	res.Format = format
	if len(needle) == 0 {
		res.Err = errors.New("empty needle")
		return res
	}
	s := &searcher{needle: needle, budget: lim.MaxOutput, maxDepth: lim.MaxDepth}
	defer func() {
		if p := recover(); p != nil { // a decoder bug must not take the caller down
			res.Found, res.Err = false, fmt.Errorf("decoder panic: %v", p)
		}
	}()
	src := io.NewSectionReader(r, 0, size)
	var err error
	switch format {
	case GitPack:
		res.Found, err = s.pack(bufio.NewReaderSize(src, 64<<10))
	case Zip:
		res.Found, err = s.zip(r, size, 0)
	case Zlib, GitObject, Gzip, Bzip2, Zstd:
		res.Found, err = s.stream(bufio.NewReaderSize(src, 64<<10), format, 0)
	default:
		err = fmt.Errorf("unknown format %q", format)
	}
	if !res.Found {
		res.Err = err
	}
	res.Read = lim.MaxOutput - s.budget
	return res
}

type searcher struct {
	needle   []byte
	budget   int64
	maxDepth int
}

// decoder opens one compressed stream of format over br. br is a
// *bufio.Reader, an io.ByteReader, so flate reads no byte past the stream's
// end (git packs put streams back to back). close releases it.
func decoder(br *bufio.Reader, format string) (r io.Reader, close func(), err error) {
	if format == Zstd {
		// Its window and memory bounded: the header declares them.
		d, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(64<<20), zstd.WithDecoderMaxWindow(32<<20))
		if err != nil {
			return nil, nil, err
		}
		return d, d.Close, nil
	}
	r, err = decoder1(br, format)
	return r, func() {}, err
}

func decoder1(br *bufio.Reader, format string) (io.Reader, error) {
	switch format {
	case Zlib, GitObject:
		return zlib.NewReader(br)
	case Gzip:
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		z.Multistream(true)
		return z, nil
	case Bzip2:
		return bzip2.NewReader(br), nil
	}
	return nil, fmt.Errorf("unknown stream format %q", format)
}

// stream decompresses one stream and searches its output, descending into
// it when it is itself a gzip or bzip2 stream.
func (s *searcher) stream(br *bufio.Reader, format string, depth int) (bool, error) {
	d, close, err := decoder(br, format)
	if err != nil {
		return false, err
	}
	defer close()
	return s.output(d, depth)
}

// output searches decompressed bytes, or the stream they hold.
func (s *searcher) output(d io.Reader, depth int) (bool, error) {
	out := bufio.NewReaderSize(d, 64<<10)
	if depth < s.maxDepth {
		head, _ := out.Peek(HeadSize)
		switch f := Sniff(head, ""); f {
		case Gzip, Bzip2, Zstd: // strong magic only: zlib's header occurs by chance
			found, err := s.stream(out, f, depth+1)
			if found || err == nil || errors.Is(err, ErrLimit) {
				return found, err
			}
			return false, fmt.Errorf("nested %s: %w", f, err)
		}
	}
	return s.search(out)
}

// search reads r to its end (or the budget's), looking for the needle
// across block boundaries.
func (s *searcher) search(r io.Reader) (bool, error) {
	keep := len(s.needle) - 1
	buf := make([]byte, keep+64<<10)
	have := 0
	for {
		if s.budget <= 0 {
			return false, ErrLimit
		}
		want := len(buf) - have
		if int64(want) > s.budget {
			want = int(s.budget)
		}
		n, err := r.Read(buf[have : have+want])
		s.budget -= int64(n)
		have += n
		if bytes.Contains(buf[:have], s.needle) {
			return true, nil
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if have > keep {
			copy(buf, buf[have-keep:have])
			have = keep
		}
	}
}

// pack walks a git packfile's objects (version 2 or 3), searching each
// object's inflated bytes: whole objects, and the literal insertions of
// deltas (bytes a delta copies come from a base that is searched itself,
// unless it lives outside the pack).
func (s *searcher) pack(br *bufio.Reader) (bool, error) {
	var hdr [12]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil {
		return false, fmt.Errorf("pack header: %w", err)
	}
	count := binary.BigEndian.Uint32(hdr[8:])
	for i := uint32(0); i < count; i++ {
		c, err := br.ReadByte()
		if err != nil {
			return false, fmt.Errorf("object %d of %d: %w", i+1, count, noEOF(err))
		}
		typ := c >> 4 & 7
		for n := 0; c&0x80 != 0; n++ { // the size continues; padfs does not need it
			if c, err = br.ReadByte(); err != nil || n > 9 {
				return false, fmt.Errorf("object %d of %d: bad size header", i+1, count)
			}
		}
		switch typ {
		case 1, 2, 3, 4: // commit, tree, blob, tag
		case 6: // ofs-delta: a base offset in git's varint
			for n := 0; ; n++ {
				if c, err = br.ReadByte(); err != nil || n > 9 {
					return false, fmt.Errorf("object %d of %d: bad delta offset", i+1, count)
				}
				if c&0x80 == 0 {
					break
				}
			}
		case 7: // ref-delta: the base's object id (SHA-1; SHA-256 packs are not read)
			if _, err := br.Discard(20); err != nil {
				return false, fmt.Errorf("object %d of %d: %w", i+1, count, noEOF(err))
			}
		default:
			return false, fmt.Errorf("object %d of %d: unknown type %d", i+1, count, typ)
		}
		z, err := zlib.NewReader(br)
		if err != nil {
			return false, fmt.Errorf("object %d of %d: %w", i+1, count, err)
		}
		found, err := s.search(z)
		if found || err != nil {
			if err != nil && !errors.Is(err, ErrLimit) {
				err = fmt.Errorf("object %d of %d: %w", i+1, count, err)
			}
			return found, err
		}
	}
	return false, nil
}

// zip searches every entry (stored or deflated), and gzip or bzip2 data
// inside an entry.
func (s *searcher) zip(r io.ReaderAt, size int64, depth int) (bool, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return false, err
	}
	var firstErr error
	for _, f := range zr.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("entry %q: %w", f.Name, err)
			}
			continue
		}
		found, err := s.output(rc, depth)
		rc.Close()
		if found {
			return true, nil
		}
		if errors.Is(err, ErrLimit) {
			return false, err
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("entry %q: %w", f.Name, err)
		}
	}
	return false, firstErr
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
