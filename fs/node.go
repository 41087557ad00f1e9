package fs

import (
	"context"
	"encoding/binary"
	"hash/fnv"
	"sync/atomic"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// Node is a file, directory or symlink of a session's tree: live (view nil,
// reads mvcc.Latest, writable) or in a past view under .asof/ (read-only).
type Node struct {
	gofs.Inode
	m    *Server
	s    *session
	ino  mvcc.Ino
	view *view
	// kcache is the ContentHLC of the content the kernel's page cache was
	// last filled from (0: unknown); Open keeps the cache when it matches.
	// For a live directory it is the version (HLC) whose listing the
	// kernel may cache.
	kcache atomic.Uint64
	// fill: copies of pages written in pieces (pagefill.go).
	fill pageFill
}

// view is one .asof/<name>/ tree.
type view struct {
	name   string
	at     mvcc.HLC
	stable bool // at is in the past: the view can never change
}

func (n *Node) at() mvcc.HLC {
	if n.view == nil {
		return mvcc.Latest
	}
	return n.view.at
}

func (n *Node) readOnly() bool { return n.view != nil }

// isSessionRoot reports whether n is the live root of its session (where
// .asof and the virtual directories live).
func (n *Node) isSessionRoot() bool { return n.view == nil && n.ino == n.s.root }

// timeout is how long the kernel may cache n's entries and attributes.
func (n *Node) timeout() time.Duration {
	switch {
	case n.view == nil:
		return liveTimeout
	case n.view.stable:
		return pastTimeout
	default:
		return shortTimeout
	}
}

// stableIno is the st_ino of inode ino as n's tree shows it.
func (n *Node) stableIno(ino mvcc.Ino) uint64 {
	if n.view == nil {
		return uint64(ino)
	}
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(n.view.at))
	binary.BigEndian.PutUint64(b[8:], uint64(ino))
	return synthIno(n.s.id[:], []byte(n.view.name), b[:])
}

// synthIno derives an inode number for a node that has no mvcc inode of its
// own (or a past version of one): 2^62 <= ino < 2^63, a range mvcc never
// allocates and go-fuse's automatic numbers (from 2^63) never reach.
func synthIno(parts ...[]byte) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write(p)
		h.Write([]byte{0})
	}
	return 1<<62 | h.Sum64()&(1<<62-1)
}

// inode reads n's inode as n's tree shows it.
func (n *Node) inode() (*mvcc.Inode, error) {
	return n.m.st.InodeAt(n.s.id, n.ino, n.at())
}

// fillAttr copies an inode's attributes; for a live regular file they are
// those of now (see liveInode), which in may predate.
func (n *Node) fillAttr(a *fuse.Attr, in *mvcc.Inode) {
	if n.view == nil && in.IsRegular() {
		// Not given up for a killed caller: the kernel takes the
		// reply's size whoever asked (see liveInode).
		if cur, o, dirty, err := n.m.liveInode(context.Background(), n.s.id, in.Ino); err == nil {
			n.fillAttrOver(a, cur, o, dirty)
			return
		}
	}
	n.fillAttrOver(a, in, overlay{}, false)
}

// fillAttrOver copies in's attributes, overridden by a dirty buffer's.
func (n *Node) fillAttrOver(a *fuse.Attr, in *mvcc.Inode, o overlay, dirty bool) {
	a.Ino = n.stableIno(in.Ino)
	a.Size = in.Size
	a.Blocks = in.Blocks()
	a.Blksize = 4096
	a.Mode = in.Mode
	a.Nlink = in.Nlink
	a.Uid, a.Gid = in.Uid, in.Gid
	a.Rdev = in.Rdev
	setTime(&a.Atime, &a.Atimensec, in.Atime)
	setTime(&a.Mtime, &a.Mtimensec, in.Mtime)
	setTime(&a.Ctime, &a.Ctimensec, in.Ctime)
	if !dirty {
		return
	}
	// A dirty buffer overrides size, mtime, blocks and what is pending.
	a.Size, a.Blocks = o.size, o.blocks
	setTime(&a.Mtime, &a.Mtimensec, o.mtime)
	if o.ctime > in.Ctime {
		setTime(&a.Ctime, &a.Ctimensec, o.ctime)
	}
	p := o.pending
	if p.Mode != nil {
		a.Mode = a.Mode&unix.S_IFMT | *p.Mode&07777
	}
	if p.Uid != nil {
		a.Uid = *p.Uid
	}
	if p.Gid != nil {
		a.Gid = *p.Gid
	}
	if p.Atime != nil {
		setTime(&a.Atime, &a.Atimensec, *p.Atime)
	}
}

// liveInode reads the latest version of a regular file and, while its
// buffer is dirty, what the buffer changes, as one state of now: under the
// buffer's lock, which a commit holds from the store write to the buffer's
// reset. Reading the version first and the buffer after (or an inode read
// before the request's buffer check) can see the old version and then a
// clean buffer, when a commit (the close of a `>>`) falls in between: the
// kernel then takes the old size and puts the next O_APPEND write at the
// old end, over what was just appended. Without a buffer, the version is
// read after the check: any commit before the check is in it.
//
// A caller killed while it waits for the buffer gets errKilled.
func (m *Server) liveInode(ctx context.Context, sid mvcc.SessionID, ino mvcc.Ino) (*mvcc.Inode, overlay, bool, error) {
	f := m.file(sid, ino)
	if f == nil {
		in, err := m.st.LatestInode(sid, ino)
		return in, overlay{}, false, err
	}
	if !f.lockFor(ctx, true) {
		return nil, overlay{}, false, errKilled
	}
	defer f.mu.RUnlock()
	in, err := m.st.LatestInode(sid, ino)
	if err != nil {
		return nil, overlay{}, false, err
	}
	dirty, o := f.attrLocked()
	return in, o, dirty, nil
}

func setTime(sec *uint64, nsec *uint32, ns int64) {
	t := time.Unix(0, ns)
	*sec, *nsec = uint64(t.Unix()), uint32(t.Nanosecond())
}

// newChild returns the go-fuse inode for in, a child of n in n's tree, and
// fills out.
func (n *Node) newChild(ctx context.Context, in *mvcc.Inode, out *fuse.EntryOut) *gofs.Inode {
	child := &Node{m: n.m, s: n.s, ino: in.Ino, view: n.view}
	return child.attach(ctx, &n.Inode, in, out)
}

// attach registers n (whose inode is in) as a child of parent and fills
// out; go-fuse returns the node already known for the same inode, if any.
func (n *Node) attach(ctx context.Context, parent *gofs.Inode, in *mvcc.Inode, out *fuse.EntryOut) *gofs.Inode {
	n.fillAttr(&out.Attr, in)
	return n.register(ctx, parent, in, out)
}

// register is attach with out.Attr filled already.
func (n *Node) register(ctx context.Context, parent *gofs.Inode, in *mvcc.Inode, out *fuse.EntryOut) *gofs.Inode {
	t := n.timeout()
	out.SetEntryTimeout(t)
	out.SetAttrTimeout(t)
	return parent.NewInode(ctx, n, gofs.StableAttr{Mode: in.Mode & unix.S_IFMT, Ino: n.stableIno(in.Ino)})
}

// Getattr reports the inode's attributes (a dirty buffer's size and mtime).
func (n *Node) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) unix.Errno {
	if _, err := n.attrNow(ctx, &out.Attr); err != nil {
		return n.m.toErrno(opGetattr, err)
	}
	out.SetTimeout(n.timeout())
	return 0
}

// attrNow fills a with n's attributes of now and returns the inode it
// read: for a live regular file one store read, in step with its buffer
// (see liveInode), where n.inode and fillAttr would read twice.
func (n *Node) attrNow(ctx context.Context, a *fuse.Attr) (*mvcc.Inode, error) {
	if n.view == nil && n.StableAttr().Mode == unix.S_IFREG {
		in, o, dirty, err := n.m.liveInode(ctx, n.s.id, n.ino)
		if err != nil {
			return nil, err
		}
		n.fillAttrOver(a, in, o, dirty)
		return in, nil
	}
	in, err := n.inode()
	if err != nil {
		return nil, err
	}
	n.fillAttr(a, in)
	return in, nil
}

// Statfs reports the numbers of the file system holding the data.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) unix.Errno {
	return n.m.statfs(out)
}
