package session

import (
	"fmt"
	"io"
	"strings"
	"syscall"

	udiff "github.com/aymanbagabas/go-udiff"
	"github.com/padfs/padfs/mvcc"
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
// tools) with 3 lines of context; for the same two texts they are GNU diff
// -u's hunks (the test compares them), while the headers are git's (a/ and
// b/ prefixes, no timestamps), so the patch applies with git apply or
// patch -p1. Binary files (a NUL byte in the first 8000 bytes) are named,
// "Binary files a/X and b/Y differ", never dumped.

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

// WriteUnified writes the unified diff of changes (from mvcc.Store.Diff)
// to w, reading content from st.
func WriteUnified(w io.Writer, st *mvcc.Store, changes []mvcc.Change) error {
	for _, c := range changes {
		if err := writeOne(w, st, c); err != nil {
			return err
		}
	}
	return nil
}

func content(st *mvcc.Store, n *mvcc.Inode) ([]byte, error) {
	if n == nil {
		return nil, nil
	}
	if n.IsSymlink() {
		return []byte(n.Target), nil
	}
	if n.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, nil
	}
	return st.ReadAll(n)
}

func writeOne(w io.Writer, st *mvcc.Store, c mvcc.Change) error {
	old, nw := c.Old, c.New
	if old != nil && old.IsDir() || nw != nil && nw.IsDir() {
		return nil // directories have no content; name-status lists them
	}
	from, to := c.Path, c.Path
	if c.From != "" {
		from = c.From
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
	la, lb := "a/"+from, "b/"+to
	if old == nil {
		la = "/dev/null"
	}
	if nw == nil {
		lb = "/dev/null"
	}
	if IsBinary(a) || IsBinary(b) {
		_, err := fmt.Fprintf(w, "Binary files %s and %s differ\n", la, lb)
		return err
	}
	text, err := Unified(la, lb, string(a), string(b))
	if err != nil {
		return fmt.Errorf("%s: %w", to, err)
	}
	_, err = io.WriteString(w, text)
	return err
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
