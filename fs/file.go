package fs

import (
	"context"
	"os"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// handle is an open regular file: live files go through their inode's
// shared fileState, past versions read the version that was opened.
type handle struct {
	f        *fileState
	writable bool
	snap     *mvcc.Inode
	pt       *os.File // the staging file the kernel is handed (stage.go)
}

// dirHandle is an open directory. The listing is read once, at the first
// readdir (and again after a rewind to offset 0), and served from that
// snapshot, so removing entries while reading (rm -rf) neither skips nor
// repeats names, and seekdir/telldir offsets stay valid.
type dirHandle struct {
	m       *Server
	load    func() ([]fuse.DirEntry, unix.Errno)
	sync    func() error
	entries []fuse.DirEntry
	loaded  bool
	idx     int
}

func (d *dirHandle) ensure() unix.Errno {
	if d.loaded {
		return 0
	}
	es, errno := d.load()
	if errno != 0 {
		return errno
	}
	d.entries, d.loaded, d.idx = es, true, 0
	return 0
}

// Readdirent returns the next entry, or nil at the end.
func (d *dirHandle) Readdirent(ctx context.Context) (*fuse.DirEntry, unix.Errno) {
	if errno := d.ensure(); errno != 0 {
		return nil, errno
	}
	if d.idx >= len(d.entries) {
		return nil, 0
	}
	e := d.entries[d.idx]
	d.idx++
	e.Off = uint64(d.idx)
	return &e, 0
}

// Seekdir moves to an offset returned earlier; 0 re-reads the directory.
func (d *dirHandle) Seekdir(ctx context.Context, off uint64) unix.Errno {
	if off == 0 {
		d.loaded = false
	}
	if errno := d.ensure(); errno != 0 {
		return errno
	}
	if off > uint64(len(d.entries)) {
		return unix.EINVAL
	}
	d.idx = int(off)
	return 0
}

// Releasedir frees the snapshot.
func (d *dirHandle) Releasedir(ctx context.Context, releaseFlags uint32) { d.entries = nil }

// Fsyncdir makes every commit so far durable.
func (d *dirHandle) Fsyncdir(ctx context.Context, flags uint32) unix.Errno {
	if d.sync == nil {
		return 0
	}
	return d.m.toErrno(opFsyncdir, d.sync())
}
