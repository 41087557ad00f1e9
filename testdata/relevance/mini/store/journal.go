package store

import "os"

// Journal is a write-ahead log: every record is appended and fsynced
// before the change it describes is applied, so a crash loses nothing
// that was acknowledged.
type Journal struct {
	f *os.File
}

// NewJournal opens (creating) the journal file at path.
func NewJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &Journal{f: f}, nil
}

// Append writes rec and syncs it to disk.
func (j *Journal) Append(rec []byte) error {
	if _, err := j.f.Write(rec); err != nil {
		return err
	}
	return j.f.Sync()
}
