package mvcc

import (
	"fmt"
	"sort"
	"strings"

	"github.com/padfs/padfs/internal/compressed"
)

// Redaction rewrites bytes where the needle is written out; it cannot
// rewrite it inside compressed data (a git object or pack, a .gz), where a
// secret committed with git on the mount survives a redaction. So the
// receipt also lists the files whose versions hold the needle compressed,
// found here, as NOT redacted, with what to do. Only content whose first
// bytes announce a compressed format is decompressed, within
// compressed.DefaultLimits per distinct content and compressedBudget in
// all.

// CompressedFile is a file that holds the needle (or may hold it) inside
// compressed data.
type CompressedFile struct {
	Path   string `json:"path"` // as of the newest such version
	Ino    Ino    `json:"ino"`
	Format string `json:"format"` // compressed.Gzip, GitObject, ...
	// Versions counts the versions of the file holding it.
	Versions int `json:"versions"`
	// Status is "contains", or "could not inspect: CAUSE" (corrupt,
	// truncated, too large to decompress: the needle may be there).
	Status string `json:"status"`
	Advice string `json:"advice"`
}

// FindCompressed lists the files of session sid with a version whose
// compressed content holds needle, or could not be inspected, sorted by
// path. It changes nothing; a damaged stream is a listed file, not an
// error. One read transaction finds the compressed contents (by their
// first bytes); each is then decompressed in a read transaction of its
// own, so a long scan never holds one open throughout.
func (s *Store) FindCompressed(sid SessionID, needle string) ([]CompressedFile, error) {
	sc := &compressedScan{s: s, sid: sid, needle: []byte(needle), contents: map[string]*compressedContent{}}
	if err := s.View(sc.sniff); err != nil {
		return nil, err
	}
	if err := sc.inspect(); err != nil {
		return nil, err
	}
	files := sc.files()
	out := make([]CompressedFile, 0, len(files))
	err := s.View(func(t *ReadTx) error {
		for ino, fl := range files {
			p, err := t.Path(sid, ino, fl.at)
			if err != nil {
				p = fmt.Sprintf("(inode %d, named %q)", ino, fl.name)
			}
			fl.f.Path = p
			fl.f.Advice = compressedAdvice(p, fl.f.Format)
			out = append(out, fl.f)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, err
}

// compressedScan is one FindCompressed: the versions with compressed
// content and each distinct content, inspected once.
type compressedScan struct {
	s        *Store
	sid      SessionID
	needle   []byte
	versions []compressedVersion
	contents map[string]*compressedContent // by contentKey
	order    []string                      // contents in scan order
	spent    int64                         // bytes decompressed
}

type compressedVersion struct {
	ino  Ino
	at   HLC
	name string
	ck   string
}

type compressedContent struct {
	key    []byte // of a version holding it
	format string
	status string // "" once inspected: no hit
}

// compressedHit is a file found, with its newest version that holds it.
type compressedHit struct {
	f    CompressedFile
	at   HLC
	name string
}

// sniff finds the versions whose content's first bytes announce a
// compressed format (each distinct content read once).
func (sc *compressedScan) sniff(t *ReadTx) error {
	if _, err := t.Header(sc.sid); err != nil {
		return err
	}
	sniffed := map[string]bool{}
	head := make([]byte, compressed.HeadSize)
	return scanKeys(t.r, key(pInode, sc.sid[:]), func(k, v []byte) error {
		var n Inode
		if err := decode(k, v, &n); err != nil {
			return err
		}
		if !n.IsRegular() || n.Size < 2 {
			return nil
		}
		ck := contentKey(k, &n)
		if !sniffed[ck] {
			sniffed[ck] = true
			c, err := t.ReadAt(&n, head, 0)
			if c < 2 && err != nil {
				return fmt.Errorf("inode %d version %s: %w", n.Ino, hlcFromInv(k), err)
			}
			if f := compressed.Sniff(head[:c], n.Name); f != "" {
				sc.contents[ck] = &compressedContent{key: append([]byte(nil), k...), format: f}
				sc.order = append(sc.order, ck)
			}
		}
		if sc.contents[ck] != nil {
			sc.versions = append(sc.versions, compressedVersion{n.Ino, hlcFromInv(k), n.Name, ck})
		}
		return nil
	})
}

// inspect decompresses every content found, looking for the needle.
// Small contents share a transaction (git objects come by thousands; on
// PostgreSQL each transaction is round trips).
func (sc *compressedScan) inspect() error {
	for i := 0; i < len(sc.order); {
		err := sc.s.View(func(t *ReadTx) error {
			for in, n := int64(0), 0; i < len(sc.order) && (n == 0 || in < 64<<20 && n < 256); i, n = i+1, n+1 {
				size, err := sc.inspectOne(t, sc.contents[sc.order[i]])
				if err != nil {
					return err
				}
				in += size
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// inspectOne decompresses content c and sets its status; it returns the
// content's size.
func (sc *compressedScan) inspectOne(t *ReadTx, c *compressedContent) (int64, error) {
	if sc.spent >= compressedBudget {
		c.status = fmt.Sprintf("could not inspect: this scan's decompression budget (%d GiB) is spent", compressedBudget>>30)
		return 0, nil
	}
	v, err := t.r.Get(c.key)
	if err != nil {
		return 0, err
	}
	if v == nil {
		return 0, nil // pruned meanwhile: nothing left to list
	}
	var nd Inode
	if err := decode(c.key, v, &nd); err != nil {
		return 0, err
	}
	r := compressed.Find(inodeReader{t, &nd}, int64(nd.Size), c.format, sc.needle, compressed.DefaultLimits)
	sc.spent += r.Read
	switch {
	case r.Found:
		c.status = "contains"
	case r.Err != nil && c.format != compressed.Zlib:
		// Plain zlib's two-byte header is weak evidence (text can start
		// with "x^" or "HK"): one that fails to inflate is most likely not
		// zlib. Git objects are known by their names.
		c.status = "could not inspect: " + r.Err.Error()
	}
	return int64(nd.Size), nil
}

// files gathers the versions whose content holds the needle (or could not
// be inspected) by file.
func (sc *compressedScan) files() map[Ino]*compressedHit {
	files := map[Ino]*compressedHit{}
	for _, v := range sc.versions {
		c := sc.contents[v.ck]
		if c.status == "" {
			continue
		}
		fl := files[v.ino]
		if fl == nil {
			fl = &compressedHit{f: CompressedFile{Ino: v.ino}}
			files[v.ino] = fl
		}
		fl.f.Versions++
		if c.status == "contains" || fl.f.Status == "" {
			fl.f.Status, fl.f.Format = c.status, c.format
		}
		if v.at >= fl.at {
			fl.at, fl.name = v.at, v.name
		}
	}
	return files
}

// compressedBudget bounds the bytes one scan decompresses (some seconds of
// inflating): past it, compressed files are listed as not inspected.
var compressedBudget int64 = 4 << 30 // a variable for tests

func compressedAdvice(path, format string) string {
	const after = "; padfs keeps its old versions until `padfs prune --before T` with T an hour after the deletion, or `padfs session forget --hard`"
	if format == compressed.GitObject || format == compressed.GitPack || strings.Contains("/"+path, "/.git/") {
		return "git stores the text compressed: rewrite the commits that hold it (`git filter-repo --replace-text FILE`, or `git commit --amend`/`git rebase`), then `git reflog expire --expire=now --all && git gc --prune=now` so git deletes this file" + after
	}
	return "decompress it, run `padfs redact` again to rewrite the text, and compress it again (or delete the file)" + after
}

// inodeReader reads one version's content as an io.ReaderAt.
type inodeReader struct {
	t *ReadTx
	n *Inode
}

func (r inodeReader) ReadAt(p []byte, off int64) (int, error) { return r.t.ReadAt(r.n, p, off) }
