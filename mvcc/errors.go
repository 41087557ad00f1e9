package mvcc

import (
	"errors"
	"strconv"
)

// Sentinel errors. Callers match them with errors.Is; the fs layer maps each
// to one errno (fs/errno.go). Errors returned by the store wrap one of these
// with the path, key or session they concern.
var (
	ErrNotFound    = errors.New("no such file or directory") // ENOENT
	ErrExist       = errors.New("file exists")               // EEXIST
	ErrNotDir      = errors.New("not a directory")           // ENOTDIR
	ErrIsDir       = errors.New("is a directory")            // EISDIR
	ErrNotEmpty    = errors.New("directory not empty")       // ENOTEMPTY
	ErrInvalid     = errors.New("invalid argument")          // EINVAL
	ErrNameTooLong = errors.New("file name too long")        // ENAMETOOLONG
	ErrNoAttr      = errors.New("no such attribute")         // ENODATA
	ErrReadOnly    = errors.New("read-only file system")     // EROFS
	ErrCorrupt     = errors.New("corrupt store")             // EIO
	ErrNoSession   = errors.New("no such session")           // ENOENT
	ErrForgotten   = errors.New("session is forgotten")      // ENOENT / refused mount
	ErrFormat      = errors.New("unsupported store format")  // refused open
	ErrPerm        = errors.New("operation not permitted")   // EPERM
	ErrTooBig      = errors.New("file too large")            // EFBIG
)

// nameNotFound is ErrNotFound for a name, formatted only when printed: a
// lookup of a name that does not exist is what every create, link and
// mkdir through the kernel starts with (fmt.Errorf cost a few µs each).
type nameNotFound string

func (e nameNotFound) Error() string { return ErrNotFound.Error() + ": " + strconv.Quote(string(e)) }

func (e nameNotFound) Unwrap() error { return ErrNotFound }
