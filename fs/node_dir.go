package fs

import (
	"context"
	"errors"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// Directory operations of Node.

// Lookup finds name in the directory as n's tree shows it; at a live
// session root it also finds .asof and the virtual directories.
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	if n.isSessionRoot() {
		if name == ".asof" {
			return n.m.asofChild(ctx, &n.Inode, n.s, out), 0
		}
		if vd, ok := n.m.opts.Virtual[name]; ok {
			return n.m.virtualChild(ctx, &n.Inode, n.s, name, vd, out), 0
		}
	}
	if len(name) > mvcc.NameMax {
		return nil, unix.ENAMETOOLONG
	}
	gen := n.m.invalGen(n.s.id)
	drops := n.m.drops.Load()
	in, err := n.m.st.Lookup(n.s.id, n.ino, name, n.at())
	if err != nil {
		errno := n.m.toErrno(opLookup, err)
		if errno == unix.ENOENT {
			if n.view != nil && !n.view.stable {
				noNegativeEntry(out) // the name may appear as time passes
			} else {
				n.m.negativeEntry(n.s.id, &n.Inode, name, gen, out)
			}
		}
		return nil, errno
	}
	child := &Node{m: n.m, s: n.s, ino: in.Ino, view: n.view}
	if n.view == nil && in.IsRegular() && n.m.file(n.s.id, in.Ino) == nil && n.m.drops.Load() == drops {
		// No buffer of the file existed from before the read until
		// now, so in is its state of now: fillAttr's second read (for
		// a buffer's size) is not needed. A lookup per name of rm -rf's
		// READDIRPLUS and of a stat of each file.
		child.fillAttrOver(&out.Attr, in, overlay{}, false)
		return child.register(ctx, &n.Inode, in, out), 0
	}
	return child.attach(ctx, &n.Inode, in, out), 0
}

// OpendirHandle snapshots the directory listing (see dirHandle).
func (n *Node) OpendirHandle(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, unix.Errno) {
	load := func() ([]fuse.DirEntry, unix.Errno) {
		ds, err := n.m.st.ReadDir(n.s.id, n.ino, n.at())
		if err != nil {
			return nil, n.m.toErrno(opReaddir, err)
		}
		out := make([]fuse.DirEntry, 0, len(ds)+2)
		out = append(out, fuse.DirEntry{Name: ".", Mode: unix.S_IFDIR, Ino: n.StableAttr().Ino})
		parentIno := n.StableAttr().Ino
		if _, p := n.Parent(); p != nil {
			parentIno = p.StableAttr().Ino
		}
		out = append(out, fuse.DirEntry{Name: "..", Mode: unix.S_IFDIR, Ino: parentIno})
		for _, d := range ds {
			out = append(out, fuse.DirEntry{Name: d.Name, Mode: d.Type, Ino: n.stableIno(d.Ino)})
		}
		return out, 0
	}
	var fl uint32
	if n.view != nil && n.view.stable {
		fl = fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE
	} else if n.view == nil {
		// Every change of the entries is a new version of the
		// directory (its mtime), so the kernel's listing is kept
		// while the version is the one it was read at or after (the
		// kernel drops it itself at its own changes in it).
		if in, err := n.inode(); err == nil {
			fl = fuse.FOPEN_CACHE_DIR
			if h := uint64(in.HLC); n.kcache.Load() == h {
				fl |= fuse.FOPEN_KEEP_CACHE
			} else {
				// Unlike a file's pages, a listing outlives an
				// open without KEEP_CACHE (the kernel checks only
				// the mtime it has): drop it before the reply.
				n.NotifyContent(0, 0)
				n.kcache.Store(h)
			}
		}
	}
	return &dirHandle{m: n.m, load: load, sync: n.m.st.Sync}, fl, 0
}

// checkNew refuses names that cannot be created in n.
func (n *Node) checkNew(name string) unix.Errno {
	if n.readOnly() {
		return unix.EROFS
	}
	if len(name) > mvcc.NameMax {
		return unix.ENAMETOOLONG
	}
	if n.isSessionRoot() {
		if reserved, exists := n.m.reserved(name); reserved {
			if exists {
				return unix.EEXIST
			}
			return unix.EPERM
		}
	}
	return 0
}

// checkRemove refuses removing (or renaming) reserved names.
func (n *Node) checkRemove(name string) unix.Errno {
	if n.readOnly() {
		return unix.EROFS
	}
	if n.isSessionRoot() {
		if reserved, _ := n.m.reserved(name); reserved {
			return unix.EPERM
		}
	}
	return 0
}

// newAttr is the owner and mode of a new inode: the caller's ids, with the
// group (and, for directories, the setgid bit) inherited from a setgid
// parent.
func (n *Node) newAttr(ctx context.Context, mode uint32) (mvcc.Attr, unix.Errno) {
	uid, gid := callerIDs(ctx)
	p, err := n.inode()
	if err != nil {
		return mvcc.Attr{}, n.m.toErrno(opCreate, err)
	}
	if p.Mode&unix.S_ISGID != 0 {
		gid = p.Gid
		if mode&unix.S_IFMT == unix.S_IFDIR {
			mode |= unix.S_ISGID
		}
	}
	return mvcc.Attr{Mode: mode, Uid: uid, Gid: gid}, 0
}

func (n *Node) create(ctx context.Context, name string, mode, rdev uint32, target string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	if errno := n.checkNew(name); errno != 0 {
		return nil, errno
	}
	a, errno := n.newAttr(ctx, mode)
	if errno != 0 {
		return nil, errno
	}
	a.Rdev = rdev
	in, err := n.m.st.Create(n.s.id, n.ino, name, a, target)
	if err != nil {
		return nil, n.m.toErrno(opCreate, err)
	}
	return n.newChild(ctx, in, out), 0
}

// Mkdir creates a directory.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return n.create(ctx, name, unix.S_IFDIR|mode&07777, 0, "", out)
}

// Mknod creates a regular file, fifo, socket or device node.
func (n *Node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	if mode&unix.S_IFMT == unix.S_IFDIR || mode&unix.S_IFMT == unix.S_IFLNK {
		return nil, unix.EINVAL
	}
	if mode&unix.S_IFMT == 0 {
		mode |= unix.S_IFREG
	}
	return n.create(ctx, name, mode, dev, "", out)
}

// Symlink creates a symbolic link.
func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return n.create(ctx, name, unix.S_IFLNK|0o777, 0, target, out)
}

// Create creates and opens a regular file (open with O_CREAT).
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, unix.Errno) {
	if errno := n.checkNew(name); errno != 0 {
		return nil, nil, 0, errno
	}
	a, errno := n.newAttr(ctx, unix.S_IFREG|mode&07777)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	// Held (mvcc/held.go): committed with the file's first content, by
	// the close or fsync that commits it; never written, by the last
	// release, an fsync or the ticker (a FLUSH of a clean file may be a
	// close(2) of a dup, as a shell's redirection does, before the
	// writes).
	in, _, err := n.m.st.CreateHeld(n.s.id, n.ino, name, a)
	var child *gofs.Inode
	existed := false
	switch {
	case errors.Is(err, mvcc.ErrExist) && flags&unix.O_EXCL == 0:
		// Lost a race with another creator: open what is there, as
		// open(2) without O_EXCL does.
		if in, err = n.m.st.Lookup(n.s.id, n.ino, name, mvcc.Latest); err != nil {
			return nil, nil, 0, n.m.toErrno(opCreate, err)
		}
		if !in.IsRegular() {
			return nil, nil, 0, unix.EISDIR
		}
		existed = true
		if c := n.GetChild(name); c != nil && c.StableAttr().Ino == uint64(in.Ino) {
			n.fillAttr(&out.Attr, in)
			child = c
		} else {
			child = n.newChild(ctx, in, out)
		}
	case err != nil:
		return nil, nil, 0, n.m.toErrno(opCreate, err)
	default:
		child = n.newChild(ctx, in, out)
	}
	cn, ok := child.Operations().(*Node)
	if !ok {
		return nil, nil, 0, unix.EIO
	}
	fh, fl, errno := cn.open(ctx, flags, existed)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, fh, fl, 0
}

// Link adds a hard link to target.
func (n *Node) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	if errno := n.checkNew(name); errno != 0 {
		return nil, errno
	}
	t, ok := target.(*Node)
	if !ok || t.readOnly() {
		return nil, unix.EROFS
	}
	if t.s.id != n.s.id {
		return nil, unix.EXDEV
	}
	in, err := n.m.st.Link(n.s.id, t.ino, n.ino, name)
	if err != nil {
		return nil, n.m.toErrno(opLink, err)
	}
	if f := n.m.file(t.s.id, t.ino); f != nil {
		f.linked() // an O_TMPFILE's buffer can be committed now
	}
	return n.newChild(ctx, in, out), 0
}

// Unlink removes a non-directory entry; open handles keep working.
func (n *Node) Unlink(ctx context.Context, name string) unix.Errno {
	if errno := n.checkRemove(name); errno != 0 {
		return errno
	}
	return n.m.toErrno(opUnlink, n.m.st.Remove(n.s.id, n.ino, name, false))
}

// Rmdir removes an empty directory.
func (n *Node) Rmdir(ctx context.Context, name string) unix.Errno {
	if errno := n.checkRemove(name); errno != 0 {
		return errno
	}
	return n.m.toErrno(opRmdir, n.m.st.Remove(n.s.id, n.ino, name, true))
}

// Rename is rename(2)/renameat2(2) (RENAME_NOREPLACE, RENAME_EXCHANGE,
// RENAME_WHITEOUT: the kernel has checked CAP_MKNOD; the whiteout is the
// caller's, and is created in the rename's commit).
func (n *Node) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) unix.Errno {
	if errno := n.checkRemove(name); errno != 0 {
		return errno
	}
	np, ok := newParent.(*Node)
	if !ok {
		return unix.EXDEV
	}
	if errno := np.checkNew(newName); errno != 0 {
		if errno == unix.EEXIST {
			errno = unix.EPERM
		}
		return errno
	}
	if np.s.id != n.s.id {
		return unix.EXDEV
	}
	uid, gid := callerIDs(ctx)
	return n.m.toErrno(opRename, n.m.st.RenameAs(n.s.id, n.ino, name, np.ino, newName, flags, mvcc.Attr{Uid: uid, Gid: gid}))
}

// Tmpfile creates an unnamed regular file (open with O_TMPFILE); linkat
// can name it later.
func (n *Node) Tmpfile(ctx context.Context, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, unix.Errno) {
	if n.readOnly() {
		return nil, nil, 0, unix.EROFS
	}
	a, errno := n.newAttr(ctx, unix.S_IFREG|mode&07777)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	in, err := n.m.st.CreateUnlinked(n.s.id, n.ino, a)
	if err != nil {
		return nil, nil, 0, n.m.toErrno(opTmpfile, err)
	}
	child := n.newChild(ctx, in, out)
	cn, ok := child.Operations().(*Node)
	if !ok {
		return nil, nil, 0, unix.EIO
	}
	fh, fl, errno := cn.open(ctx, flags, false)
	if errno != 0 {
		return nil, nil, 0, errno
	}
	return child, fh, fl, 0
}
