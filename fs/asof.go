package fs

import (
	"context"
	"errors"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/timetravel"
	"golang.org/x/sys/unix"
)

// asofDir is a session's .asof/ directory: looking up a name resolves it
// (timetravel.Resolve) and returns the session's root as of that HLC, a
// read-only tree; readdir lists timetravel.Points.
type asofDir struct {
	gofs.Inode
	readOnlyDir
	m *Server
	s *session
}

// asofChild returns the .asof node of session s (under parent).
func (m *Server) asofChild(ctx context.Context, parent *gofs.Inode, s *session, out *fuse.EntryOut) *gofs.Inode {
	d := &asofDir{m: m, s: s}
	d.fill(&out.Attr)
	out.SetEntryTimeout(shortTimeout)
	out.SetAttrTimeout(shortTimeout)
	return parent.NewInode(ctx, d, gofs.StableAttr{Mode: unix.S_IFDIR, Ino: synthIno(s.id[:], []byte(".asof"))})
}

func (d *asofDir) fill(a *fuse.Attr) {
	fillSynthDir(a, d.m, 0o555)
	a.Nlink = 1 // unknown (as btrfs says it): find must not assume a leaf
	if root, err := d.m.st.LatestInode(d.s.id, d.s.root); err == nil {
		a.Uid, a.Gid = root.Uid, root.Gid
		setTime(&a.Mtime, &a.Mtimensec, int64(d.m.st.LastHLC()))
		setTime(&a.Ctime, &a.Ctimensec, int64(d.m.st.LastHLC()))
	}
}

// fillSynthDir describes a directory that has no inode in the store.
func fillSynthDir(a *fuse.Attr, m *Server, perm uint32) {
	a.Mode = unix.S_IFDIR | perm
	a.Nlink = 2
	a.Uid, a.Gid = m.opts.Uid, m.opts.Gid
	a.Blksize = 4096
	t := m.started.UnixNano()
	setTime(&a.Atime, &a.Atimensec, t)
	setTime(&a.Mtime, &a.Mtimensec, t)
	setTime(&a.Ctime, &a.Ctimensec, t)
}

// Getattr describes .asof itself.
func (d *asofDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) unix.Errno {
	d.fill(&out.Attr)
	out.SetTimeout(shortTimeout)
	return 0
}

// Lookup resolves a point in time; a name that is no HLC, RFC 3339 time or
// checkpoint, or a time before the session existed, is ENOENT.
func (d *asofDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	// A name that resolves to nothing yet may later (a checkpoint):
	// never a negative entry.
	at, err := timetravel.Resolve(d.m.st, d.s.id, name)
	if err != nil {
		noNegativeEntry(out)
		if errors.Is(err, mvcc.ErrHLCRange) {
			return nil, unix.ENOENT // no such point in time: no such directory
		}
		return nil, d.m.toErrno(opAsof, err)
	}
	root, err := d.m.st.InodeAt(d.s.id, d.s.root, at)
	if err != nil {
		noNegativeEntry(out)
		return nil, d.m.toErrno(opAsof, err)
	}
	v := &view{name: name, at: at, stable: at < d.m.st.LastHLC()}
	n := &Node{m: d.m, s: d.s, ino: d.s.root, view: v}
	child := n.attach(ctx, &d.Inode, root, out)
	if _, perr := mvcc.ParseHLC(name); perr != nil {
		out.SetEntryTimeout(shortTimeout) // a checkpoint name may be pointed elsewhere
	}
	return child, 0
}

// Readdir lists the session's commit points, oldest first, then its
// checkpoints.
func (d *asofDir) Readdir(ctx context.Context) (gofs.DirStream, unix.Errno) {
	pts, err := timetravel.Points(d.m.st, d.s.id)
	if err != nil {
		return nil, d.m.toErrno(opAsofReaddir, err)
	}
	es := make([]fuse.DirEntry, 0, len(pts))
	for _, p := range pts {
		v := &Node{s: d.s, view: &view{name: p.Name, at: p.HLC}}
		es = append(es, fuse.DirEntry{Name: p.Name, Mode: unix.S_IFDIR, Ino: v.stableIno(d.s.root)})
	}
	return gofs.NewListDirStream(es), 0
}

// Statfs reports the data's file system.
func (d *asofDir) Statfs(ctx context.Context, out *fuse.StatfsOut) unix.Errno {
	return d.m.statfs(out)
}
