package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// The disk-full reserve. A full disk must not lock padfs out of the very
// commands that free space: a prune or a hard forget writes (log records
// of its deletions, bbolt's copy-on-write pages) before it frees anything.
// So the data directory keeps DATA/reserve, a preallocated file of
// reserveMax bytes (at most an eighth of the filesystem), which those
// commands delete before they run and put back after, when there is room
// again.

const (
	reserveName = "reserve"
	reserveMax  = 8 << 20
)

func reservePath(dir string) string { return filepath.Join(dir, reserveName) }

// restoreReserve (re)creates the reserve if it is missing and there is
// room for it. It never fails: without room, the reserve stays away until
// a later call finds some.
func restoreReserve(dir string) {
	p := reservePath(dir)
	if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
		return
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return
	}
	size := min(int64(reserveMax), int64(fs.Blocks)*int64(fs.Bsize)/8)
	if uint64(size)*2 > fs.Bavail*uint64(fs.Bsize) {
		return // too little room: do not take the last of it
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	err = unix.Fallocate(int(f.Fd()), 0, 0, size)
	if errors.Is(err, unix.EOPNOTSUPP) {
		err = writeZeros(f, size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(p)
	}
}

func writeZeros(f *os.File, size int64) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		n := min(int64(len(buf)), size-off)
		if _, err := f.Write(buf[:n]); err != nil {
			return err
		}
	}
	return f.Sync()
}

// releaseReserve deletes the reserve, giving its room to a command that
// frees space.
func releaseReserve(dir string) { _ = os.Remove(reservePath(dir)) }

// flushBeforeFreeing commits the running mount's buffered writes before a
// command that frees space. On a full disk that commit may be what fails:
// the command then goes on with what is committed, saying so, since
// freeing space is the way out.
func flushBeforeFreeing(a *App) {
	if err := a.FlushMount(); err != nil {
		fmt.Fprintf(a.Err, "padfs: warning: the mount's open writes could not be committed (%v); going on with what is committed\n", oneLine(err.Error()))
	}
}
