package wal

import (
	"os"
	"syscall"
)

// fdatasync skips the inode timestamps that fsync would also write.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = syscall.Fdatasync(int(fd)) }); cerr != nil {
		return cerr
	}
	return err
}
