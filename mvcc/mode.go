package mvcc

import (
	"fmt"
	"strings"
	"syscall"
)

const (
	sIFMT  = syscall.S_IFMT
	sIFDIR = syscall.S_IFDIR
	sIFREG = syscall.S_IFREG
	sIFLNK = syscall.S_IFLNK
)

// NameMax is the longest file name, in bytes, as on ext4.
const NameMax = 255

// ValidName checks one path component.
func ValidName(name string) error {
	switch {
	case len(name) > NameMax:
		return fmt.Errorf("%w: %d bytes (max %d)", ErrNameTooLong, len(name), NameMax)
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("%w: name %q", ErrInvalid, name)
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("%w: name %q contains '/' or NUL", ErrInvalid, name)
	}
	return nil
}
