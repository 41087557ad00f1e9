package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
)

// sessionsRoot is the root of a mount without Options.Session: one
// directory per live session, listed by ULID.
type sessionsRoot struct {
	gofs.Inode
	m *Server
}

// findSession resolves a root entry name: a ULID, or the name of a live
// session (the newest one with that name).
func (r *sessionsRoot) findSession(name string) (*mvcc.SessionHeader, error) {
	h, err := r.m.st.ResolveSession(name)
	if err != nil {
		return nil, err
	}
	return r.m.st.LiveHeader(h.ID)
}

func (r *sessionsRoot) child(ctx context.Context, h *mvcc.SessionHeader, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	s := r.m.session(h)
	n := &Node{m: r.m, s: s, ino: h.Root}
	in, err := n.inode()
	if err != nil {
		return nil, toErrno("lookup session", err)
	}
	return n.attach(ctx, &r.Inode, in, out), 0
}

// Getattr describes the root.
func (r *sessionsRoot) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillSynthDir(&out.Attr, r.m, 0o755)
	all, err := r.m.st.Sessions()
	if err != nil {
		return toErrno("getattr sessions", err)
	}
	for _, s := range all {
		if !s.Forgotten {
			out.Nlink++
		}
	}
	return 0
}

// Lookup finds a live session by ULID or name.
func (r *sessionsRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	h, err := r.findSession(name)
	if err != nil {
		noNegativeEntry(out) // sessions appear without notice (fork)
		return nil, toErrno("lookup session", err)
	}
	return r.child(ctx, h, out)
}

// Readdir lists the live sessions by ULID, oldest first.
func (r *sessionsRoot) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	all, err := r.m.st.Sessions()
	if err != nil {
		return nil, toErrno("readdir sessions", err)
	}
	es := make([]fuse.DirEntry, 0, len(all))
	for _, s := range all {
		if !s.Forgotten {
			es = append(es, fuse.DirEntry{Name: s.ID.String(), Mode: syscall.S_IFDIR, Ino: uint64(s.Root)})
		}
	}
	return gofs.NewListDirStream(es), 0
}

// Mkdir creates a session named name (listed afterwards by its ULID).
func (r *sessionsRoot) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if err := mvcc.ValidName(name); err != nil {
		return nil, toErrno("mkdir session", err)
	}
	if _, err := r.findSession(name); err == nil {
		return nil, syscall.EEXIST
	}
	h, err := r.m.st.CreateSession(name, r.m.opts.Uid, r.m.opts.Gid)
	if err != nil {
		return nil, toErrno("mkdir session", err)
	}
	if perm := mode & 07777; perm != 0o755 {
		if _, err := r.m.st.SetAttr(h.ID, h.Root, mvcc.SetAttr{Mode: &perm}); err != nil {
			return nil, toErrno("mkdir session", err)
		}
	}
	return r.child(ctx, h, out)
}

// Rmdir soft-forgets a session through Options.Forget.
func (r *sessionsRoot) Rmdir(ctx context.Context, name string) syscall.Errno {
	h, err := r.findSession(name)
	if err != nil {
		return toErrno("forget session", err)
	}
	if r.m.opts.Forget == nil {
		return syscall.EPERM
	}
	if err := r.m.opts.Forget(h.ID); err != nil {
		return toErrno("forget session", err)
	}
	r.m.InvalidateSession(h.ID)
	return 0
}

// Statfs reports the data's file system.
func (r *sessionsRoot) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return r.m.statfs(out)
}

// Only directories (sessions) live at the root.

func (r *sessionsRoot) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EPERM }

func (r *sessionsRoot) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (r *sessionsRoot) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EPERM
}

func (r *sessionsRoot) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (r *sessionsRoot) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EPERM
}

func (r *sessionsRoot) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EPERM
}

func (r *sessionsRoot) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EPERM
}

func (r *sessionsRoot) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) syscall.Errno {
	return syscall.EPERM
}
