package fs

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// toErrno maps an error from the store (or the OS) to the errno FUSE
// returns. Expected conditions (ENOENT, EEXIST, ...) map silently; anything
// else is logged with its cause and becomes EIO, never ENOSYS.
func (m *Server) toErrno(op fuseOp, err error) unix.Errno {
	if err == nil {
		return 0
	}
	var errno unix.Errno
	switch {
	case errors.Is(err, mvcc.ErrForgotten) && changeOps[op]:
		// The session was forgotten under a mount: its tree is frozen.
		return unix.EROFS
	case errors.Is(err, mvcc.ErrNotFound),
		errors.Is(err, mvcc.ErrNoSession),
		errors.Is(err, mvcc.ErrForgotten):
		return unix.ENOENT
	case errors.Is(err, mvcc.ErrExist):
		return unix.EEXIST
	case errors.Is(err, mvcc.ErrNotDir):
		return unix.ENOTDIR
	case errors.Is(err, mvcc.ErrIsDir):
		return unix.EISDIR
	case errors.Is(err, mvcc.ErrNotEmpty):
		return unix.ENOTEMPTY
	case errors.Is(err, mvcc.ErrInvalid):
		return unix.EINVAL
	case errors.Is(err, mvcc.ErrNameTooLong):
		return unix.ENAMETOOLONG
	case errors.Is(err, mvcc.ErrNoAttr):
		return unix.ENODATA
	case errors.Is(err, mvcc.ErrReadOnly):
		return unix.EROFS
	case errors.Is(err, mvcc.ErrPerm):
		return unix.EPERM
	case errors.Is(err, mvcc.ErrTooBig):
		return unix.EFBIG
	case errors.Is(err, context.Canceled):
		return unix.EINTR
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		m.log.Error("padfs: short read from the store", "op", op, "err", err)
		return unix.EIO
	case errors.Is(err, os.ErrNotExist):
		return unix.ENOENT
	case errors.As(err, &errno):
		if errno == unix.ENOSPC || errno == unix.EDQUOT {
			m.log.Error("padfs: out of space", "op", op, "err", err)
			return errno
		}
		m.log.Error("padfs: system error", "op", op, "err", err)
		return unix.EIO
	case errors.Is(err, mvcc.ErrCorrupt):
		m.log.Error("padfs: corrupt store", "op", op, "err", err)
		return unix.EIO
	default:
		m.log.Error("padfs: internal error", "op", op, "err", err)
		return unix.EIO
	}
}

// fuseOp names the FUSE operation an error came from: toErrno's choice of
// errno depends on it (changeOps), and its log line names it.
type fuseOp string

const (
	opAsof            fuseOp = "asof"
	opAsofReaddir     fuseOp = "asof readdir"
	opCreate          fuseOp = "create"
	opFallocate       fuseOp = "fallocate"
	opFlush           fuseOp = "flush"
	opForgetSession   fuseOp = "forget session"
	opFsync           fuseOp = "fsync"
	opFsyncdir        fuseOp = "fsyncdir"
	opGetattr         fuseOp = "getattr"
	opGetattrSessions fuseOp = "getattr sessions"
	opGetxattr        fuseOp = "getxattr"
	opLink            fuseOp = "link"
	opListxattr       fuseOp = "listxattr"
	opLookup          fuseOp = "lookup"
	opLookupByName    fuseOp = "lookup by-name"
	opLookupSession   fuseOp = "lookup session"
	opMkdir           fuseOp = "mkdir"
	opMkdirSession    fuseOp = "mkdir session"
	opMknod           fuseOp = "mknod"
	opOpen            fuseOp = "open"
	opRead            fuseOp = "read"
	opReaddir         fuseOp = "readdir"
	opReaddirByName   fuseOp = "readdir by-name"
	opReaddirSessions fuseOp = "readdir sessions"
	opReadlink        fuseOp = "readlink"
	opReadlinkByName  fuseOp = "readlink by-name"
	opRelease         fuseOp = "release"
	opRemovexattr     fuseOp = "removexattr"
	opRename          fuseOp = "rename"
	opRmdir           fuseOp = "rmdir"
	opSetattr         fuseOp = "setattr"
	opSetxattr        fuseOp = "setxattr"
	opStatfs          fuseOp = "statfs"
	opSymlink         fuseOp = "symlink"
	opTmpfile         fuseOp = "tmpfile"
	opTruncate        fuseOp = "truncate"
	opUnlink          fuseOp = "unlink"
	opWrite           fuseOp = "write"
)

// changeOps are the operations (toErrno's op) that change a session: on a
// forgotten session they fail with EROFS, lookups and reads with ENOENT.
var changeOps = map[fuseOp]bool{
	opCreate: true, opFallocate: true, opFlush: true, opFsync: true, opFsyncdir: true,
	opLink: true, opMkdir: true, opMknod: true, opRelease: true, opRemovexattr: true,
	opRename: true, opRmdir: true, opSetattr: true, opSetxattr: true, opSymlink: true,
	opTmpfile: true, opTruncate: true, opUnlink: true, opWrite: true,
}
