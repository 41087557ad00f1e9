package fs

import (
	"context"
	"errors"
	"io"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// File operations of Node.

// Open opens a regular file. Live files share their inode's dirty buffer;
// past versions are read-only.
func (n *Node) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, unix.Errno) {
	return n.open(ctx, flags, true)
}

// open opens n; existed is false for a file just created (whose mode an
// O_TRUNC must not touch).
func (n *Node) open(ctx context.Context, flags uint32, existed bool) (gofs.FileHandle, uint32, unix.Errno) {
	writable := flags&unix.O_ACCMODE != unix.O_RDONLY
	if n.readOnly() {
		if writable || flags&unix.O_TRUNC != 0 {
			return nil, 0, unix.EROFS
		}
		in, err := n.inode()
		if err != nil {
			return nil, 0, n.m.toErrno(opOpen, err)
		}
		if !in.IsRegular() {
			return nil, 0, unix.EINVAL
		}
		// Nothing to commit at close: no FLUSH round trip.
		return &handle{snap: in}, n.keepCache(in.ContentHLC) | fuse.FOPEN_NOFLUSH, 0
	}
	f, err := n.m.acquire(n)
	if err != nil {
		return nil, 0, n.m.toErrno(opOpen, err)
	}
	if flags&unix.O_TRUNC != 0 {
		n.fill.clear(n.m)
		// Atomic O_TRUNC (Linux truncates even with O_RDONLY): the
		// truncation joins the writes that follow in one version
		// (nothing at all for an empty clean file).
		if !f.lockFor(ctx, false) {
			n.m.releaseLater(f)
			return nil, 0, n.m.toErrno(opOpen, errKilled)
		}
		var err error
		f.syncStageLocked()
		if f.size != 0 || f.dirty {
			if err = f.truncateLocked(0); err == nil {
				f.touchLocked(time.Now().UnixNano())
			}
		}
		killed := false
		if err == nil && existed && n.m.killFlagged(ctx) {
			killed, err = f.killPrivLocked(ctx)
		}
		f.mu.Unlock()
		if err != nil {
			n.m.release(f)
			return nil, 0, n.m.toErrno(opOpen, err)
		}
		if killed {
			n.NotifyContent(-1, 0) // the OPEN reply carries no mode
		}
	}
	// Passthrough (stage.go): the kernel reads and writes the staging
	// file itself and leaves the FUSE page cache alone.
	pt, ok := f.passthroughFor(ctx, writable, flags&(unix.O_TRUNC|unix.O_EXCL) != 0)
	if !ok {
		n.m.releaseLater(f)
		return nil, 0, n.m.toErrno(opOpen, errKilled)
	}
	if !f.lockFor(ctx, true) {
		if pt != nil {
			f.ptClosed()
		}
		n.m.releaseLater(f)
		return nil, 0, n.m.toErrno(opOpen, errKilled)
	}
	var fl uint32
	if pt == nil {
		fl = n.keepCache(f.base.ContentHLC)
	} else {
		n.kcache.Store(0)
	}
	f.mu.RUnlock()
	if !writable && flags&unix.O_TRUNC == 0 {
		// A read-only descriptor changed nothing, so its close(2) need
		// not wait for a FLUSH (one round trip less per file for grep,
		// cat, compilers). Writers' closes still commit.
		fl |= fuse.FOPEN_NOFLUSH
	}
	return &handle{f: f, writable: writable, pt: pt}, fl, 0
}

// keepCache returns FOPEN_KEEP_CACHE when the kernel's pages of n came
// from content version h, and records h otherwise.
func (n *Node) keepCache(h mvcc.HLC) uint32 {
	if h != 0 && n.kcache.Swap(uint64(h)) == uint64(h) {
		return fuse.FOPEN_KEEP_CACHE
	}
	return 0
}

// Read reads through the inode's buffer (live) or the opened version.
func (n *Node) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, unix.Errno) {
	h, ok := fh.(*handle)
	if !ok {
		return nil, unix.EBADF
	}
	var c int
	var err error
	if h.f != nil {
		c, err = h.f.readAt(ctx, dest, off)
	} else {
		c, err = n.m.st.ReadAt(h.snap, dest, off)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, n.m.toErrno(opRead, err)
	}
	return fuse.ReadResultData(dest[:c]), 0
}

// Write writes into the inode's dirty buffer.
func (n *Node) Write(ctx context.Context, fh gofs.FileHandle, data []byte, off int64) (uint32, unix.Errno) {
	h, ok := fh.(*handle)
	if !ok || h.f == nil {
		return 0, unix.EBADF
	}
	if off < 0 {
		return 0, unix.EINVAL
	}
	if off+int64(len(data)) > mvcc.MaxFileSize {
		return 0, unix.EFBIG
	}
	killed, err := h.f.writeAt(ctx, data, off, n.m.killFlagged(ctx))
	if err != nil {
		return 0, n.m.toErrno(opWrite, err)
	}
	if killed {
		n.NotifyContent(-1, 0) // the WRITE reply carries no mode
	}
	if h.pt == nil {
		n.fill.wrote(n.m, data, off)
	}
	return uint32(len(data)), 0
}

// Flush runs at every close(2) of a descriptor: a dirty inode is
// committed, so close returning means the data is in the store.
func (n *Node) Flush(ctx context.Context, fh gofs.FileHandle) unix.Errno {
	h, ok := fh.(*handle)
	if !ok || h.f == nil {
		return 0
	}
	return n.m.toErrno(opFlush, n.m.commitFor(ctx, h.f))
}

// Release drops a handle; the last one commits and frees the buffer.
func (n *Node) Release(ctx context.Context, fh gofs.FileHandle) unix.Errno {
	h, ok := fh.(*handle)
	if !ok || h.f == nil {
		return 0
	}
	if h.pt != nil {
		f := h.f
		n.m.whenReleased(ctx, func() {
			f.ptClosed()
			n.m.dropIfIdle(f)
		})
	} else {
		n.storeFilled(h.f)
	}
	return n.m.toErrno(opRelease, n.m.release(h.f))
}

// Fsync commits the inode and returns when the store is durable.
func (n *Node) Fsync(ctx context.Context, fh gofs.FileHandle, flags uint32) unix.Errno {
	if h, ok := fh.(*handle); ok && h.f != nil {
		if err := n.m.commitFor(ctx, h.f); err != nil {
			return n.m.toErrno(opFsync, err)
		}
	} else if f := n.m.file(n.s.id, n.ino); f != nil && n.view == nil {
		if err := n.m.commitFor(ctx, f); err != nil {
			return n.m.toErrno(opFsync, err)
		}
	}
	return n.m.toErrno(opFsync, n.m.st.Sync())
}

// setattrChanges are the SETATTR fields that change something.
const setattrChanges = fuse.FATTR_MODE | fuse.FATTR_UID | fuse.FATTR_GID | fuse.FATTR_SIZE |
	fuse.FATTR_ATIME | fuse.FATTR_MTIME | fuse.FATTR_ATIME_NOW | fuse.FATTR_MTIME_NOW

// currentMode is n's mode and group now, a dirty buffer's pending chmod and
// chown included.
func (n *Node) currentMode(f *fileState) (mode, gid uint32, err error) {
	in, err := n.inode()
	if err != nil {
		return 0, 0, err
	}
	mode, gid = in.Mode, in.Gid
	if f != nil {
		f.mu.RLock()
		if f.dirty {
			mode, gid = withPending(&f.pending, mode, gid)
		}
		f.mu.RUnlock()
	}
	return mode, gid, nil
}

// Setattr is chmod, chown, utimens and truncate. A truncate through a
// writable handle, or of an inode with a dirty buffer, acts on the buffer
// (committed with the writes); otherwise it is its own version.
func (n *Node) Setattr(ctx context.Context, fh gofs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) unix.Errno {
	if n.readOnly() {
		return unix.EROFS
	}
	kctx := context.Background()
	if _, ok := in.GetSize(); ok {
		// A truncate re-reads the data it keeps (cancel.go).
		var stop func()
		kctx, stop = n.m.cancelable(ctx)
		defer stop()
	}
	sa, changed := setAttrOf(in)
	f := n.m.file(n.s.id, n.ino)
	h, _ := fh.(*handle)
	if h != nil && h.f != nil {
		f = h.f
	}
	if _, ok := in.GetSize(); ok && (h == nil || h.f == nil) {
		// A size change commits content: it must not race an open
		// reading the old base (whose next commit would undo it). So
		// it takes the inode's buffer like an open does (counted: a
		// buffer found by m.file may be dropped by a last release
		// meanwhile) and commits under its lock; opens share it.
		var err error
		if f, err = n.m.acquire(n); err != nil {
			return n.m.toErrno(opTruncate, err)
		}
		defer func(f *fileState) {
			if err := n.m.release(f); err != nil {
				n.m.log.Error("padfs: commit after truncate", "session", n.s.id, "ino", n.ino, "err", err)
			}
		}(f)
	}
	if sa.Mode == nil && (in.Valid&fuse.FATTR_KILL_SUIDGID != 0 || in.Valid&setattrChanges == 0) {
		killed, err := n.killPrivMode(ctx, in, f, &sa)
		if err != nil {
			return n.m.toErrno(opSetattr, err)
		}
		changed = changed || killed
	}
	if size, ok := in.GetSize(); ok {
		n.fill.clear(n.m)
		if size > mvcc.MaxFileSize {
			return unix.EFBIG
		}
		if f != nil && (f.isDirty() || (h != nil && h.writable) || f.isStaged()) {
			mtime := time.Now().UnixNano()
			if sa.Mtime != nil {
				mtime = *sa.Mtime
			}
			if err := f.truncate(int64(size), mtime); err != nil {
				return n.m.toErrno(opTruncate, err)
			}
		} else {
			sa.Size, changed = &size, true
		}
	}
	// On a dirty file, chmod/chown/utimens join the pending commit.
	if changed && sa.Size == nil && f != nil && f.addPending(sa) {
		changed = false
	}
	if changed {
		if err := n.commitSetattr(kctx, f, &sa); err != nil {
			return n.m.toErrno(opSetattr, err)
		}
	}
	// Not given up for a killed caller: the kernel takes the reply's
	// size whoever asked (see liveInode).
	cur, err := n.attrNow(context.Background(), &out.Attr)
	if err != nil {
		return n.m.toErrno(opSetattr, err)
	}
	if sa.Size != nil {
		n.kcache.Store(uint64(cur.ContentHLC))
	}
	out.SetTimeout(n.timeout())
	return 0
}

// setAttrOf returns the changes a SETATTR asks for, and whether there are
// any (a truncate aside).
func setAttrOf(in *fuse.SetAttrIn) (sa mvcc.SetAttr, changed bool) {
	if mode, ok := in.GetMode(); ok {
		sa.Mode, changed = &mode, true
	}
	if uid, ok := in.GetUID(); ok {
		sa.Uid, changed = &uid, true
	}
	if gid, ok := in.GetGID(); ok {
		sa.Gid, changed = &gid, true
	}
	if t, ok := in.GetATime(); ok {
		ns := t.UnixNano()
		sa.Atime, changed = &ns, true
	}
	if t, ok := in.GetMTime(); ok {
		ns := t.UnixNano()
		sa.Mtime, changed = &ns, true
	}
	return sa, changed
}

// killPrivMode sets sa.Mode to the current mode without setuid/setgid
// when the change must clear them (see killpriv.go): a truncate flagged
// by the kernel comes from a caller without CAP_FSETID. killed: it did.
func (n *Node) killPrivMode(ctx context.Context, in *fuse.SetAttrIn, f *fileState, sa *mvcc.SetAttr) (killed bool, err error) {
	mode, gid, err := n.currentMode(f)
	if err != nil {
		return false, err
	}
	noCap := in.Valid&fuse.FATTR_KILL_SUIDGID != 0 && in.Valid&fuse.FATTR_SIZE != 0
	if km := killedMode(ctx, mode, gid, noCap); km != mode {
		perm := km & 07777
		sa.Mode = &perm
		return true, nil
	}
	return false, nil
}

// commitSetattr commits sa as its own version, keeping an open buffer f
// (nil: none) in step: its base's size for a truncate, its mode for
// killpriv.go. If f turned dirty meanwhile, a truncate joins its pending
// version instead (sa.Size is then cleared).
func (n *Node) commitSetattr(ctx context.Context, f *fileState, sa *mvcc.SetAttr) error {
	if f == nil {
		_, err := n.m.st.SetAttrCtx(ctx, n.s.id, n.ino, *sa)
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirty && sa.Size != nil {
		// Another handle wrote since Setattr looked.
		if err := f.truncateLocked(int64(*sa.Size)); err != nil {
			return err
		}
		sa.Size = nil
		f.addPendingLocked(*sa)
		mtime := time.Now().UnixNano()
		if sa.Mtime != nil {
			mtime = *sa.Mtime
		}
		f.touchLocked(mtime)
		return nil
	}
	ni, err := n.m.st.SetAttrCtx(ctx, n.s.id, n.ino, *sa)
	if err == nil && !f.dirty {
		f.resetLocked(ni)
	}
	return err
}

// Allocate is fallocate(2): plain allocation grows the file, KEEP_SIZE is
// a no-op (there is nothing to reserve), PUNCH_HOLE zeroes a range.
func (n *Node) Allocate(ctx context.Context, fh gofs.FileHandle, off uint64, size uint64, mode uint32) unix.Errno {
	const (
		keepSize  = 0x01
		punchHole = 0x02
	)
	h, ok := fh.(*handle)
	if !ok || h.f == nil {
		if n.readOnly() {
			return unix.EROFS
		}
		return unix.EBADF
	}
	if off > mvcc.MaxFileSize || size > mvcc.MaxFileSize-off {
		return unix.EFBIG
	}
	n.fill.clear(n.m)
	switch mode {
	case 0:
		// Nothing to reserve: a hole grows the file, storing nothing.
		h.f.mu.Lock()
		h.f.syncStageLocked()
		var err error
		if end := int64(off + size); end > h.f.size {
			if err = h.f.truncateLocked(end); err == nil {
				h.f.touchLocked(time.Now().UnixNano())
			}
		}
		h.f.mu.Unlock()
		return n.m.toErrno(opFallocate, err)
	case keepSize:
		return 0
	case keepSize | punchHole:
		return n.m.toErrno(opFallocate, h.f.punchHole(int64(off), int64(size)))
	}
	return unix.EOPNOTSUPP
}

// Lseek answers SEEK_DATA and SEEK_HOLE (the kernel does SEEK_SET, CUR
// and END itself) from the extents and the dirty buffer's pages, without
// reading content. A range reported as data may still read as zeros.
func (n *Node) Lseek(ctx context.Context, fh gofs.FileHandle, off uint64, whence uint32) (uint64, unix.Errno) {
	h, ok := fh.(*handle)
	if !ok {
		return 0, unix.EBADF
	}
	var data []mvcc.Range
	var size int64
	if h.f != nil {
		h.f.mu.RLock()
		if h.f.stage != nil {
			defer h.f.mu.RUnlock()
			return h.f.stageSeekLocked(off, whence)
		}
		data, size = h.f.dataRangesLocked(), h.f.size
		h.f.mu.RUnlock()
	} else {
		data, size = h.snap.DataRanges(mvcc.MaxFileSize), int64(h.snap.Size)
	}
	return seekData(data, size, off, whence)
}

// seekData is lseek(2)'s SEEK_DATA and SEEK_HOLE over a file of size whose
// data is in the ordered, merged ranges data.
func seekData(data []mvcc.Range, size int64, off uint64, whence uint32) (uint64, unix.Errno) {
	if whence != unix.SEEK_DATA && whence != unix.SEEK_HOLE {
		return 0, unix.EINVAL
	}
	if off >= uint64(size) {
		return 0, unix.ENXIO
	}
	pos := int64(off)
	for _, r := range data {
		if r.Off+r.Len <= pos {
			continue
		}
		if whence == unix.SEEK_DATA {
			return uint64(max(pos, r.Off)), 0
		}
		if r.Off <= pos {
			return uint64(min(r.Off+r.Len, size)), 0 // the hole after r (or EOF)
		}
		break
	}
	if whence == unix.SEEK_DATA {
		return 0, unix.ENXIO // only holes from pos on
	}
	return off, 0
}

// Readlink returns a symlink's target.
func (n *Node) Readlink(ctx context.Context) ([]byte, unix.Errno) {
	in, err := n.inode()
	if err != nil {
		return nil, n.m.toErrno(opReadlink, err)
	}
	if !in.IsSymlink() {
		return nil, unix.EINVAL
	}
	return []byte(in.Target), 0
}
