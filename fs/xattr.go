package fs

import (
	"context"
	"strings"

	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// Extended attributes: the user.* namespace is stored in the inode's xattr
// chains (mvcc/xattr.go), versioned like everything else, so a node under
// .asof/ reads the set as of its view's time. Other namespaces
// (security.*, system.*, trusted.*) read as absent, so probes by ls and cp
// stay quiet, and cannot be set (EOPNOTSUPP).

func userXattr(name string) bool { return strings.HasPrefix(name, "user.") && len(name) > len("user.") }

// Getxattr reads one attribute.
func (n *Node) Getxattr(ctx context.Context, attr string, dest []byte) (uint32, unix.Errno) {
	if !userXattr(attr) {
		// Only user.* is ever stored; the kernel asks for
		// security.capability before every write.
		return 0, unix.ENODATA
	}
	v, ok, err := n.m.st.Xattr(n.s.id, n.ino, attr, n.at())
	if err != nil {
		return 0, n.m.toErrno(opGetxattr, err)
	}
	if !ok {
		return 0, unix.ENODATA
	}
	if len(dest) == 0 {
		return uint32(len(v)), 0
	}
	if len(dest) < len(v) {
		return uint32(len(v)), unix.ERANGE
	}
	return uint32(copy(dest, v)), 0
}

// Listxattr lists the attribute names, NUL-terminated.
func (n *Node) Listxattr(ctx context.Context, dest []byte) (uint32, unix.Errno) {
	names, err := n.m.st.XattrNames(n.s.id, n.ino, n.at())
	if err != nil {
		return 0, n.m.toErrno(opListxattr, err)
	}
	var b []byte
	for _, name := range names {
		b = append(append(b, name...), 0)
	}
	if len(dest) == 0 {
		return uint32(len(b)), 0
	}
	if len(dest) < len(b) {
		return uint32(len(b)), unix.ERANGE
	}
	return uint32(copy(dest, b)), 0
}

// Setxattr sets a user.* attribute (XATTR_CREATE / XATTR_REPLACE honoured).
func (n *Node) Setxattr(ctx context.Context, attr string, data []byte, flags uint32) unix.Errno {
	if n.readOnly() {
		return unix.EROFS
	}
	if !userXattr(attr) {
		return unix.EOPNOTSUPP
	}
	if data == nil {
		data = []byte{}
	}
	return n.m.toErrno(opSetxattr, n.m.st.SetXattr(n.s.id, n.ino, attr, data, flags&(mvcc.XattrCreate|mvcc.XattrReplace)))
}

// Removexattr removes an attribute.
func (n *Node) Removexattr(ctx context.Context, attr string) unix.Errno {
	if n.readOnly() {
		return unix.EROFS
	}
	if !userXattr(attr) {
		return unix.ENODATA
	}
	return n.m.toErrno(opRemovexattr, n.m.st.SetXattr(n.s.id, n.ino, attr, nil, 0))
}
