package fs

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/hanwen/go-fuse/v2/fuse"
	"golang.org/x/sys/unix"
)

// Clearing setuid and setgid ("killing privileges") on change.
//
// The mount negotiates FUSE_HANDLE_KILLPRIV_V2: the kernel then trusts
// padfs to clear the setuid and setgid bits when a file changes, and in
// exchange marks files it has seen without those bits S_NOSEC, so that a
// write(2) no longer costs a GETXATTR of security.capability first (the
// kernel's file_remove_privs asks for it before every write otherwise, and
// chown(2) costs a GETATTR). padfs must therefore clear the bits itself,
// as a local file system does:
//
//   - write, truncate and O_TRUNC by a caller without CAP_FSETID: the
//     kernel flags those requests (FUSE_WRITE_KILL_SUIDGID,
//     FATTR_KILL_SUIDGID with a size, FUSE_OPEN_KILL_SUIDGID);
//   - chown and chgrp of a non-directory, by anyone (FATTR_KILL_SUIDGID
//     with an owner);
//   - a SETATTR that changes nothing: under KILLPRIV_V2 this is what is
//     left of the kernel's own remove-privileges step (file_remove_privs
//     before fallocate(2) or a write, chown(2) to the same ids) once it has
//     dropped the mode change for padfs to make.
//
// Which bits go is the kernel's rule (setattr_should_drop_suidgid): setuid
// always; setgid when the group may execute, and otherwise (mandatory
// locking, once) only when the caller is neither in the file's group nor
// holds CAP_FSETID. The last case needs the caller's supplementary groups
// (and, when the request does not imply it, its capabilities): those are
// read from /proc only then, which is rare.
//
// The bits are cleared in the same version as the change when the file has
// a dirty buffer (write, truncate and O_TRUNC of a non-empty file always
// do), else in a version of their own. When the kernel did not learn the
// new mode from the reply (WRITE and OPEN replies carry no attributes), its
// cached attributes are dropped, so exec(2) and stat(2) see the bits gone.

// killRaw wraps go-fuse's raw file system to pass the kill flags of WRITE,
// OPEN and CREATE (which go-fuse's node API drops) to the nodes: while such
// a request runs, its cancel channel (unique among requests in flight, and
// the Cancel of the context the node sees) is in kills.
type killRaw struct {
	fuse.RawFileSystem
	kills *sync.Map // <-chan struct{} -> struct{}
	after *sync.Map // RELEASE's cancel channel -> *afterRelease (stage.go)
}

func (r killRaw) mark(cancel <-chan struct{}) func() {
	r.kills.Store(cancel, struct{}{})
	return func() { r.kills.Delete(cancel) }
}

func (r killRaw) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		defer r.mark(cancel)()
	}
	return r.RawFileSystem.Write(cancel, in, data)
}

func (r killRaw) Writev(cancel <-chan struct{}, in *fuse.WriteIn, data [][]byte) (uint32, fuse.Status) {
	if in.WriteFlags&fuse.WRITE_KILL_SUIDGID != 0 {
		defer r.mark(cancel)()
	}
	return r.RawFileSystem.Writev(cancel, in, data)
}

func (r killRaw) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if in.Mode&fuse.OPEN_KILL_SUIDGID != 0 { // OpenIn.Mode holds open_flags
		defer r.mark(cancel)()
	}
	return r.RawFileSystem.Open(cancel, in, out)
}

func (r killRaw) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if in.OpenFlags&fuse.OPEN_KILL_SUIDGID != 0 {
		defer r.mark(cancel)()
	}
	return r.RawFileSystem.Create(cancel, in, name, out)
}

// killFlagged reports whether the kernel asked, in the request behind ctx
// (a WRITE, OPEN or CREATE), to clear setuid/setgid.
func (m *Server) killFlagged(ctx context.Context) bool {
	c, ok := ctx.(*fuse.Context)
	if !ok {
		return false
	}
	_, ok = m.kills.Load(c.Cancel)
	return ok
}

// privBits are the bits a change may have to clear.
const privBits = unix.S_ISUID | unix.S_ISGID

// killedMode returns mode (of a file in group gid) without the bits a
// change by the caller clears, following the kernel's rule; noCap says the
// kernel has already established that the caller lacks CAP_FSETID.
func killedMode(ctx context.Context, mode, gid uint32, noCap bool) uint32 {
	if mode&privBits == 0 || mode&unix.S_IFMT == unix.S_IFDIR {
		return mode
	}
	out := mode &^ unix.S_ISUID
	if mode&unix.S_ISGID != 0 {
		if mode&unix.S_IXGRP != 0 || !callerInGroupOrCapable(ctx, gid, noCap) {
			out &^= unix.S_ISGID
		}
	}
	return out
}

// callerInGroupOrCapable is the kernel's in_group_or_capable for the
// caller of a request: its fs gid or a supplementary group is gid, or it
// holds CAP_FSETID (unless noCap). What cannot be read counts as no.
func callerInGroupOrCapable(ctx context.Context, gid uint32, noCap bool) bool {
	c, ok := ctx.(*fuse.Context)
	if !ok {
		return false
	}
	if c.Gid == gid {
		return true
	}
	st, err := procStatus(c.Pid)
	if err != nil {
		return false
	}
	for _, g := range strings.Fields(st["Groups"]) {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil && uint32(n) == gid {
			return true
		}
	}
	if noCap {
		return false
	}
	eff, err := strconv.ParseUint(strings.TrimSpace(st["CapEff"]), 16, 64)
	const capFsetid = 4
	return err == nil && eff&(1<<capFsetid) != 0
}

// procStatus reads the fields of /proc/PID/status (PID may be a thread).
func procStatus(pid uint32) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok {
			out[k] = v
		}
	}
	return out, nil
}
