package fs

import (
	"context"
	"sort"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// sessionsRoot is the root of a mount without Options.Session: one
// directory per live session, listed by ULID, and by-name/, which lists
// the named live sessions as symlinks NAME -> ../ULID. Names sit beside
// ids there rather than as second entries at the root, so that find, du
// and cp -a of the root see every session once (they do not follow
// symlinks). A session named "by-name" is still reached by its id and as
// by-name/by-name.
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

func (r *sessionsRoot) child(ctx context.Context, h *mvcc.SessionHeader, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	s := r.m.session(h)
	n := &Node{m: r.m, s: s, ino: h.Root}
	in, err := n.inode()
	if err != nil {
		return nil, r.m.toErrno(opLookupSession, err)
	}
	return n.attach(ctx, &r.Inode, in, out), 0
}

// Getattr describes the root.
func (r *sessionsRoot) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) unix.Errno {
	fillSynthDir(&out.Attr, r.m, 0o755)
	all, err := r.m.st.Sessions()
	if err != nil {
		return r.m.toErrno(opGetattrSessions, err)
	}
	out.Nlink++ // by-name/
	for _, s := range all {
		if !s.Forgotten {
			out.Nlink++
		}
	}
	return 0
}

// byNameDir is the name of the root's directory of symlinks by name.
const byNameDir = "by-name"

// Lookup finds by-name/, or a live session by ULID or name.
func (r *sessionsRoot) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	if name == byNameDir {
		fillSynthDir(&out.Attr, r.m, 0o555)
		out.SetAttrTimeout(time.Nanosecond) // 0 would mean the default
		return r.NewInode(ctx, &byName{m: r.m}, gofs.StableAttr{Mode: unix.S_IFDIR, Ino: synthIno([]byte(byNameDir))}), 0
	}
	h, err := r.findSession(name)
	if err != nil {
		noNegativeEntry(out) // sessions appear without notice (fork)
		return nil, r.m.toErrno(opLookupSession, err)
	}
	return r.child(ctx, h, out)
}

// Readdir lists the live sessions by ULID, oldest first.
func (r *sessionsRoot) Readdir(ctx context.Context) (gofs.DirStream, unix.Errno) {
	all, err := r.m.st.Sessions()
	if err != nil {
		return nil, r.m.toErrno(opReaddirSessions, err)
	}
	es := make([]fuse.DirEntry, 0, len(all)+1)
	es = append(es, fuse.DirEntry{Name: byNameDir, Mode: unix.S_IFDIR, Ino: synthIno([]byte(byNameDir))})
	for _, s := range all {
		if !s.Forgotten {
			es = append(es, fuse.DirEntry{Name: s.ID.String(), Mode: unix.S_IFDIR, Ino: uint64(s.Root)})
		}
	}
	return gofs.NewListDirStream(es), 0
}

// Mkdir creates a session named name (listed afterwards by its ULID).
func (r *sessionsRoot) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	if err := mvcc.ValidName(name); err != nil {
		return nil, r.m.toErrno(opMkdirSession, err)
	}
	if _, err := r.findSession(name); err == nil || name == byNameDir {
		return nil, unix.EEXIST
	}
	h, err := r.m.st.CreateSession(name, r.m.opts.Uid, r.m.opts.Gid)
	if err != nil {
		return nil, r.m.toErrno(opMkdirSession, err)
	}
	if perm := mode & 07777; perm != 0o755 {
		if _, err := r.m.st.SetAttr(h.ID, h.Root, mvcc.SetAttr{Mode: &perm}); err != nil {
			return nil, r.m.toErrno(opMkdirSession, err)
		}
	}
	return r.child(ctx, h, out)
}

// Rmdir soft-forgets a session through Options.Forget.
func (r *sessionsRoot) Rmdir(ctx context.Context, name string) unix.Errno {
	if name == byNameDir {
		return unix.EPERM
	}
	h, err := r.findSession(name)
	if err != nil {
		return r.m.toErrno(opForgetSession, err)
	}
	if r.m.opts.Forget == nil {
		return unix.EPERM
	}
	if err := r.m.opts.Forget(h.ID); err != nil {
		return r.m.toErrno(opForgetSession, err)
	}
	r.m.InvalidateSession(h.ID)
	return 0
}

// Statfs reports the data's file system.
func (r *sessionsRoot) Statfs(ctx context.Context, out *fuse.StatfsOut) unix.Errno {
	return r.m.statfs(out)
}

// Only directories (sessions) live at the root.

func (r *sessionsRoot) Unlink(ctx context.Context, name string) unix.Errno { return unix.EPERM }

func (r *sessionsRoot) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return nil, unix.EPERM
}

func (r *sessionsRoot) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, unix.Errno) {
	return nil, nil, 0, unix.EPERM
}

func (r *sessionsRoot) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return nil, unix.EPERM
}

func (r *sessionsRoot) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return nil, unix.EPERM
}

func (r *sessionsRoot) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) unix.Errno {
	return unix.EPERM
}

func (r *sessionsRoot) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) unix.Errno {
	return unix.EPERM
}

func (r *sessionsRoot) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) unix.Errno {
	return unix.EPERM
}

// byName is the root's by-name/ directory: one symlink NAME -> ../ULID per
// named live session (the newest of a name, as lookups at the root
// resolve it). Sessions are created, renamed and forgotten without notice
// to this directory, so none of its entries or attributes are cached.
type byName struct {
	gofs.Inode
	readOnlyDir
	m *Server
}

// byNameLink is one symlink of by-name/. Its target is resolved at every
// readlink: the name may have passed to another session since the lookup.
type byNameLink struct {
	gofs.Inode
	d    *byName
	name string
}

// names returns the named live sessions, name -> ULID, newest winning.
func (d *byName) names() (map[string]mvcc.SessionID, error) {
	all, err := d.m.st.Sessions()
	if err != nil {
		return nil, err
	}
	names := map[string]mvcc.SessionID{}
	for _, s := range all { // oldest first: newest wins
		if !s.Forgotten && s.Name != "" {
			names[s.Name] = s.ID
		}
	}
	return names, nil
}

func linkIno(name string) uint64 { return synthIno([]byte(byNameDir), []byte(name)) }

// Getattr describes by-name/.
func (d *byName) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) unix.Errno {
	fillSynthDir(&out.Attr, d.m, 0o555)
	out.SetTimeout(time.Nanosecond)
	return 0
}

// Lookup resolves a session name to its symlink.
func (d *byName) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	noNegativeEntry(out) // a session may take this name at any time
	names, err := d.names()
	if err != nil {
		return nil, d.m.toErrno(opLookupByName, err)
	}
	if _, ok := names[name]; !ok {
		return nil, unix.ENOENT
	}
	ch := d.NewInode(ctx, &byNameLink{d: d, name: name}, gofs.StableAttr{Mode: unix.S_IFLNK, Ino: linkIno(name)})
	fillLink(&out.Attr, d.m)
	// Not cached at all (go-fuse reads a zero timeout as "the default").
	out.SetEntryTimeout(time.Nanosecond)
	out.SetAttrTimeout(time.Nanosecond)
	return ch, 0
}

// Readdir lists the session names, sorted.
func (d *byName) Readdir(ctx context.Context) (gofs.DirStream, unix.Errno) {
	names, err := d.names()
	if err != nil {
		return nil, d.m.toErrno(opReaddirByName, err)
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	es := make([]fuse.DirEntry, 0, len(sorted))
	for _, n := range sorted {
		es = append(es, fuse.DirEntry{Name: n, Mode: unix.S_IFLNK, Ino: linkIno(n)})
	}
	return gofs.NewListDirStream(es), 0
}

// linkTarget is what every by-name/ symlink holds: ../ULID.
func linkTarget(id mvcc.SessionID) string { return "../" + id.String() }

func fillLink(a *fuse.Attr, m *Server) {
	fillSynthDir(a, m, 0o777)
	a.Mode = unix.S_IFLNK | 0o777
	a.Nlink = 1
	a.Size = uint64(len(linkTarget(mvcc.SessionID{}))) // every ULID has 26 characters
}

// Getattr describes the symlink.
func (l *byNameLink) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) unix.Errno {
	fillLink(&out.Attr, l.d.m)
	out.SetTimeout(time.Nanosecond)
	return 0
}

// Readlink returns ../ULID of the session that has the name now.
func (l *byNameLink) Readlink(ctx context.Context) ([]byte, unix.Errno) {
	names, err := l.d.names()
	if err != nil {
		return nil, l.d.m.toErrno(opReadlinkByName, err)
	}
	id, ok := names[l.name]
	if !ok {
		return nil, unix.ENOENT
	}
	return []byte(linkTarget(id)), 0
}
