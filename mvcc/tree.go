package mvcc

import (
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sys/unix"
)

// Filesystem operations. Each is one commit: new versions of the entries and
// inodes it touches, all stamped with one HLC, and one event in the log.
// They enforce POSIX rules (EEXIST, ENOTEMPTY, ...) and return the sentinel
// errors of errors.go.

// Attr is what a new inode starts with.
type Attr struct {
	Mode     uint32 // type bits | permissions
	Uid, Gid uint32
	Rdev     uint32
}

// SetAttr changes the attributes whose pointer is non-nil.
type SetAttr struct {
	Mode         *uint32 // permission bits only
	Uid, Gid     *uint32
	Size         *uint64
	Atime, Mtime *int64 // ns since the epoch
}

// Rename flags, as renameat2(2).
const (
	RenameNoReplace = 1 // RENAME_NOREPLACE
	RenameExchange  = 2 // RENAME_EXCHANGE
	// RenameWhiteout (RENAME_WHITEOUT) leaves a whiteout at the old
	// name, in the same commit: a character device 0/0 with mode 0,
	// what overlayfs takes for a name deleted from its lower layers.
	RenameWhiteout = 4
)

// dirOf loads parent and checks it is a live directory.
func (t *WriteTx) dirOf(parent Ino) (*Inode, error) {
	p, err := t.Latest(parent)
	if err != nil {
		return nil, err
	}
	if err := liveDir(p, parent); err != nil {
		return nil, err
	}
	return p, nil
}

// liveDir checks that p (inode parent) is a directory not removed.
func liveDir(p *Inode, parent Ino) error {
	if !p.IsDir() {
		return fmt.Errorf("%w: inode %d", ErrNotDir, parent)
	}
	if p.Nlink == 0 {
		return fmt.Errorf("%w: directory was removed", ErrNotFound)
	}
	return nil
}

// touchDir bumps a directory's mtime/ctime and link count.
func (t *WriteTx) touchDir(d *Inode, nlinkDelta int) error {
	d.Nlink = uint32(int(d.Nlink) + nlinkDelta)
	d.Mtime, d.Ctime = nowNs(), nowNs()
	return t.PutInode(d)
}

// pathOf names the entry name in directory parent for the event log.
func (t *WriteTx) pathOf(parent Ino, name string) string {
	p := t.dirPath(parent)
	if p == "." || p == "" {
		return name
	}
	return p + "/" + name
}

// dirPath returns the path of directory dir from the store's cache of
// directory paths, or walks the parent chain (one inode read per level)
// and stages the answer for the cache. Staged paths reach the cache only
// when the commit's function succeeds (see Update); a commit that moves or
// removes a directory drops the session's cache instead.
func (t *WriteTx) dirPath(dir Ino) string {
	if p, ok := t.s.paths.get(t.sid, dir); ok && !t.treeChanged {
		return p
	}
	p, err := t.Path(t.sid, dir, Latest)
	if err != nil {
		return ""
	}
	if !t.treeChanged {
		if t.staged == nil {
			t.staged = map[Ino]string{}
		}
		t.staged[dir] = p
	}
	return p
}

// Create makes a new inode (file, directory, symlink, fifo, ...) named name
// in parent. For a symlink, target is its content.
func (s *Store) Create(sid SessionID, parent Ino, name string, a Attr, target string) (*Inode, error) {
	if err := ValidName(name); err != nil {
		return nil, err
	}
	var n *Inode
	var first, end Ino
	reserve := s.held.poolEmpty()
	_, err := s.Update(sid, func(t *WriteTx) error {
		ino, err := t.AllocIno()
		if err != nil {
			return err
		}
		if reserve {
			if first, end, err = t.reserveInos(inoBlock); err != nil {
				return err
			}
		}
		now := nowNs()
		n = &Inode{Ino: ino, Mode: a.Mode, Uid: a.Uid, Gid: a.Gid, Rdev: a.Rdev, Nlink: 1,
			Atime: now, Mtime: now, Ctime: now, Parent: parent, Name: name, ContentHLC: t.hlc}
		op, delta := OpCreate, 0
		switch a.Mode & sIFMT {
		case sIFDIR:
			n.Nlink, op, delta = 2, OpMkdir, 1
		case sIFLNK:
			n.Target, n.Size, op = target, uint64(len(target)), OpSymlink
		case 0:
			n.Mode |= sIFREG
		}
		if err := t.putNew(n, delta); err != nil {
			return err
		}
		t.SetEvent(Event{Op: op, Path: t.pathOf(parent, name), Ino: ino, Path2: target})
		return nil
	})
	if err == nil && reserve {
		s.held.addPool(first, end) // only now: the commit made them ours
	}
	return n, err
}

// putNew writes the new inode n, its entry (n.Name in n.Parent, which must
// be a live directory without that name) and the directory's change
// (delta: its added subdirectories): the writes of every create.
func (t *WriteTx) putNew(n *Inode, delta int) error {
	dir, err := t.dirOf(n.Parent)
	if err != nil {
		return err
	}
	if _, err := t.Lookup(t.sid, n.Parent, n.Name, Latest); err == nil {
		return fmt.Errorf("%w: %q", ErrExist, n.Name)
	} else if !errors.Is(err, ErrNotFound) {
		return err
	}
	if err := t.PutInode(n); err != nil {
		return err
	}
	if err := t.PutDentry(n.Parent, n.Name, n.Ino, n.Mode&sIFMT); err != nil {
		return err
	}
	return t.touchDir(dir, delta)
}

// Link adds the name newName in newParent for the existing inode ino.
func (s *Store) Link(sid SessionID, ino, newParent Ino, newName string) (*Inode, error) {
	if err := ValidName(newName); err != nil {
		return nil, err
	}
	var n *Inode
	_, err := s.Update(sid, func(t *WriteTx) error {
		dir, err := t.dirOf(newParent)
		if err != nil {
			return err
		}
		if n, err = t.Latest(ino); err != nil {
			return err
		}
		if n.IsDir() {
			return fmt.Errorf("%w: hard link to a directory", ErrPerm)
		}
		if _, err := t.Lookup(sid, newParent, newName, Latest); err == nil {
			return fmt.Errorf("%w: %q", ErrExist, newName)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		from := t.pathOf(n.Parent, n.Name)
		n.Nlink++
		n.Ctime = nowNs()
		n.Parent, n.Name = newParent, newName
		if err := t.PutInode(n); err != nil {
			return err
		}
		if err := t.PutDentry(newParent, newName, ino, n.Mode&sIFMT); err != nil {
			return err
		}
		if err := t.touchDir(dir, 0); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpLink, Path: from, Path2: t.pathOf(newParent, newName), Ino: ino})
		return nil
	})
	return n, err
}

// Remove unlinks name from parent: rmdir when dir is true (the directory
// must be empty), unlink otherwise (name must not be a directory). The inode
// keeps its versions; at nlink 0 it lives on only for open handles and
// as-of reads.
func (s *Store) Remove(sid SessionID, parent Ino, name string, dir bool) error {
	_, err := s.Update(sid, func(t *WriteTx) error {
		pd, err := t.dirOf(parent)
		if err != nil {
			return err
		}
		d, err := t.Lookup(sid, parent, name, Latest)
		if err != nil {
			return err
		}
		n, err := t.Latest(d.Ino)
		if err != nil {
			return err
		}
		path := t.pathOf(parent, name)
		op, delta := OpUnlink, 0
		if dir {
			if !n.IsDir() {
				return fmt.Errorf("%w: %q", ErrNotDir, name)
			}
			if err := t.checkEmpty(n.Ino); err != nil {
				return err
			}
			op, delta, n.Nlink = OpRmdir, -1, 0
			t.treeChanged = true
		} else {
			if n.IsDir() {
				return fmt.Errorf("%w: %q", ErrIsDir, name)
			}
			n.Nlink--
		}
		n.Ctime = nowNs()
		if err := t.unlinkedFrom(n, parent, name); err != nil {
			return err
		}
		if err := t.PutDentry(parent, name, 0, 0); err != nil {
			return err
		}
		if err := t.touchDir(pd, delta); err != nil {
			return err
		}
		t.SetEvent(Event{Op: op, Path: path, Ino: n.Ino})
		return nil
	})
	return err
}

// unlinkedFrom writes n after one of its links (parent/name) went away,
// re-pointing its primary link at a remaining one if needed.
func (t *WriteTx) unlinkedFrom(n *Inode, parent Ino, name string) error {
	if n.Nlink > 0 && n.Parent == parent && n.Name == name {
		// Find another link: only hard-linked files get here. Look in the
		// same directory first, where links usually are, then in the tree.
		found := false
		err := t.ReadDir(t.sid, parent, Latest, func(d Dentry) bool {
			if d.Ino == n.Ino && d.Name != name {
				n.Name, found = d.Name, true
			}
			return !found
		})
		if err == nil && !found {
			err = t.WalkTree(t.sid, Latest, func(e TreeEntry) error {
				if e.Node.Ino == n.Ino && (e.Parent != parent || e.Name != name) {
					n.Parent, n.Name = e.Parent, e.Name
					return errStopWalk
				}
				return nil
			})
			if errors.Is(err, errStopWalk) {
				err = nil
			}
		}
		if err != nil {
			return err
		}
	}
	return t.PutInode(n)
}

var errStopWalk = errors.New("stop walk")

func (t *WriteTx) checkEmpty(dir Ino) error {
	empty := true
	if err := t.ReadDir(t.sid, dir, Latest, func(Dentry) bool { empty = false; return false }); err != nil {
		return err
	}
	if !empty {
		return ErrNotEmpty
	}
	return nil
}

// Rename moves oldParent/oldName to newParent/newName with rename(2) and
// renameat2(2) semantics (flags RenameNoReplace, RenameExchange,
// RenameWhiteout; a whiteout is owned by root, see RenameAs).
func (s *Store) Rename(sid SessionID, oldParent Ino, oldName string, newParent Ino, newName string, flags uint32) error {
	return s.RenameAs(sid, oldParent, oldName, newParent, newName, flags, Attr{})
}

// RenameAs is Rename with the owner (Uid, Gid) of the whiteout that
// RenameWhiteout leaves: the caller's, as for a mknod.
func (s *Store) RenameAs(sid SessionID, oldParent Ino, oldName string, newParent Ino, newName string, flags uint32, owner Attr) error {
	if err := ValidName(newName); err != nil {
		return err
	}
	if flags&^(RenameNoReplace|RenameExchange|RenameWhiteout) != 0 ||
		flags&RenameExchange != 0 && flags&(RenameNoReplace|RenameWhiteout) != 0 {
		return fmt.Errorf("%w: rename flags %#x", ErrInvalid, flags)
	}
	_, err := s.Update(sid, func(t *WriteTx) error {
		r, err := t.loadRename(oldParent, oldName, newParent, newName)
		if err != nil {
			return err
		}
		if noop, err := t.checkRename(r, flags); err != nil || noop {
			return err
		}
		r.now = nowNs()
		if flags&RenameExchange != 0 {
			return t.exchange(r)
		}
		return t.replace(r, flags&RenameWhiteout != 0, owner)
	})
	return err
}

// renaming is one rename inside its commit.
type renaming struct {
	oldParent, newParent Ino
	oldName, newName     string
	op, np               *Inode // the two directories (one, within a directory)
	src, dst             *Inode // dst: what newName names now, or nil
	from, to             string // the paths the event names
	now                  int64
}

// loadRename reads what a rename of oldParent/oldName to
// newParent/newName involves.
func (t *WriteTx) loadRename(oldParent Ino, oldName string, newParent Ino, newName string) (*renaming, error) {
	r := &renaming{oldParent: oldParent, newParent: newParent, oldName: oldName, newName: newName}
	var err error
	if r.op, err = t.dirOf(oldParent); err != nil {
		return nil, err
	}
	r.np = r.op
	if newParent != oldParent {
		if r.np, err = t.dirOf(newParent); err != nil {
			return nil, err
		}
	}
	sd, err := t.Lookup(t.sid, oldParent, oldName, Latest)
	if err != nil {
		return nil, err
	}
	if r.src, err = t.Latest(sd.Ino); err != nil {
		return nil, err
	}
	r.from, r.to = t.pathOf(oldParent, oldName), t.pathOf(newParent, newName)
	if dd, err := t.Lookup(t.sid, newParent, newName, Latest); err == nil {
		if r.dst, err = t.Latest(dd.Ino); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	return r, nil
}

// checkRename refuses what flags and the tree forbid. noop: both names
// are the same inode, which POSIX leaves alone (the event is set).
func (t *WriteTx) checkRename(r *renaming, flags uint32) (noop bool, err error) {
	src, dst := r.src, r.dst
	switch {
	case flags&RenameNoReplace != 0 && dst != nil:
		return false, fmt.Errorf("%w: %q", ErrExist, r.newName)
	case flags&RenameExchange != 0 && dst == nil:
		return false, fmt.Errorf("%w: %q", ErrNotFound, r.newName)
	case dst != nil && dst.Ino == src.Ino:
		t.SetEvent(Event{Op: OpRename, Path: r.from, Path2: r.to, Ino: src.Ino})
		return true, nil
	}
	if src.IsDir() || dst != nil && dst.IsDir() {
		t.treeChanged = true // directory paths change
	}
	if src.IsDir() {
		if err := t.checkNotAncestor(src.Ino, r.newParent); err != nil {
			return false, err
		}
	}
	if flags&RenameExchange != 0 && dst.IsDir() {
		if err := t.checkNotAncestor(dst.Ino, r.oldParent); err != nil {
			return false, err
		}
	}
	return false, nil
}

// exchange swaps the two names (RenameExchange).
func (t *WriteTx) exchange(r *renaming) error {
	src, dst := r.src, r.dst
	if err := t.PutDentry(r.oldParent, r.oldName, dst.Ino, dst.Mode&sIFMT); err != nil {
		return err
	}
	if err := t.PutDentry(r.newParent, r.newName, src.Ino, src.Mode&sIFMT); err != nil {
		return err
	}
	src.Parent, src.Name, src.Ctime = r.newParent, r.newName, r.now
	dst.Parent, dst.Name, dst.Ctime = r.oldParent, r.oldName, r.now
	if err := t.PutInode(src); err != nil {
		return err
	}
	if err := t.PutInode(dst); err != nil {
		return err
	}
	if r.oldParent != r.newParent && src.IsDir() != dst.IsDir() {
		d := 1
		if dst.IsDir() {
			d = -1
		}
		if err := t.touchDir(r.op, -d); err != nil {
			return err
		}
		return t.finishRename(r.np, d, r.from, r.to, src.Ino, OpExchange)
	}
	if err := t.touchDir(r.op, 0); err != nil {
		return err
	}
	if r.oldParent != r.newParent {
		if err := t.touchDir(r.np, 0); err != nil {
			return err
		}
	}
	t.SetEvent(Event{Op: OpExchange, Path: r.from, Path2: r.to, Ino: src.Ino})
	return nil
}

// replace moves src to the new name, unlinking what had it; whiteout
// leaves a whiteout owned by owner at the old name.
func (t *WriteTx) replace(r *renaming, whiteout bool, owner Attr) error {
	src, dst := r.src, r.dst
	npDelta := 0
	if dst != nil {
		switch {
		case src.IsDir() && !dst.IsDir():
			return fmt.Errorf("%w: %q", ErrNotDir, r.newName)
		case !src.IsDir() && dst.IsDir():
			return fmt.Errorf("%w: %q", ErrIsDir, r.newName)
		case dst.IsDir():
			if err := t.checkEmpty(dst.Ino); err != nil {
				return err
			}
			dst.Nlink = 0
			npDelta--
		default:
			dst.Nlink--
		}
		dst.Ctime = r.now
		if err := t.unlinkedFrom(dst, r.newParent, r.newName); err != nil {
			return err
		}
	}
	if whiteout {
		if err := t.putWhiteout(r.oldParent, r.oldName, owner, r.now); err != nil {
			return err
		}
	} else if err := t.PutDentry(r.oldParent, r.oldName, 0, 0); err != nil {
		return err
	}
	if err := t.PutDentry(r.newParent, r.newName, src.Ino, src.Mode&sIFMT); err != nil {
		return err
	}
	src.Parent, src.Name, src.Ctime = r.newParent, r.newName, r.now
	if err := t.PutInode(src); err != nil {
		return err
	}
	if src.IsDir() && r.oldParent != r.newParent {
		npDelta++
		if err := t.touchDir(r.op, -1); err != nil {
			return err
		}
	} else if r.oldParent != r.newParent {
		if err := t.touchDir(r.op, 0); err != nil {
			return err
		}
	}
	dir := r.np
	if r.oldParent == r.newParent {
		dir = r.op
	}
	if err := t.finishRename(dir, npDelta, r.from, r.to, src.Ino, OpRename); err != nil {
		return err
	}
	if whiteout {
		t.ev.Detail = "whiteout" // left at Path
	}
	return nil
}

// putWhiteout names a new whiteout inode (character device 0/0, mode 0)
// name in parent, in place of what was there.
func (t *WriteTx) putWhiteout(parent Ino, name string, owner Attr, now int64) error {
	ino, err := t.AllocIno()
	if err != nil {
		return err
	}
	w := &Inode{Ino: ino, Mode: unix.S_IFCHR, Uid: owner.Uid, Gid: owner.Gid, Nlink: 1,
		Atime: now, Mtime: now, Ctime: now, Parent: parent, Name: name, ContentHLC: t.hlc}
	if err := t.PutInode(w); err != nil {
		return err
	}
	return t.PutDentry(parent, name, ino, unix.S_IFCHR)
}

func (t *WriteTx) finishRename(dir *Inode, delta int, from, to string, ino Ino, op Op) error {
	// dir may be stale if it was also the other parent; reload to keep the
	// link count exact.
	cur, err := t.Latest(dir.Ino)
	if err != nil {
		return err
	}
	if err := t.touchDir(cur, delta); err != nil {
		return err
	}
	t.SetEvent(Event{Op: op, Path: from, Path2: to, Ino: ino})
	return nil
}

// checkNotAncestor refuses to move directory dir below itself.
func (t *WriteTx) checkNotAncestor(dir, newParent Ino) error {
	h, err := t.Header(t.sid)
	if err != nil {
		return err
	}
	for p, i := newParent, 0; p != h.Root && p != 0; i++ {
		if p == dir {
			return fmt.Errorf("%w: cannot move a directory into itself", ErrInvalid)
		}
		if i > 4096 {
			return fmt.Errorf("%w: parent chain of inode %d", ErrCorrupt, newParent)
		}
		n, err := t.Latest(p)
		if err != nil {
			return err
		}
		p = n.Parent
	}
	return nil
}

// SetAttr changes attributes of ino (chmod, chown, utimens, truncate).
func (s *Store) SetAttr(sid SessionID, ino Ino, a SetAttr) (*Inode, error) {
	return s.SetAttrCtx(context.Background(), sid, ino, a)
}

// SetAttrCtx is SetAttr that ctx ends early (before the commit: a
// truncate re-reads the data it keeps). A truncate stores no zeros: what
// it adds, and the holes it keeps, are holes.
func (s *Store) SetAttrCtx(ctx context.Context, sid SessionID, ino Ino, a SetAttr) (*Inode, error) {
	var content *Content
	if a.Size != nil {
		// Truncate stores the new content before the commit (see PutContent).
		old, err := s.LatestInode(sid, ino)
		if err != nil {
			return nil, err
		}
		if old.IsDir() {
			return nil, fmt.Errorf("%w: truncate of a directory", ErrIsDir)
		}
		if *a.Size > MaxFileSize {
			return nil, fmt.Errorf("%w: truncate of inode %d to %d bytes", ErrTooBig, ino, *a.Size)
		}
		if *a.Size != old.Size {
			size := int64(*a.Size)
			sp := Sparse{R: s.Reader(old), Size: size, Data: old.DataRanges(size)}
			if content, err = s.PutSparse(ctx, sp); err != nil {
				return nil, err
			}
		}
	}
	var n *Inode
	_, err := s.Update(sid, func(t *WriteTx) error {
		var err error
		if n, err = t.Latest(ino); err != nil {
			return err
		}
		now := nowNs()
		op := OpSetattr
		if a.Mode != nil {
			n.Mode = n.Mode&sIFMT | *a.Mode&^uint32(sIFMT)
			op = OpChmod
		}
		if a.Uid != nil {
			n.Uid, op = *a.Uid, OpChown
		}
		if a.Gid != nil {
			n.Gid, op = *a.Gid, OpChown
		}
		if a.Atime != nil {
			n.Atime, op = *a.Atime, OpUtimens
		}
		if a.Mtime != nil {
			n.Mtime, op = *a.Mtime, OpUtimens
		}
		if content != nil {
			content.Apply(n)
			n.ContentHLC = t.hlc
			if a.Mtime == nil {
				n.Mtime = now
			}
			op = OpTruncate
		}
		n.Ctime = now
		if err := t.PutInode(n); err != nil {
			return err
		}
		t.SetEvent(Event{Op: op, Path: t.pathOf(n.Parent, n.Name), Ino: ino, Size: int64(n.Size)})
		return nil
	})
	return n, err
}

// WriteContent commits new content for ino, read from r (the file's whole
// new content), with mtime (ns). Other attributes are kept. ctx ends the
// storing of a large content between chunks, with ctx.Err() and nothing
// committed.
func (s *Store) WriteContent(ctx context.Context, sid SessionID, ino Ino, r io.Reader, mtime int64) (*Inode, error) {
	return s.WriteContentAttr(ctx, sid, ino, r, mtime, SetAttr{})
}

// LatestInode reads the current version of ino.
func (s *Store) LatestInode(sid SessionID, ino Ino) (*Inode, error) {
	return s.InodeAt(sid, ino, Latest)
}

// InodeAt reads ino as of at.
func (s *Store) InodeAt(sid SessionID, ino Ino, at HLC) (*Inode, error) {
	if at == Latest {
		if n, ok := s.heldInode(sid, ino); ok {
			return n, nil
		}
	}
	var n *Inode
	err := s.View(func(t *ReadTx) error {
		var err error
		n, err = t.Inode(sid, ino, at)
		return err
	})
	return n, err
}

// Lookup finds name in parent as of at and returns its inode.
func (s *Store) Lookup(sid SessionID, parent Ino, name string, at HLC) (*Inode, error) {
	if at == Latest {
		if n, ok := s.heldEntry(sid, parent, name); ok {
			return n, nil
		}
	}
	var n *Inode
	err := s.View(func(t *ReadTx) error {
		d, err := t.Lookup(sid, parent, name, at)
		if err != nil {
			return err
		}
		n, err = t.Inode(sid, d.Ino, at)
		return err
	})
	return n, err
}

// ReadDir lists dir as of at.
func (s *Store) ReadDir(sid SessionID, dir Ino, at HLC) ([]Dentry, error) {
	var out []Dentry
	err := s.View(func(t *ReadTx) error {
		return t.ReadDir(sid, dir, at, func(d Dentry) bool { out = append(out, d); return true })
	})
	return out, err
}

// Walk resolves a slash-separated path relative to the session root as of
// at ("" or "." is the root). Symlinks are not followed.
func (s *Store) Walk(sid SessionID, path string, at HLC) (*Inode, error) {
	var n *Inode
	err := s.View(func(t *ReadTx) error {
		var err error
		n, err = t.Walk(sid, path, at)
		return err
	})
	return n, err
}

// Walk resolves path inside this snapshot.
func (t *ReadTx) Walk(sid SessionID, path string, at HLC) (*Inode, error) {
	h, err := t.Header(sid)
	if err != nil {
		return nil, err
	}
	ino := h.Root
	for _, name := range splitPath(path) {
		d, err := t.Lookup(sid, ino, name, at)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		ino = d.Ino
	}
	return t.Inode(sid, ino, at)
}

func splitPath(p string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '/' {
			if c := p[start:i]; c != "" && c != "." {
				out = append(out, c)
			}
			start = i + 1
		}
	}
	return out
}
