package fs

import (
	"context"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// readOnlyDir refuses with EROFS every operation that would change a
// directory. The synthetic read-only directories (.asof and the virtual
// directories such as .grep and .log) embed it.
type readOnlyDir struct{}

func (readOnlyDir) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return nil, unix.EROFS
}

func (readOnlyDir) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return nil, unix.EROFS
}

func (readOnlyDir) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*gofs.Inode, gofs.FileHandle, uint32, unix.Errno) {
	return nil, nil, 0, unix.EROFS
}

func (readOnlyDir) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return nil, unix.EROFS
}

func (readOnlyDir) Link(ctx context.Context, target gofs.InodeEmbedder, name string, out *fuse.EntryOut) (*gofs.Inode, unix.Errno) {
	return nil, unix.EROFS
}

func (readOnlyDir) Unlink(ctx context.Context, name string) unix.Errno { return unix.EROFS }

func (readOnlyDir) Rmdir(ctx context.Context, name string) unix.Errno { return unix.EROFS }

func (readOnlyDir) Rename(ctx context.Context, name string, newParent gofs.InodeEmbedder, newName string, flags uint32) unix.Errno {
	return unix.EROFS
}

func (readOnlyDir) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) unix.Errno {
	return unix.EROFS
}

func (readOnlyDir) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) unix.Errno {
	return unix.EROFS
}

func (readOnlyDir) Removexattr(ctx context.Context, attr string) unix.Errno { return unix.EROFS }
