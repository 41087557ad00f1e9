package mvcc

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

const (
	sIFMT  = unix.S_IFMT
	sIFDIR = unix.S_IFDIR
	sIFREG = unix.S_IFREG
	sIFLNK = unix.S_IFLNK
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

// ValidSessionName checks a session name: a valid file name (the mount's
// root lists sessions by name) without control characters, which would
// break line- and column-oriented output such as padfs session ls.
func ValidSessionName(name string) error {
	if err := ValidName(name); err != nil {
		return fmt.Errorf("session name: %w (names may not contain '/' or control characters)", err)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%w: session name %q contains the control character 0x%02x (names may not contain '/' or control characters)",
				ErrInvalid, name, c)
		}
	}
	return nil
}
