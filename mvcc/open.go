package mvcc

import (
	"fmt"
	"os"
)

// Files and directories inside a data directory. The composition of a data
// directory (and a store URL) into drivers and a Store lives above mvcc, in
// internal/storeopen: mvcc knows no concrete driver.
const (
	StoreFile     = "padfs.db"   // bbolt
	WALDir        = "wal"        // the group-commit log in front of it
	QuarantineDir = "quarantine" // what fsck --repair moved out of the store or log
)

// SyncDir fsyncs directory dir, so the names created in it survive a
// power loss.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
