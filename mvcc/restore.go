package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// RestoreOptions tune Restore.
type RestoreOptions struct {
	// Paths to restore, relative to the session root; none (or ".") is the
	// whole tree. A directory is restored with everything below it.
	Paths []string
	// DryRun computes the changes and commits nothing (the commit is
	// built and rolled back, so the session must be live).
	DryRun bool
}

// RestoreResult is what Restore did (or, for a dry run, would do).
type RestoreResult struct {
	// Changes turn the current tree into the tree as of T, in the form of
	// Diff (current -> restored), sorted by path.
	Changes []Change
	// HLC of the restore commit; 0 for a dry run or when nothing differed
	// (then nothing was committed).
	HLC HLC
	// Changed: the restore changed (a dry run: would change) something,
	// if only times, owners or xattrs, which Changes does not list.
	Changed bool
}

// errNothingToRestore aborts a restore commit that would write nothing;
// errDryRun rolls a dry run's commit back.
var (
	errNothingToRestore = errors.New("nothing to restore")
	errDryRun           = errors.New("dry run")
)

// Restore brings the named paths of session sid (default: the whole tree)
// back to their state as of at, as ONE commit: names created after at are
// removed, deleted ones come back with their modes, owners, times,
// symlink targets and xattrs, and two names of one inode as of at are two
// names of one inode again.
//
// Nothing is copied but metadata: a restored name gets a new version of
// the same inode it had as of at (its history chain goes on; its content
// manifest points at the same chunks). The exception is an inode that has
// since moved outside the restored paths: it keeps that place, and the
// restored name gets a fresh inode with the old content (a directory
// cannot have two names; a file would otherwise become a hard link that
// it was not as of at). History is kept: the restore is itself a commit,
// which a later restore can undo. ctx ends it early (while it reads the
// two trees) with ctx.Err(), nothing committed.
func (s *Store) Restore(ctx context.Context, sid SessionID, at HLC, opt RestoreOptions) (*RestoreResult, error) {
	roots, err := restoreRoots(opt.Paths)
	if err != nil {
		return nil, err
	}
	res := &RestoreResult{}
	hlc, err := s.Update(sid, func(t *WriteTx) error {
		if at >= t.hlc {
			return errNothingToRestore // the state as of at is the current one
		}
		p, err := t.planRestore(ctx, sid, at, roots)
		if err != nil {
			return err
		}
		res.Changes = p.changes
		if err := t.applyRestore(p, at, roots); err != nil {
			return err
		}
		res.Changed = true
		if opt.DryRun {
			// The very commit, rolled back: a dry run says exactly what
			// the restore would do.
			return errDryRun
		}
		return nil
	})
	switch {
	case errors.Is(err, errNothingToRestore):
		return &RestoreResult{}, nil
	case errors.Is(err, errDryRun):
		return res, nil
	case err != nil:
		return nil, err
	}
	res.HLC = hlc
	return res, nil
}

// restoreRoots cleans the paths and drops those below another one.
func restoreRoots(paths []string) ([]string, error) {
	var clean []string
	for _, p := range paths {
		parts := splitPath(p)
		for _, c := range parts {
			if c == ".." {
				return nil, fmt.Errorf("%w: restore path %q leaves the session", ErrInvalid, p)
			}
		}
		if len(parts) == 0 {
			return []string{"."}, nil
		}
		clean = append(clean, strings.Join(parts, "/"))
	}
	if len(clean) == 0 {
		return []string{"."}, nil
	}
	sort.Strings(clean)
	var out []string
	for _, p := range clean {
		if len(out) > 0 && underRoot(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// underRoot reports whether path p is root or below it.
func underRoot(p, root string) bool {
	return root == "." || p == root || strings.HasPrefix(p, root+"/")
}

func inRoots(p string, roots []string) bool {
	for _, r := range roots {
		if underRoot(p, r) {
			return true
		}
	}
	return false
}

// rlink is one name: an entry in a directory.
type rlink struct {
	parent Ino
	name   string
}

// finalLink is a name as of T: in its directory as of T (old inode
// numbers), or for a region root in its directory now.
type finalLink struct {
	l      rlink
	isRoot bool
	node   *Inode // as of T
}

// restorePlan is the restored region as it is now and as it was at T.
type restorePlan struct {
	root Ino // the session root
	// Now: entries in the region (current inode numbers), every inode they
	// name, and the names each inode has outside the region.
	cur        map[rlink]Ino
	curOrder   []rlink
	curNodes   map[Ino]*Inode
	outsideNow map[Ino][]rlink
	// As of T: entries in the region under their final parents, the final
	// inode number of each old inode, and the versions as of T.
	olds     []finalLink
	rootNode *Inode      // the root as of T, when the whole tree is restored
	fresh    map[Ino]Ino // old inode -> fresh number (moved outside since)
	// parents are the directories (outside the region) holding a region
	// root: the root name in each.
	parents map[Ino][]string
	changes []Change
}

func (t *ReadTx) planRestore(ctx context.Context, sid SessionID, at HLC, roots []string) (*restorePlan, error) {
	h, err := t.Header(sid)
	if err != nil {
		return nil, err
	}
	if at < h.Created {
		return nil, fmt.Errorf("%w: session %s did not exist yet at %s (created %s)", ErrNotFound, sid, at, h.Created)
	}
	p := &restorePlan{root: h.Root, cur: map[rlink]Ino{}, curNodes: map[Ino]*Inode{},
		outsideNow: map[Ino][]rlink{}, fresh: map[Ino]Ino{}, parents: map[Ino][]string{}}
	rootParent, err := t.restoreRootParents(sid, roots, p)
	if err != nil {
		return nil, err
	}
	curSnap, err := t.scanRestoreNow(ctx, sid, roots, p)
	if err != nil {
		return nil, err
	}
	olds, outsideThen, oldSnap, err := t.scanRestoreThen(ctx, sid, at, roots)
	if err != nil {
		return nil, err
	}
	for _, r := range roots {
		if r == "." {
			continue
		}
		if _, ok := curSnap.byPath[r]; !ok {
			if _, ok := oldSnap.byPath[r]; !ok {
				return nil, fmt.Errorf("restore %s: %w: neither in the tree now nor as of %s", r, ErrNotFound, at)
			}
		}
	}
	for _, o := range olds {
		ino := o.node.Ino
		if _, seen := p.fresh[ino]; !seen && len(p.outsideNow[ino]) > 0 && (o.node.IsDir() || !outsideThen[ino]) {
			p.fresh[ino] = 0 // numbered in applyRestore
		}
		fl := finalLink{l: o.l, node: o.node}
		if rp, ok := rootParent[o.path]; ok {
			fl.l.parent, fl.isRoot = rp, true // a root goes where its name is now
		}
		p.olds = append(p.olds, fl)
	}
	if roots[0] == "." {
		root, err := t.Inode(sid, h.Root, at)
		if err != nil {
			return nil, fmt.Errorf("root as of %s: %w", at, err)
		}
		p.rootNode = root
	}
	p.changes = diffSnapshots(curSnap, oldSnap)
	return p, nil
}

// restoreRootParents finds where each root goes: its parent directory
// now. It notes the root's name in p.parents.
func (t *ReadTx) restoreRootParents(sid SessionID, roots []string, p *restorePlan) (map[string]Ino, error) {
	rootParent := map[string]Ino{}
	for _, r := range roots {
		if r == "." {
			continue
		}
		dir, base := ".", r
		if i := strings.LastIndexByte(r, '/'); i >= 0 {
			dir, base = r[:i], r[i+1:]
		}
		pn, err := t.Walk(sid, dir, Latest)
		if err != nil {
			return nil, fmt.Errorf("restore %s: its directory %s is not in the tree now (restore that instead): %w", r, dir, err)
		}
		if !pn.IsDir() {
			return nil, fmt.Errorf("restore %s: %w: %s", r, ErrNotDir, dir)
		}
		rootParent[r] = pn.Ino
		p.parents[pn.Ino] = append(p.parents[pn.Ino], base)
	}
	return rootParent, nil
}

// scanRestoreNow records the region as it is now in p (and the names its
// inodes have outside it) and returns it as a snapshot for the diff.
func (t *ReadTx) scanRestoreNow(ctx context.Context, sid SessionID, roots []string, p *restorePlan) (*snapshot, error) {
	whole := roots[0] == "."
	snap := &snapshot{byPath: map[string]*Inode{}, byIno: map[Ino][]string{}}
	err := t.WalkTree(sid, Latest, func(e TreeEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		l := rlink{e.Parent, e.Name}
		if !whole && !inRoots(e.Path, roots) {
			p.outsideNow[e.Node.Ino] = append(p.outsideNow[e.Node.Ino], l)
			return nil
		}
		p.cur[l] = e.Node.Ino
		p.curOrder = append(p.curOrder, l)
		p.curNodes[e.Node.Ino] = e.Node
		snap.byPath[e.Path] = e.Node
		snap.byIno[e.Node.Ino] = append(snap.byIno[e.Node.Ino], e.Path)
		return nil
	})
	return snap, err
}

// restoreOld is an entry of the region as of T, under its parent then.
type restoreOld struct {
	path string
	l    rlink
	node *Inode
}

// scanRestoreThen lists the region as of at, the inodes that were outside
// it then, and the region as a snapshot for the diff.
func (t *ReadTx) scanRestoreThen(ctx context.Context, sid SessionID, at HLC, roots []string) ([]restoreOld, map[Ino]bool, *snapshot, error) {
	whole := roots[0] == "."
	snap := &snapshot{byPath: map[string]*Inode{}, byIno: map[Ino][]string{}}
	var olds []restoreOld
	outside := map[Ino]bool{}
	err := t.WalkTree(sid, at, func(e TreeEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !whole && !inRoots(e.Path, roots) {
			outside[e.Node.Ino] = true
			return nil
		}
		olds = append(olds, restoreOld{e.Path, rlink{e.Parent, e.Name}, e.Node})
		snap.byPath[e.Path] = e.Node
		snap.byIno[e.Node.Ino] = append(snap.byIno[e.Node.Ino], e.Path)
		return nil
	})
	return olds, outside, snap, err
}

// restoreWrite is the state of applyRestore: the final tree of the region
// and the count of versions written.
type restoreWrite struct {
	t  *WriteTx
	p  *restorePlan
	at HLC
	// The final tree: each link's inode (final numbers), each inode's
	// version as of T, the links in tree order.
	final      map[rlink]Ino
	finalNodes map[Ino]*Inode
	order      []rlink
	// Each inode's links in the final region, each directory's subdirectories.
	links   map[Ino][]rlink
	subdirs map[Ino]uint32
	now     int64
	writes  int
}

// applyRestore writes the plan: entries first, then every inode whose
// link count, primary link or contents change.
func (t *WriteTx) applyRestore(p *restorePlan, at HLC, roots []string) error {
	w := &restoreWrite{t: t, p: p, at: at, now: nowNs()}
	if err := w.numberFresh(); err != nil {
		return err
	}
	w.finalTree()
	for _, step := range []func() error{w.writeEntries, w.writeRestored, w.writeLeaving, w.writeRootParents} {
		if err := step(); err != nil {
			return err
		}
	}
	if w.writes == 0 {
		return errNothingToRestore
	}
	t.treeChanged = true
	detail := "as of " + at.String()
	if len(roots) > 1 {
		detail += restoreAlsoSep + strings.Join(roots[1:], " ")
	}
	t.SetEvent(Event{Op: OpRestore, Path: roots[0], Also: roots[1:], Detail: detail})
	return nil
}

// numberFresh gives fresh numbers to the inodes that moved out of the
// region since, in the order of their old numbers.
func (w *restoreWrite) numberFresh() error {
	olds := make([]Ino, 0, len(w.p.fresh))
	for old := range w.p.fresh {
		olds = append(olds, old)
	}
	sort.Slice(olds, func(i, j int) bool { return olds[i] < olds[j] })
	for _, old := range olds {
		ino, err := w.t.AllocIno()
		if err != nil {
			return err
		}
		w.p.fresh[old] = ino
	}
	return nil
}

// mapIno is the final number of old inode old.
func (w *restoreWrite) mapIno(old Ino) Ino {
	if f, ok := w.p.fresh[old]; ok {
		return f
	}
	return old
}

// finalTree computes the region's final links, their inodes' versions as
// of T, and the link counts and subdirectories in it.
func (w *restoreWrite) finalTree() {
	w.final = make(map[rlink]Ino, len(w.p.olds))
	w.finalNodes = map[Ino]*Inode{}
	for _, o := range w.p.olds {
		l := o.l
		if !o.isRoot {
			l.parent = w.mapIno(l.parent)
		}
		ino := w.mapIno(o.node.Ino)
		if _, dup := w.final[l]; !dup {
			w.order = append(w.order, l)
		}
		w.final[l], w.finalNodes[ino] = ino, o.node
	}
	if w.p.rootNode != nil {
		w.finalNodes[w.p.root] = w.p.rootNode
	}
	w.links = map[Ino][]rlink{}
	w.subdirs = map[Ino]uint32{}
	for _, l := range w.order {
		ino := w.final[l]
		w.links[ino] = append(w.links[ino], l)
		if w.finalNodes[ino].IsDir() {
			w.subdirs[l.parent]++
		}
	}
}

// writeEntries removes the entries the final tree lacks and writes those
// it has that differ from the current ones.
func (w *restoreWrite) writeEntries() error {
	p := w.p
	for _, l := range p.curOrder {
		if _, keep := w.final[l]; !keep {
			if err := w.t.PutDentry(l.parent, l.name, 0, 0); err != nil {
				return err
			}
			w.writes++
		}
	}
	for _, l := range w.order {
		ino := w.final[l]
		typ := w.finalNodes[ino].Mode & sIFMT
		if cur, ok := p.cur[l]; ok && cur == ino && p.curNodes[cur].Mode&sIFMT == typ {
			continue
		}
		if err := w.t.PutDentry(l.parent, l.name, ino, typ); err != nil {
			return err
		}
		w.writes++
	}
	return nil
}

// put writes n as the next version of an inode whose latest is cur (nil:
// write it whatever it is), unless nothing a reader sees would change.
func (w *restoreWrite) put(n, cur *Inode) error {
	if cur != nil && sameVersion(n, cur) {
		return nil
	}
	n.Ctime = w.now
	w.writes++
	return w.t.PutInode(n)
}

// writeRestored writes the restored inodes: their versions as of T,
// relinked, with their xattrs as of T.
func (w *restoreWrite) writeRestored() error {
	t, p := w.t, w.p
	for _, ino := range sortedInos(w.finalNodes) {
		old := w.finalNodes[ino]
		cur, err := t.Inode(t.sid, ino, Latest)
		if errors.Is(err, ErrNotFound) {
			cur, err = nil, nil // a fresh number
		}
		if err != nil {
			return err
		}
		n := *old
		n.Ino = ino
		if cur != nil && sameContent(cur, old) {
			n.ContentHLC = cur.ContentHLC
		} else {
			n.ContentHLC = t.hlc
		}
		xw, err := t.restoreXattrs(&n, old, cur, w.at)
		if err != nil {
			return err
		}
		w.writes += xw
		outside := p.outsideNow[ino]
		switch {
		case ino == p.root:
			n.Nlink, n.Parent, n.Name = 2+w.subdirs[ino], 0, ""
		case n.IsDir():
			n.Nlink = 2 + w.subdirs[ino]
		default:
			n.Nlink = uint32(len(w.links[ino]) + len(outside))
		}
		if ino != p.root {
			n.Parent, n.Name = primaryLink(old, cur, w.mapIno, w.links[ino], outside)
		}
		if err := w.put(&n, cur); err != nil {
			return err
		}
	}
	return nil
}

// writeLeaving writes the inodes that leave the region (or lose names in
// it): their names outside it are what is left of them.
func (w *restoreWrite) writeLeaving() error {
	t := w.t
	for _, ino := range sortedInos(w.p.curNodes) {
		if _, ok := w.finalNodes[ino]; ok {
			continue
		}
		cur, err := t.Inode(t.sid, ino, Latest)
		if err != nil {
			return err
		}
		n := *cur
		outside := w.p.outsideNow[ino]
		if n.IsDir() {
			n.Nlink = 0
		} else {
			n.Nlink = uint32(len(outside))
		}
		if len(outside) > 0 && !hasLink(outside, rlink{n.Parent, n.Name}) {
			n.Parent, n.Name = outside[0].parent, outside[0].name
		}
		if err := w.put(&n, cur); err != nil {
			return err
		}
	}
	return nil
}

// writeRootParents updates the directories that hold a region root: link
// count and mtime, when a root name in them changes.
func (w *restoreWrite) writeRootParents() error {
	t, p := w.t, w.p
	for _, dir := range sortedInos(p.parents) {
		if _, ok := w.finalNodes[dir]; ok {
			continue // also restored itself (cannot happen: roots do not nest)
		}
		d, err := t.Inode(t.sid, dir, Latest)
		if err != nil {
			return err
		}
		delta, changed := 0, false
		for _, name := range p.parents[dir] {
			l := rlink{dir, name}
			ci, hadCur := p.cur[l]
			fi, hasFinal := w.final[l]
			if hadCur && p.curNodes[ci].IsDir() {
				delta--
			}
			if hasFinal && w.finalNodes[fi].IsDir() {
				delta++
			}
			if hadCur != hasFinal || ci != fi {
				changed = true
			}
		}
		if changed {
			d.Nlink = uint32(int(d.Nlink) + delta)
			d.Mtime = w.now
			if err := w.put(d, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// restoreXattrs gives n (to be written as ino's next version; cur is its
// latest version, nil for a fresh number) the extended attributes that
// old, ino's version as of at (of the old number for a fresh copy), had
// then. Only the attributes that differ get a version in their chain; an
// unchanged set stays as it is (inline in a format 1 store). It returns
// the number of versions written.
func (t *WriteTx) restoreXattrs(n, old, cur *Inode, at HLC) (int, error) {
	want, err := t.xattrsOf(t.sid, old, at)
	if err != nil {
		return 0, err
	}
	if cur != nil {
		have, err := t.xattrsOf(t.sid, cur, Latest)
		if err != nil {
			return 0, err
		}
		if sameXattrs(want, have) {
			n.Xattrs = cur.Xattrs
			return 0, nil
		}
	}
	// The new version has no inline set: what its chains say is its set.
	n.Xattrs = nil
	chains, err := t.xattrsOf(t.sid, &Inode{Ino: n.Ino}, Latest)
	if err != nil {
		return 0, err
	}
	writes := 0
	for _, name := range sortedNames(want) {
		if v, ok := chains[name]; ok && bytes.Equal(v, want[name]) {
			continue
		}
		val := want[name]
		if val == nil {
			val = []byte{} // nil removes
		}
		if err := t.putXattr(n.Ino, name, bytes.Clone(val)); err != nil {
			return writes, err
		}
		writes++
	}
	for _, name := range sortedNames(chains) {
		if _, ok := want[name]; !ok {
			if err := t.putXattr(n.Ino, name, nil); err != nil {
				return writes, err
			}
			writes++
		}
	}
	return writes, nil
}

func sameXattrs(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

// primaryLink picks the name an inode's record points at: its name as of T
// if it has that name again, else its current one, else its first.
func primaryLink(old, cur *Inode, mapIno func(Ino) Ino, links, outside []rlink) (Ino, string) {
	if l := (rlink{mapIno(old.Parent), old.Name}); hasLink(links, l) || hasLink(outside, l) {
		return l.parent, l.name
	}
	if cur != nil {
		if l := (rlink{cur.Parent, cur.Name}); hasLink(links, l) || hasLink(outside, l) {
			return l.parent, l.name
		}
	}
	if len(links) > 0 {
		return links[0].parent, links[0].name
	}
	if len(outside) > 0 {
		return outside[0].parent, outside[0].name
	}
	return old.Parent, old.Name
}

func hasLink(ls []rlink, l rlink) bool {
	for _, x := range ls {
		if x == l {
			return true
		}
	}
	return false
}

func sortedInos[V any](m map[Ino]V) []Ino {
	out := make([]Ino, 0, len(m))
	for ino := range m {
		out = append(out, ino)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// sameVersion reports whether writing n would change nothing of cur that
// a reader sees (ctime and atime aside).
func sameVersion(n, cur *Inode) bool {
	a, b := *n, *cur
	a.Ctime, b.Ctime, a.Atime, b.Atime, a.HLC, b.HLC = 0, 0, 0, 0, 0, 0
	ea, err1 := encode(&a)
	eb, err2 := encode(&b)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}
