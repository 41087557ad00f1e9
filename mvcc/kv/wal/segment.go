package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

const segmentExt = ".wal"

// segment is one WAL file. Records are appended only under the Store's
// writeMu; sync may run concurrently from Sync.
type segment struct {
	path string
	seq  uint64
	off  int64 // end of the last whole record

	mu        sync.Mutex // guards f and dirSynced against sync vs close
	f         *os.File   // nil once sealed
	dirSynced bool       // the directory entry is durable
	sealErr   error      // why sealing failed, if it did
}

func segmentPath(dir string, seq uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%016x%s", seq, segmentExt))
}

func createSegment(dir string, seq uint64) (*segment, error) {
	path := segmentPath(dir, seq)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kv/wal: create segment: %w", err)
	}
	return &segment{path: path, seq: seq, f: f}, nil
}

// append writes rec with one pwritev(2) at the end of the last whole
// record. On failure it cuts the file back, because a partial record would
// hide every later record from replay; if even that fails the error says so
// and the segment must not be written again.
func (g *segment) append(rec recordv) (cutFailed bool, err error) {
	if err := pwritevAll(g.f, rec.bufs, g.off); err != nil {
		err = fmt.Errorf("kv/wal: write %s: %w", g.path, err)
		if terr := g.f.Truncate(g.off); terr != nil {
			return true, errors.Join(err, fmt.Errorf("kv/wal: cut back %s: %w", g.path, terr))
		}
		return false, err
	}
	g.off += int64(rec.n)
	return false, nil
}

// iovMax is Linux's limit on the buffers of one pwritev.
const iovMax = 1024

// pwritevAll writes bufs back to back at off, resuming after short writes.
func pwritevAll(f *os.File, bufs [][]byte, off int64) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	bufs = slices.Clone(bufs) // trimmed below as they are written
	for len(bufs) > 0 {
		var n int
		var werr error
		iov := bufs[:min(len(bufs), iovMax)]
		if cerr := rc.Control(func(fd uintptr) {
			for {
				n, werr = unix.Pwritev(int(fd), iov, off)
				if werr != unix.EINTR {
					return
				}
			}
		}); cerr != nil {
			return cerr
		}
		if werr != nil {
			return werr
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		for n > 0 {
			if n < len(bufs[0]) {
				bufs[0] = bufs[0][n:]
				break
			}
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		for len(bufs) > 0 && len(bufs[0]) == 0 {
			bufs = bufs[1:]
		}
	}
	return nil
}

// sync makes every record appended so far durable, with the directory
// entry. A sealed segment was synced when sealed.
func (g *segment) sync() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.f == nil {
		return g.sealErr // sealed: synced then, or the seal's failure
	}
	return g.syncLocked()
}

func (g *segment) syncLocked() error {
	if err := fdatasync(g.f); err != nil {
		return fmt.Errorf("kv/wal: fdatasync %s: %w", g.path, err)
	}
	if !g.dirSynced {
		if err := syncDir(filepath.Dir(g.path)); err != nil {
			return err
		}
		g.dirSynced = true
	}
	return nil
}

// seal syncs and closes the segment: it gets no more records.
func (g *segment) seal() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.f == nil {
		return nil
	}
	err := g.syncLocked()
	if cerr := g.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("kv/wal: close %s: %w", g.path, cerr)
	}
	g.f, g.sealErr = nil, err
	return err
}

// abandon closes the file without syncing (a simulated crash in tests).
func (g *segment) abandon() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.f != nil {
		_ = g.f.Close()
		g.f = nil
	}
}

// listSegments returns the segments in dir, oldest first.
func listSegments(dir string) ([]*segment, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("kv/wal: %w", err)
	}
	var segs []*segment
	for _, de := range ents {
		name, ok := strings.CutSuffix(de.Name(), segmentExt)
		if !ok || !de.Type().IsRegular() {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 64)
		if err != nil {
			continue // not ours
		}
		segs = append(segs, &segment{path: filepath.Join(dir, de.Name()), seq: seq, dirSynced: true})
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].seq < segs[j].seq })
	return segs, nil
}

// removeSegments deletes the files and makes that durable before anything
// newer reaches the base: a stale segment replayed after newer data was
// flushed would roll keys back.
func removeSegments(dir string, segs []*segment) error {
	for _, g := range segs {
		if err := os.Remove(g.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("kv/wal: %w", err)
		}
	}
	if len(segs) == 0 {
		return nil
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("kv/wal: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("kv/wal: fsync directory %s: %w", dir, err)
	}
	return nil
}

// lockDir takes an exclusive flock on dir/LOCK so that two processes never
// share one WAL. The kernel drops it when the process dies.
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, "LOCK")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kv/wal: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("kv/wal: %s: %w", dir, ErrLocked)
		}
		return nil, fmt.Errorf("kv/wal: lock %s: %w", path, err)
	}
	return f, nil
}
