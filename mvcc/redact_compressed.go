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
// error.
func (s *Store) FindCompressed(sid SessionID, needle string) ([]CompressedFile, error) {
	var out []CompressedFile
	err := s.View(func(t *ReadTx) error {
		var err error
		out, err = t.findCompressed(sid, needle, compressed.DefaultLimits)
		return err
	})
	return out, err
}

// compressedBudget bounds the bytes one scan decompresses (some seconds of
// inflating): past it, compressed files are listed as not inspected.
var compressedBudget int64 = 4 << 30 // a variable for tests

func (t *ReadTx) findCompressed(sid SessionID, needle string, lim compressed.Limits) ([]CompressedFile, error) {
	spent := int64(0)
	if _, err := t.Header(sid); err != nil {
		return nil, err
	}
	type verdict struct {
		format, status string
	}
	seen := map[string]*verdict{} // content key -> result (nil: not compressed, or no hit)
	type file struct {
		f    CompressedFile
		at   HLC
		name string
	}
	files := map[Ino]*file{}
	head := make([]byte, compressed.HeadSize)
	err := scanKeys(t.r, key(pInode, sid[:]), func(k, v []byte) error {
		var n Inode
		if err := decode(k, v, &n); err != nil {
			return err
		}
		if !n.IsRegular() || n.Size < 2 {
			return nil
		}
		ck := contentKey(k, &n)
		vd, ok := seen[ck]
		if !ok {
			c, err := t.ReadAt(&n, head, 0)
			if c < 2 && err != nil {
				return fmt.Errorf("inode %d version %s: %w", n.Ino, hlcFromInv(k), err)
			}
			if f := compressed.Sniff(head[:c], n.Name); f != "" && spent >= compressedBudget {
				vd = &verdict{f, fmt.Sprintf("could not inspect: this scan's decompression budget (%d GiB) is spent", compressedBudget>>30)}
			} else if f != "" {
				r := compressed.Find(inodeReader{t, &n}, int64(n.Size), f, []byte(needle), lim)
				spent += r.Read
				switch {
				case r.Found:
					vd = &verdict{f, "contains"}
				case r.Err != nil && f != compressed.Zlib:
					// Plain zlib's two-byte header is weak evidence (text
					// can start with "x^" or "HK"): one that fails to
					// inflate is most likely not zlib. Git objects are
					// known by their names.
					vd = &verdict{f, "could not inspect: " + r.Err.Error()}
				}
			}
			seen[ck] = vd
		}
		if vd == nil {
			return nil
		}
		at := hlcFromInv(k)
		fl := files[n.Ino]
		if fl == nil {
			fl = &file{f: CompressedFile{Ino: n.Ino}}
			files[n.Ino] = fl
		}
		fl.f.Versions++
		if vd.status == "contains" || fl.f.Status == "" {
			fl.f.Status, fl.f.Format = vd.status, vd.format
		}
		if at >= fl.at {
			fl.at, fl.name = at, n.Name
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]CompressedFile, 0, len(files))
	for ino, fl := range files {
		p, err := t.Path(sid, ino, fl.at)
		if err != nil {
			p = fmt.Sprintf("(inode %d, named %q)", ino, fl.name)
		}
		fl.f.Path = p
		fl.f.Advice = compressedAdvice(p, fl.f.Format)
		out = append(out, fl.f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

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
