package fs

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"syscall"

	"github.com/padfs/padfs/mvcc"
)

// toErrno maps an error from the store (or the OS) to the errno FUSE
// returns. Expected conditions (ENOENT, EEXIST, ...) map silently; anything
// else is logged with its cause and becomes EIO, never ENOSYS.
func toErrno(op string, err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var errno syscall.Errno
	switch {
	case errors.Is(err, mvcc.ErrForgotten) && changeOps[op]:
		// The session was forgotten under a mount: its tree is frozen.
		return syscall.EROFS
	case errors.Is(err, mvcc.ErrNotFound),
		errors.Is(err, mvcc.ErrNoSession),
		errors.Is(err, mvcc.ErrForgotten):
		return syscall.ENOENT
	case errors.Is(err, mvcc.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, mvcc.ErrNotDir):
		return syscall.ENOTDIR
	case errors.Is(err, mvcc.ErrIsDir):
		return syscall.EISDIR
	case errors.Is(err, mvcc.ErrNotEmpty):
		return syscall.ENOTEMPTY
	case errors.Is(err, mvcc.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, mvcc.ErrNameTooLong):
		return syscall.ENAMETOOLONG
	case errors.Is(err, mvcc.ErrNoAttr):
		return syscall.ENODATA
	case errors.Is(err, mvcc.ErrReadOnly):
		return syscall.EROFS
	case errors.Is(err, mvcc.ErrPerm):
		return syscall.EPERM
	case errors.Is(err, mvcc.ErrTooBig):
		return syscall.EFBIG
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		slog.Error("padfs: short read from the store", "op", op, "err", err)
		return syscall.EIO
	case errors.Is(err, os.ErrNotExist):
		return syscall.ENOENT
	case errors.As(err, &errno):
		if errno == syscall.ENOSPC || errno == syscall.EDQUOT {
			slog.Error("padfs: out of space", "op", op, "err", err)
			return errno
		}
		slog.Error("padfs: system error", "op", op, "err", err)
		return syscall.EIO
	case errors.Is(err, mvcc.ErrCorrupt):
		slog.Error("padfs: corrupt store", "op", op, "err", err)
		return syscall.EIO
	default:
		slog.Error("padfs: internal error", "op", op, "err", err)
		return syscall.EIO
	}
}

// changeOps are the operations (toErrno's op) that change a session: on a
// forgotten session they fail with EROFS, lookups and reads with ENOENT.
var changeOps = map[string]bool{
	"create": true, "fallocate": true, "flush": true, "fsync": true, "fsyncdir": true,
	"link": true, "mkdir": true, "mknod": true, "release": true, "removexattr": true,
	"rename": true, "rmdir": true, "setattr": true, "setxattr": true, "symlink": true,
	"tmpfile": true, "truncate": true, "unlink": true, "write": true,
}
