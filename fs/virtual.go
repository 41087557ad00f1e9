package fs

import (
	"context"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// virtualDir serves a VirtualDir hook at a session root.
type virtualDir struct {
	gofs.Inode
	m    *Server
	s    *session
	name string
	vd   VirtualDir
}

// virtualFile is one generated file; it is regenerated on every open.
type virtualFile struct {
	gofs.Inode
	d    *virtualDir
	name string
	size uint64
}

// virtualHandle holds the content generated at open.
type virtualHandle struct{ data []byte }

func (m *Server) virtualChild(ctx context.Context, parent *gofs.Inode, s *session, name string, vd VirtualDir, out *fuse.EntryOut) *gofs.Inode {
	d := &virtualDir{m: m, s: s, name: name, vd: vd}
	fillSynthDir(&out.Attr, m, 0o555)
	out.Attr.Nlink = 1
	return parent.NewInode(ctx, d, gofs.StableAttr{Mode: syscall.S_IFDIR, Ino: synthIno(s.id[:], []byte(name))})
}

// Getattr describes the directory.
func (d *virtualDir) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	fillSynthDir(&out.Attr, d.m, 0o555)
	out.Nlink = 1
	return 0
}

// Readdir lists what the hook's List returns.
func (d *virtualDir) Readdir(ctx context.Context) (gofs.DirStream, syscall.Errno) {
	var names []string
	if d.vd.List != nil {
		var err error
		if names, err = d.vd.List(d.s.id); err != nil {
			return nil, toErrno(d.name, err)
		}
	}
	es := make([]fuse.DirEntry, 0, len(names))
	for _, nm := range names {
		es = append(es, fuse.DirEntry{Name: nm, Mode: syscall.S_IFREG, Ino: synthIno(d.s.id[:], []byte(d.name), []byte(nm))})
	}
	return gofs.NewListDirStream(es), 0
}

// Lookup generates the file once to learn whether it exists and its size.
func (d *virtualDir) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	if d.vd.Open == nil {
		noNegativeEntry(out)
		return nil, syscall.ENOENT
	}
	data, err := d.vd.Open(d.s.id, name)
	if err != nil {
		noNegativeEntry(out) // generated content: may exist next time
		return nil, toErrno(d.name, err)
	}
	f := &virtualFile{d: d, name: name, size: uint64(len(data))}
	f.fill(&out.Attr)
	out.SetEntryTimeout(0)
	out.SetAttrTimeout(0)
	return d.NewInode(ctx, f, gofs.StableAttr{Mode: syscall.S_IFREG, Ino: synthIno(d.s.id[:], []byte(d.name), []byte(name))}), 0
}

func (f *virtualFile) fill(a *fuse.Attr) {
	fillSynthDir(a, f.d.m, 0o444)
	a.Mode = syscall.S_IFREG | 0o444
	a.Nlink = 1
	a.Size = f.size
	a.Blocks = (f.size + 511) / 512
}

// Getattr reports the size of the last generated content.
func (f *virtualFile) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	if h, ok := fh.(*virtualHandle); ok {
		f.size = uint64(len(h.data))
	}
	f.fill(&out.Attr)
	out.SetTimeout(0)
	return 0
}

// Open generates the content; direct I/O lets readers see all of it.
func (f *virtualFile) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if flags&syscall.O_ACCMODE != syscall.O_RDONLY || flags&syscall.O_TRUNC != 0 {
		return nil, 0, syscall.EROFS
	}
	data, err := f.d.vd.Open(f.d.s.id, f.name)
	if err != nil {
		return nil, 0, toErrno(f.d.name, err)
	}
	return &virtualHandle{data: data}, fuse.FOPEN_DIRECT_IO, 0
}

// Read serves the content generated at open.
func (f *virtualFile) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	h, ok := fh.(*virtualHandle)
	if !ok {
		return nil, syscall.EBADF
	}
	if off >= int64(len(h.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(h.data[off:min(off+int64(len(dest)), int64(len(h.data)))]), 0
}

// Writes anywhere in a virtual directory are refused.

func (d *virtualDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}

func (d *virtualDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}

func (d *virtualDir) Unlink(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (d *virtualDir) Rmdir(ctx context.Context, name string) syscall.Errno { return syscall.EROFS }

func (d *virtualDir) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	return syscall.EROFS
}

func (d *virtualDir) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}

func (f *virtualFile) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
