package session

import (
	"bytes"
	"compress/zlib"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"strings"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// Diff output. The name-status form is one line per change:
//
//	A	path            added
//	M	path            modified (content, symlink target, type or mode)
//	D	path            deleted
//	R	old	new       renamed (same inode, another name)
//
// Directories carry a trailing "/". The unified form (WriteUnified) is a
// git-style patch: per file a "diff --git a/OLD b/NEW" line, git's extended
// headers (new/deleted file mode, old/new mode, rename from/to), then
// "--- a/OLD" / "+++ b/NEW" (or /dev/null) and the hunks. Hunks are computed
// by github.com/aymanbagabas/go-udiff (the Myers line diff of Go's own
// tools) with 3 lines of context, laid out as GNU diff -u lays them out
// and as short as GNU's (FuzzUnifiedEqualsGNUDiff; where several diffs are
// equally short the two may pick different lines). The headers are git's
// (a/ and b/ prefixes, no timestamps, full "index" lines), so the patch
// applies with git apply (and, binary files aside, with patch -p1). Binary
// files (a NUL byte in the first 8000 bytes) are git binary patches.

// StatusLine formats one change in name-status form.
func StatusLine(c mvcc.Change) string {
	p, from := c.Path, c.From
	n := c.New
	if n == nil {
		n = c.Old
	}
	if n != nil && n.IsDir() {
		p += "/"
		if from != "" {
			from += "/"
		}
	}
	if c.Status == 'R' {
		return fmt.Sprintf("R\t%s\t%s", from, p)
	}
	return fmt.Sprintf("%c\t%s", c.Status, p)
}

// gitMode is the mode git prints for an inode.
func gitMode(n *mvcc.Inode) string {
	switch {
	case n.IsSymlink():
		return "120000"
	case n.Mode&0o111 != 0:
		return "100755"
	default:
		return "100644"
	}
}

// WriteUnified writes the unified diff of changes (from
// mvcc.Store.Diff of session sid, whose newer state is as of to) to w,
// reading content from st. The patch applies with git apply in a copy of
// the older tree and gives the newer one: binary files are git binary
// patches, a renamed directory is a rename of each file below it, a change
// of type is a deletion and a creation. It returns what a patch cannot
// express (empty directories, special files, permission bits other than
// 644/755), one phrase each, for the caller to report. ctx ends it early
// (between files) with ctx.Err().
func WriteUnified(ctx context.Context, w io.Writer, st *mvcc.Store, sid mvcc.SessionID, to mvcc.HLC, changes []mvcc.Change) ([]string, error) {
	var lost []string
	// Paths that carry a file (so their directories come and go with it).
	files := map[string]bool{}
	renamedDirs := map[string]bool{}
	for _, c := range changes {
		if n := c.New; n != nil && !n.IsDir() || c.Old != nil && !c.Old.IsDir() {
			files[c.Path] = true
			if c.From != "" {
				files[c.From] = true
			}
		}
		if c.Status == 'R' && c.New.IsDir() {
			renamedDirs[c.Path] = true
		}
	}
	for _, c := range changes {
		if err := ctx.Err(); err != nil {
			return lost, err
		}
		var err error
		switch {
		case c.Status == 'R' && c.New.IsDir():
			var moved int
			moved, err = writeDirRename(w, st, sid, to, c, changes, renamedDirs)
			if err == nil && moved == 0 {
				lost = append(lost, fmt.Sprintf("renamed directory %s/ -> %s/ (no file below it)", c.From, c.Path))
			}
		case c.New != nil && c.New.IsDir() || c.Old != nil && c.Old.IsDir():
			// Directories come and go with the files below them.
			if !hasFileBelow(files, c.Path) {
				verb := "new"
				if c.Status == 'D' {
					verb = "deleted"
				}
				lost = append(lost, fmt.Sprintf("%s empty directory %s/", verb, c.Path))
			}
		default:
			err = writeOne(w, st, c, &lost)
		}
		if err != nil {
			return lost, err
		}
	}
	return lost, nil
}

func hasFileBelow(files map[string]bool, dir string) bool {
	for p := range files {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// writeDirRename writes a pure rename for each file below a renamed
// directory that moved with it unchanged (Diff lists only those that
// changed, and sub-directories renamed on their own).
func writeDirRename(w io.Writer, st *mvcc.Store, sid mvcc.SessionID, to mvcc.HLC, c mvcc.Change, changes []mvcc.Change, renamedDirs map[string]bool) (int, error) {
	listed := map[string]bool{}
	for _, o := range changes {
		listed[o.Path] = true
	}
	moved := 0
	var walk func(dir mvcc.Ino, rel string) error
	walk = func(dir mvcc.Ino, rel string) error {
		ents, err := st.ReadDir(sid, dir, to)
		if err != nil {
			return err
		}
		for _, d := range ents {
			r := rel + d.Name
			newPath := c.Path + "/" + r
			if renamedDirs[newPath] {
				continue // its own rename covers it
			}
			if d.Type == unix.S_IFDIR {
				if err := walk(d.Ino, r+"/"); err != nil {
					return err
				}
				continue
			}
			moved++
			if listed[newPath] {
				continue // changed too: written as its own change
			}
			if _, err := fmt.Fprintf(w, "diff --git a/%s/%s b/%s\nsimilarity index 100%%\nrename from %s/%s\nrename to %s\n",
				c.From, r, newPath, c.From, r, newPath); err != nil {
				return err
			}
		}
		return nil
	}
	return moved, walk(c.New.Ino, "")
}

func content(st *mvcc.Store, n *mvcc.Inode) ([]byte, error) {
	if n == nil {
		return nil, nil
	}
	if n.IsSymlink() {
		return []byte(n.Target), nil
	}
	if n.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil
	}
	return st.ReadAll(n)
}

// gitBlobID is the object id git gives content: sha1("blob N\0" content).
func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

const nullID = "0000000000000000000000000000000000000000"

// patchable reports whether git can carry the inode: a regular file or a
// symlink.
func patchable(n *mvcc.Inode) bool { return n.IsRegular() || n.IsSymlink() }

func writeOne(w io.Writer, st *mvcc.Store, c mvcc.Change, lost *[]string) error {
	old, nw := c.Old, c.New
	from, to := c.Path, c.Path
	if c.From != "" {
		from = c.From
	}
	if old != nil && nw != nil && (old.Mode&unix.S_IFMT != nw.Mode&unix.S_IFMT) {
		// git has no type change: a deletion, then a creation.
		if err := writeOne(w, st, mvcc.Change{Status: 'D', Path: from, Old: old}, lost); err != nil {
			return err
		}
		return writeOne(w, st, mvcc.Change{Status: 'A', Path: to, New: nw}, lost)
	}
	for _, n := range []*mvcc.Inode{old, nw} {
		if n != nil && !patchable(n) {
			*lost = append(*lost, fmt.Sprintf("%s (%s)", c.Path, kindName(n)))
			return nil
		}
	}
	if nw != nil && nw.IsRegular() {
		if perm := nw.Mode & 0o7777; perm != 0o644 && perm != 0o755 && (old == nil || old.Mode&0o7777 != perm) {
			*lost = append(*lost, fmt.Sprintf("mode %04o of %s (git knows 644 and 755)", perm, to))
		}
	}
	if _, err := fmt.Fprintf(w, "diff --git a/%s b/%s\n", from, to); err != nil {
		return err
	}
	switch {
	case old == nil:
		fmt.Fprintf(w, "new file mode %s\n", gitMode(nw))
	case nw == nil:
		fmt.Fprintf(w, "deleted file mode %s\n", gitMode(old))
	default:
		if gitMode(old) != gitMode(nw) {
			fmt.Fprintf(w, "old mode %s\nnew mode %s\n", gitMode(old), gitMode(nw))
		}
		if from != to {
			if !c.ContentChanged() {
				fmt.Fprintf(w, "similarity index 100%%\n")
			}
			fmt.Fprintf(w, "rename from %s\nrename to %s\n", from, to)
		}
		if !c.ContentChanged() {
			return nil
		}
	}
	a, err := content(st, old)
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	b, err := content(st, nw)
	if err != nil {
		return fmt.Errorf("%s: %w", to, err)
	}
	ida, idb := nullID, nullID
	if old != nil {
		ida = gitBlobID(a)
	}
	if nw != nil {
		idb = gitBlobID(b)
	}
	if old != nil && nw != nil && gitMode(old) == gitMode(nw) {
		fmt.Fprintf(w, "index %s..%s %s\n", ida, idb, gitMode(nw))
	} else {
		fmt.Fprintf(w, "index %s..%s\n", ida, idb)
	}
	la, lb := "a/"+from, "b/"+to
	if old == nil {
		la = "/dev/null"
	}
	if nw == nil {
		lb = "/dev/null"
	}
	if IsBinary(a) || IsBinary(b) {
		return writeBinaryPatch(w, a, b)
	}
	text, err := Unified(la, lb, string(a), string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", to, err)
	}
	_, err = io.WriteString(w, text)
	return err
}

func kindName(n *mvcc.Inode) string {
	switch n.Mode & unix.S_IFMT {
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFCHR:
		return "character device"
	case unix.S_IFBLK:
		return "block device"
	case unix.S_IFSOCK:
		return "socket"
	}
	return fmt.Sprintf("file type %#o", n.Mode&unix.S_IFMT)
}

// writeBinaryPatch writes a git binary patch from a to b: "GIT binary
// patch", the new content as a "literal" hunk, then the old one (git apply
// -R uses it). A hunk is the zlib-deflated content in lines of at most 52
// bytes, each base85-encoded after a length character ('A'..'Z' for 1..26
// bytes, 'a'..'z' for 27..52), and an empty line (git's diff.c,
// emit_binary_diff_body; apply.c, parse_binary_hunk).
func writeBinaryPatch(w io.Writer, a, b []byte) error {
	var out bytes.Buffer
	out.WriteString("GIT binary patch\n")
	for _, data := range [][]byte{b, a} {
		var z bytes.Buffer
		zw := zlib.NewWriter(&z)
		zw.Write(data)
		if err := zw.Close(); err != nil {
			return err
		}
		fmt.Fprintf(&out, "literal %d\n", len(data))
		for d := z.Bytes(); len(d) > 0; {
			n := min(len(d), 52)
			if n <= 26 {
				out.WriteByte(byte('A' + n - 1))
			} else {
				out.WriteByte(byte('a' + n - 27))
			}
			out.Write(encode85(d[:n]))
			out.WriteByte('\n')
			d = d[n:]
		}
		out.WriteByte('\n')
	}
	_, err := w.Write(out.Bytes())
	return err
}

// en85 is git's base85 alphabet (base85.c).
const en85 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~"

// encode85 encodes b in groups of 4 bytes (the last one zero-padded), each
// a big-endian number written as 5 digits, most significant first.
func encode85(b []byte) []byte {
	out := make([]byte, 0, (len(b)+3)/4*5)
	for len(b) > 0 {
		var acc uint32
		for i := 0; i < 4; i++ {
			acc <<= 8
			if i < len(b) {
				acc |= uint32(b[i])
			}
		}
		var g [5]byte
		for i := 4; i >= 0; i-- {
			g[i] = en85[acc%85]
			acc /= 85
		}
		out = append(out, g[:]...)
		b = b[min(4, len(b)):]
	}
	return out
}

// Unified returns the unified diff of two texts with 3 lines of context
// ("" when they are equal), headed "--- oldLabel" and "+++ newLabel".
// go-udiff finds the line edits; the hunks are laid out here, as GNU diff
// lays them out (go-udiff's own formatter misnumbers the new side of later
// hunks).
func Unified(oldLabel, newLabel, a, b string) (string, error) {
	if a == b {
		return "", nil
	}
	const ctx = udiff.DefaultContextLines
	al, aOff := splitLines(a)
	// Edits in line numbers of a.
	type edit struct {
		s, e int      // old lines [s, e)
		add  []string // new lines
	}
	lineAt := make(map[int]int, len(aOff))
	for i, off := range aOff {
		lineAt[off] = i
	}
	var eds []edit
	for _, ed := range udiff.Lines(a, b) {
		s, ok1 := lineAt[ed.Start]
		e, ok2 := lineAt[ed.End]
		if !ok1 || !ok2 {
			return "", fmt.Errorf("diff: edit %d..%d not at line boundaries", ed.Start, ed.End)
		}
		add, _ := splitLines(ed.New)
		if len(eds) > 0 && eds[len(eds)-1].e == s { // adjacent: one change
			eds[len(eds)-1].e = e
			eds[len(eds)-1].add = append(eds[len(eds)-1].add, add...)
			continue
		}
		eds = append(eds, edit{s, e, add})
	}
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldLabel, newLabel)
	delta := 0 // new line index minus old line index before the current edit
	for i := 0; i < len(eds); {
		j := i // the hunk holds edits i..j
		for j+1 < len(eds) && eds[j+1].s-eds[j].e <= 2*ctx {
			j++
		}
		hs, he := max(0, eds[i].s-ctx), min(len(al), eds[j].e+ctx)
		newStart := hs + delta
		var body strings.Builder
		oldN, newN := 0, 0
		line := func(prefix byte, l string) {
			body.WriteByte(prefix)
			body.WriteString(l)
			if !strings.HasSuffix(l, "\n") {
				body.WriteString("\n\\ No newline at end of file\n")
			}
		}
		pos := hs
		for k := i; k <= j; k++ {
			for ; pos < eds[k].s; pos++ {
				line(' ', al[pos])
				oldN++
				newN++
			}
			for ; pos < eds[k].e; pos++ {
				line('-', al[pos])
				oldN++
			}
			for _, l := range eds[k].add {
				line('+', l)
				newN++
			}
			delta += len(eds[k].add) - (eds[k].e - eds[k].s)
		}
		for ; pos < he; pos++ {
			line(' ', al[pos])
			oldN++
			newN++
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(hs, oldN), hunkRange(newStart, newN))
		out.WriteString(body.String())
		i = j + 1
	}
	return out.String(), nil
}

// hunkRange formats a hunk's range as GNU diff does: start is 0-based; an
// empty range names the line before it.
func hunkRange(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

// splitLines splits text after each newline (the last line may lack one)
// and returns the byte offset of each line start plus the end.
func splitLines(text string) ([]string, []int) {
	var lines []string
	offs := []int{0}
	for start := 0; start < len(text); {
		end := strings.IndexByte(text[start:], '\n')
		if end < 0 {
			end = len(text)
		} else {
			end += start + 1
		}
		lines = append(lines, text[start:end])
		offs = append(offs, end)
		start = end
	}
	return lines, offs
}
