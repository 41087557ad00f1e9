package mvcc

import (
	"bytes"
	"context"
	"sort"
	"strings"
)

// Change is one difference between two states of a session's tree.
type Change struct {
	// Status is 'A' (added), 'M' (modified), 'D' (deleted) or 'R'
	// (renamed: the same inode under another name, possibly modified too).
	Status byte
	// Path is the path in the newer state (in the older one for 'D').
	Path string
	// From is the path in the older state when it differs from Path ('R').
	From string
	// Old and New are the versions compared (Old nil for 'A', New nil for
	// 'D').
	Old, New *Inode
}

// ContentChanged reports whether the change alters bytes (content, symlink
// target or file type), as opposed to a rename or a mode change only.
func (c Change) ContentChanged() bool {
	if c.Old == nil || c.New == nil {
		return true
	}
	return !sameContent(c.Old, c.New)
}

func sameContent(a, b *Inode) bool {
	if a.Mode&sIFMT != b.Mode&sIFMT {
		return false
	}
	switch {
	case a.IsSymlink():
		return a.Target == b.Target
	case a.IsRegular():
		if a.ContentHash == nil || b.ContentHash == nil {
			// A sparse file has no whole-file hash: equal extents
			// are equal bytes (unequal ones may still be, rarely:
			// reported as a change).
			return a.Size == b.Size && sameExtents(a, b)
		}
		return a.Size == b.Size && bytes.Equal(a.ContentHash, b.ContentHash)
	}
	return true
}

func sameExtents(a, b *Inode) bool {
	if !bytes.Equal(a.Inline, b.Inline) || len(a.Extents) != len(b.Extents) {
		return false
	}
	for i, e := range a.Extents {
		if e.Len != b.Extents[i].Len || !bytes.Equal(e.Chunk, b.Extents[i].Chunk) {
			return false
		}
	}
	return true
}

// modified: content, target, type or permission bits differ. Times, owners
// and xattrs are not compared (diff(1) does not either).
func modified(a, b *Inode) bool {
	if !sameContent(a, b) {
		return true
	}
	return a.Mode&0o7777 != b.Mode&0o7777 && !a.IsSymlink()
}

type snapshot struct {
	byPath map[string]*Inode
	byIno  map[Ino][]string // sorted
}

func (t *ReadTx) snapshot(ctx context.Context, sid SessionID, at HLC) (*snapshot, error) {
	s := &snapshot{byPath: map[string]*Inode{}, byIno: map[Ino][]string{}}
	err := t.WalkTree(sid, at, func(e TreeEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		s.byPath[e.Path] = e.Node
		s.byIno[e.Node.Ino] = append(s.byIno[e.Node.Ino], e.Path)
		return nil
	})
	for _, ps := range s.byIno {
		sort.Strings(ps)
	}
	return s, err
}

// Diff compares session sid's tree as of from with its tree as of to and
// returns the changes sorted by path.
//
// Renames are found by inode identity, not by content: an inode that has a
// name in the newer state that it did not have in the older one, and lost
// a name it had, was renamed ('R'; several names are paired in sorted
// order). A rename over an existing file is reported as that 'R' alone (the
// replaced file's 'D' is implied). A renamed directory is one 'R'; entries
// below it that moved with it are reported only if they changed ('M', with
// From set). Directories are reported when added, deleted or renamed; files
// and symlinks when added, deleted, renamed or modified (content, symlink
// target, type or permission bits).
//
// ctx ends the walks of the two trees early with ctx.Err().
func (s *Store) Diff(ctx context.Context, sid SessionID, from, to HLC) ([]Change, error) {
	var a, b *snapshot
	err := s.View(func(t *ReadTx) error {
		if _, err := t.Header(sid); err != nil {
			return err
		}
		var err error
		if a, err = t.snapshot(ctx, sid, from); err != nil {
			return err
		}
		b, err = t.snapshot(ctx, sid, to)
		return err
	})
	if err != nil {
		return nil, err
	}
	return diffSnapshots(a, b), nil
}

func diffSnapshots(a, b *snapshot) []Change {
	var out []Change
	goneFrom := map[string]bool{} // older paths accounted for by a rename
	takenTo := map[string]bool{}  // newer paths accounted for by a rename
	dirMoves := map[string]string{}

	// Renames by inode identity.
	inos := make([]Ino, 0, len(a.byIno))
	for ino := range a.byIno {
		if _, ok := b.byIno[ino]; ok {
			inos = append(inos, ino)
		}
	}
	sort.Slice(inos, func(i, j int) bool { return inos[i] < inos[j] })
	type move struct {
		from, to string
		old, new *Inode
	}
	var moves []move
	for _, ino := range inos {
		oldOnly := minus(a.byIno[ino], b.byPath, ino)
		newOnly := minus(b.byIno[ino], a.byPath, ino)
		for i := 0; i < len(oldOnly) && i < len(newOnly); i++ {
			m := move{oldOnly[i], newOnly[i], a.byPath[oldOnly[i]], b.byPath[newOnly[i]]}
			moves = append(moves, m)
			goneFrom[m.from], takenTo[m.to] = true, true
			if m.new.IsDir() {
				dirMoves[m.from] = m.to
			}
		}
	}
	for _, m := range moves {
		if movedWithParent(m.from, m.to, dirMoves) {
			if modified(m.old, m.new) {
				out = append(out, Change{Status: 'M', Path: m.to, From: m.from, Old: m.old, New: m.new})
			}
			continue
		}
		out = append(out, Change{Status: 'R', Path: m.to, From: m.from, Old: m.old, New: m.new})
	}

	// Path by path.
	for p, old := range a.byPath {
		if goneFrom[p] {
			continue
		}
		nw, ok := b.byPath[p]
		switch {
		case !ok || takenTo[p]:
			if takenTo[p] {
				continue // replaced by a rename onto p
			}
			out = append(out, Change{Status: 'D', Path: p, Old: old})
		case old.IsDir() && nw.IsDir():
			if old.Ino != nw.Ino {
				// A directory replaced by another one: its entries speak.
				continue
			}
		case old.IsDir() != nw.IsDir():
			out = append(out, Change{Status: 'D', Path: p, Old: old}, Change{Status: 'A', Path: p, New: nw})
		case modified(old, nw):
			out = append(out, Change{Status: 'M', Path: p, Old: old, New: nw})
		}
	}
	for p, nw := range b.byPath {
		if takenTo[p] {
			continue
		}
		if _, ok := a.byPath[p]; !ok || goneFrom[p] {
			out = append(out, Change{Status: 'A', Path: p, New: nw})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Path != out[j].Path {
			return out[i].Path < out[j].Path
		}
		return statusRank(out[i].Status) < statusRank(out[j].Status) // D before A for a type change
	})
	return out
}

// minus returns the paths of ps that the other state does not give to the
// same inode.
func minus(ps []string, other map[string]*Inode, ino Ino) []string {
	var out []string
	for _, p := range ps {
		if n, ok := other[p]; !ok || n.Ino != ino {
			out = append(out, p)
		}
	}
	return out
}

// movedWithParent reports whether from -> to is implied by the rename of
// an ancestor directory.
func movedWithParent(from, to string, dirMoves map[string]string) bool {
	for i := len(from) - 1; i > 0; i-- {
		if from[i] != '/' {
			continue
		}
		if nd, ok := dirMoves[from[:i]]; ok {
			return to == nd+from[i:]
		}
	}
	return false
}

func statusRank(s byte) int { return strings.IndexByte("DRMA", s) }
