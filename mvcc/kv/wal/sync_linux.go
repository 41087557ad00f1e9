package wal

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync skips the inode timestamps that fsync would also write.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) { err = unix.Fdatasync(int(fd)) }); cerr != nil {
		return cerr
	}
	return err
}
