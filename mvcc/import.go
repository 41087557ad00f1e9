package mvcc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/padfs/padfs/mvcc/kv"
	"golang.org/x/sys/unix"
)

// Importing a host directory as a new session (padfs session new --from).
//
// Three steps:
//
//  1. Walk the tree with lstat (nothing is followed), reading each inode's
//     modes, owners, times, link count, symlink target and user.* xattrs.
//     Names are bytes, as the kernel gives them.
//  2. Read and chunk the regular files on every core (a hard-linked file
//     once), storing the chunks as PutContent does, deduplicated by
//     SHA-256, in batches of about 4 MiB per kv write across files. Chunks
//     are content-addressed: writing them before the commit is harmless;
//     a failed import deletes those it stored that nothing references. The
//     holes of a sparse file (SEEK_HOLE) are neither read nor chunked,
//     only hashed as zeros for the content hash.
//  3. One commit creates the session with the whole tree: one event
//     (session.import), one HLC, nothing visible before it.
//
// The commit holds only metadata and the inline content of small files
// (<= InlineMax bytes): about 300 bytes per name plus up to 4 KiB per small
// file, so a tree of a million files is a commit of a few hundred MB to a
// few GB in memory. The issue asks for one commit; a tree too large for
// that fails as a whole (nothing is visible), it is never half imported.

// ImportOptions tune ImportTree.
type ImportOptions struct {
	Name string
	// Workers read and chunk files in parallel; 0: GOMAXPROCS.
	Workers int
	// Progress reports the stage "scan" (entries found) and then "import"
	// (bytes read out of the total size of the regular files).
	Progress Progress
}

// ImportStats counts what ImportTree imported.
type ImportStats struct {
	Files    int   `json:"files"` // regular files (hard links once)
	Dirs     int   `json:"dirs"`  // directories below the root
	Symlinks int   `json:"symlinks"`
	Others   int   `json:"others"` // fifos, devices, sockets
	Links    int   `json:"links"`  // extra names of hard-linked inodes
	Xattrs   int   `json:"xattrs"`
	Bytes    int64 `json:"bytes"`  // regular file content
	Stored   int64 `json:"stored"` // chunk bytes not already in the store
}

// hostNode is one name found by the walk.
type hostNode struct {
	path   string // host path
	parent int    // index of the parent directory's node; -1 for the root
	name   string
	st     unix.Stat_t
	target string
	xattrs map[string][]byte
	first  int // index of the node that holds the inode (itself, or an earlier hard link)
	c      *Content
}

// ImportTree creates a session whose tree is a copy of host directory dir.
// ctx ends it early (between files, and between chunks of a large one)
// with ctx.Err(): nothing is committed, and the chunks it stored are
// deleted again.
func (s *Store) ImportTree(ctx context.Context, dir string, opt ImportOptions) (*SessionHeader, *ImportStats, error) {
	if opt.Name != "" {
		if err := ValidSessionName(opt.Name); err != nil {
			return nil, nil, err
		}
	}
	// Refuse a taken name before reading the tree (the commit checks again).
	if err := s.View(func(t *ReadTx) error { return t.checkNameFree(opt.Name, SessionID{}) }); err != nil {
		return nil, nil, err
	}
	nodes, err := scanHostTree(dir, opt.Progress)
	if err != nil {
		return nil, nil, err
	}
	st := &ImportStats{}
	added, err := s.importContent(ctx, nodes, opt, st)
	if err != nil {
		return nil, nil, err
	}
	id, err := NewSessionID()
	if err != nil {
		return nil, nil, s.dropChunks(added, err)
	}
	h := &SessionHeader{ID: id, Name: opt.Name}
	if err := ctx.Err(); err != nil {
		return nil, nil, s.dropChunks(added, err)
	}
	opt.Progress.report("commit", 0, int64(len(nodes)))
	_, err = s.commit(id, commitNew, func(t *WriteTx) error {
		if err := t.checkNameFree(opt.Name, id); err != nil {
			return err
		}
		return t.importNodes(nodes, h, dir, st)
	})
	if err != nil {
		return nil, nil, s.dropChunks(added, err)
	}
	opt.Progress.report("commit", int64(len(nodes)), int64(len(nodes)))
	return h, st, nil
}

// scanHostTree lists dir and everything below it, parents before children,
// names in byte order.
func scanHostTree(dir string, progress Progress) ([]*hostNode, error) {
	root := &hostNode{path: dir, parent: -1}
	if err := root.stat(); err != nil {
		return nil, err
	}
	if root.st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrNotDir, dir)
	}
	nodes := []*hostNode{root}
	type devIno struct{ dev, ino uint64 }
	seen := map[devIno]int{}
	for i := 0; i < len(nodes); i++ {
		d := nodes[i]
		if d.st.Mode&unix.S_IFMT != unix.S_IFDIR || d.first != i {
			continue
		}
		f, err := os.Open(d.path)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", d.path, err)
		}
		names, err := f.Readdirnames(-1)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("import %s: read directory: %w", d.path, err)
		}
		slices.Sort(names) // byte order, as ReadDir lists names
		for _, name := range names {
			n := &hostNode{path: filepath.Join(d.path, name), parent: i, name: name, first: len(nodes)}
			if err := n.stat(); err != nil {
				return nil, err
			}
			if n.st.Mode&unix.S_IFMT != unix.S_IFDIR && n.st.Nlink > 1 {
				k := devIno{n.st.Dev, n.st.Ino}
				if j, ok := seen[k]; ok {
					n.first = j
				} else {
					seen[k] = n.first
				}
			}
			nodes = append(nodes, n)
			if len(nodes)%1024 == 0 {
				progress.report("scan", int64(len(nodes)), -1)
			}
		}
	}
	return nodes, nil
}

// stat reads the node's attributes, symlink target and user.* xattrs.
func (n *hostNode) stat() error {
	if err := unix.Lstat(n.path, &n.st); err != nil {
		return fmt.Errorf("import %s: %w", n.path, err)
	}
	if n.st.Mode&unix.S_IFMT == unix.S_IFLNK {
		t, err := os.Readlink(n.path)
		if err != nil {
			return fmt.Errorf("import %s: %w", n.path, err)
		}
		n.target = t
	}
	xs, err := hostXattrs(n.path)
	if err != nil {
		return fmt.Errorf("import %s: xattrs: %w", n.path, err)
	}
	n.xattrs = xs
	return nil
}

// hostXattrs returns the user.* attributes of path (not following a
// symlink). A file system without xattrs has none.
func hostXattrs(path string) (map[string][]byte, error) {
	buf := make([]byte, 4096)
	var sz int
	for {
		var err error
		sz, err = unix.Llistxattr(path, buf)
		if errors.Is(err, unix.ERANGE) {
			buf = make([]byte, 2*len(buf))
			continue
		}
		if errors.Is(err, unix.ENOTSUP) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		break
	}
	var out map[string][]byte
	for _, name := range strings.Split(string(buf[:sz]), "\x00") {
		if !strings.HasPrefix(name, "user.") {
			continue
		}
		val := make([]byte, 256)
		for {
			vn, err := unix.Lgetxattr(path, name, val)
			if errors.Is(err, unix.ERANGE) {
				val = make([]byte, 2*len(val)+64<<10)
				continue
			}
			if errors.Is(err, unix.ENODATA) {
				break // removed meanwhile
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if out == nil {
				out = map[string][]byte{}
			}
			out[name] = append([]byte{}, val[:vn]...)
			break
		}
	}
	return out, nil
}

// importContent reads and stores the content of every regular file (each
// inode once) on opt.Workers goroutines.
// It returns the chunks it stored that the store lacked; after an error it
// has deleted those again.
func (s *Store) importContent(ctx context.Context, nodes []*hostNode, opt ImportOptions, st *ImportStats) ([]Hash, error) {
	var jobs []*hostNode
	var total int64
	for i, n := range nodes {
		if n.first == i && n.st.Mode&unix.S_IFMT == unix.S_IFREG {
			jobs = append(jobs, n)
			total += n.st.Size
		}
	}
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	var done, stored atomic.Int64
	opt.Progress.report("import", 0, total)
	next := atomic.Int64{}
	var failed atomic.Bool
	errs := make([]error, workers)
	batches := make([]*importBatch, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			b := &importBatch{s: s, ctx: ctx}
			batches[w] = b
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= len(jobs) {
					break
				}
				if err := ctx.Err(); err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
				n := jobs[i]
				c, err := b.file(n, func(k int) {
					if d := done.Add(int64(k)); d/(1<<20) != (d-int64(k))/(1<<20) {
						opt.Progress.report("import", d, total)
					}
				})
				if err != nil {
					errs[w] = err
					failed.Store(true)
					return
				}
				n.c = c
			}
			if err := b.flush(); err != nil && errs[w] == nil {
				errs[w] = err
				failed.Store(true)
			}
			stored.Add(b.stored)
		}(w)
	}
	wg.Wait()
	var added []Hash
	for _, b := range batches {
		added = append(added, b.added...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, s.dropChunks(added, err)
	}
	st.Bytes, st.Stored = total, stored.Load()
	opt.Progress.report("import", total, total)
	return added, nil
}

// dropChunks deletes the chunks of hs that no session references (an
// import that failed stored them) and returns cause, with the cleanup's
// own failure if any. A commit elsewhere that was about to take one of
// them notices in its serialized write and stores it again (orphans.go).
func (s *Store) dropChunks(hs []Hash, cause error) error {
	if len(hs) == 0 {
		return cause
	}
	err := s.kv.Update(func(tx kv.Txn) error {
		for _, h := range hs {
			used := false
			prefix := key(pChunkRef, h[:])
			if err := tx.Scan(prefix, kv.PrefixEnd(prefix), func(_, _ []byte) (bool, error) {
				used = true
				return false, nil
			}); err != nil {
				return err
			}
			if !used && !s.pins.pinned(h) {
				if err := tx.Delete(chunkKey(h)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w (and deleting the chunks it stored failed: %v)", cause, err)
	}
	return cause
}

// importBatch gathers one worker's chunks for one kv write.
type importBatch struct {
	s      *Store
	ctx    context.Context // ends the import between chunks
	keys   [][]byte
	vals   [][]byte
	bytes  int
	stored int64
	added  []Hash // chunks this batch stored (the store lacked them)
}

// file stores the content of host file n.
func (b *importBatch) file(n *hostNode, read func(int)) (*Content, error) {
	// O_NONBLOCK: a file replaced by a fifo since the scan must not hang
	// the import (it is refused below).
	f, err := os.OpenFile(n.path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", n.path, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, fmt.Errorf("import %s: %w", n.path, err)
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("import %s: %w: no longer a regular file (changed during the import)", n.path, ErrInvalid)
	}
	if n.st.Size > InlineMax && n.st.Blocks*512 < n.st.Size {
		c, err := b.sparse(f, n.st.Size, read)
		if err != nil {
			return nil, fmt.Errorf("import %s: %w", n.path, err)
		}
		return c, nil
	}
	r := &countingReader{r: f, fn: read}
	head := make([]byte, InlineMax+1)
	k, err := io.ReadFull(r, head)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("import %s: %w", n.path, err)
	}
	if k <= InlineMax {
		sum := sha256.Sum256(head[:k])
		c := &Content{Size: uint64(k), Hash: sum[:]}
		if k > 0 {
			c.Inline = head[:k:k]
		}
		return c, nil
	}
	c := &Content{}
	whole := sha256.New()
	if err := b.chunks(c, whole, io.MultiReader(&byteReader{b: head[:k]}, r)); err != nil {
		return nil, fmt.Errorf("import %s: %w", n.path, err)
	}
	c.Hash = whole.Sum(nil)
	return c, nil
}

// sparse stores the content of a file with holes: the holes the file
// system reports (SEEK_DATA, SEEK_HOLE) become holes without being read
// or chunked (only hashed, as zeros), the data between them is chunked.
func (b *importBatch) sparse(f *os.File, size int64, read func(int)) (*Content, error) {
	c := &Content{}
	whole := sha256.New()
	var holes int64
	zeroRun := func(n int64) {
		for n > 0 {
			k := min(n, int64(len(zeros)))
			if holes += k; holes <= hashHolesMax {
				whole.Write(zeros[:k]) // past it there is no whole-file hash
			}
			c.Extents = appendHole(c.Extents, uint64(k))
			c.Size += uint64(k)
			read(int(k))
			n -= k
		}
	}
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			data = size // a hole to the end
		} else if err != nil {
			return nil, fmt.Errorf("seek data: %w", err)
		}
		data = min(data, size)
		zeroRun(data - off)
		if data == size {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("seek hole: %w", err)
		}
		hole = min(hole, size)
		r := &countingReader{r: io.NewSectionReader(f, data, hole-data), fn: read}
		if err := b.chunks(c, whole, r); err != nil {
			return nil, err
		}
		off = hole
	}
	// As for a file written through the mount: a file with more hole
	// bytes than hashHolesMax has no whole-file hash.
	var holeBytes uint64
	for _, e := range c.Extents {
		if e.Chunk == nil {
			holeBytes += e.Len
		}
	}
	if holeBytes <= hashHolesMax {
		c.Hash = whole.Sum(nil)
	}
	return c, nil
}

// chunks cuts r into chunks, adds them to c and to the batch.
func (b *importBatch) chunks(c *Content, whole hash.Hash, r io.Reader) error {
	return eachChunk(r, func(data []byte, hole bool) error {
		c.Size += uint64(len(data))
		whole.Write(data)
		if hole {
			c.Extents = appendHole(c.Extents, uint64(len(data)))
			return nil
		}
		if err := b.ctx.Err(); err != nil {
			return err
		}
		h := sha256.Sum256(data)
		c.Extents = append(c.Extents, Extent{Chunk: append([]byte(nil), h[:]...), Len: uint64(len(data))})
		b.keys = append(b.keys, chunkKey(h))
		b.vals = append(b.vals, frame(data))
		if b.bytes += len(data); b.bytes >= chunkBatchBytes {
			return b.flush()
		}
		return nil
	})
}

// flush puts the batch's chunks not stored yet, in one kv write.
func (b *importBatch) flush() error {
	if len(b.keys) == 0 {
		return nil
	}
	err := b.s.kv.Update(func(tx kv.Txn) error {
		for i, k := range b.keys {
			if v, err := tx.Get(k); err != nil {
				return err
			} else if v != nil {
				continue
			}
			if err := tx.Put(k, b.vals[i]); err != nil {
				return err
			}
			b.stored += int64(len(b.vals[i]) - 4)
			b.added = append(b.added, Hash(k[1:]))
		}
		return nil
	})
	b.keys, b.vals, b.bytes = b.keys[:0], b.vals[:0], 0
	return err
}

type countingReader struct {
	r  io.Reader
	fn func(int)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.fn(n)
	}
	return n, err
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// importNodes writes the scanned tree as the new session h, inside its
// creating commit.
func (t *WriteTx) importNodes(nodes []*hostNode, h *SessionHeader, dir string, st *ImportStats) error {
	inos := make([]Ino, len(nodes))
	names := make([]uint32, len(nodes)) // names of each inode in the tree
	subdirs := make([]uint32, len(nodes))
	for i, n := range nodes {
		if n.first == i {
			ino, err := t.AllocIno()
			if err != nil {
				return err
			}
			inos[i] = ino
		}
		names[n.first]++
		if n.parent >= 0 && n.st.Mode&unix.S_IFMT == unix.S_IFDIR {
			subdirs[n.parent]++
		}
	}
	h.Created, h.Root = t.hlc, inos[0]
	if err := t.put(headerKey(h.ID), h); err != nil {
		return err
	}
	if err := t.put(stateKey(h.ID, t.hlc), &sessionState{}); err != nil {
		return err
	}
	for i, n := range nodes {
		typ := n.st.Mode & unix.S_IFMT
		if n.first == i {
			in := &Inode{Ino: inos[i], Mode: n.st.Mode, Uid: n.st.Uid, Gid: n.st.Gid, Nlink: names[i],
				Atime: unix.TimespecToNsec(n.st.Atim), Mtime: unix.TimespecToNsec(n.st.Mtim),
				Ctime: unix.TimespecToNsec(n.st.Ctim), Rdev: uint32(n.st.Rdev), ContentHLC: t.hlc}
			if n.parent >= 0 {
				in.Parent, in.Name = inos[nodes[n.parent].first], n.name
			}
			switch typ {
			case unix.S_IFDIR:
				in.Nlink = 2 + subdirs[i]
				if n.parent >= 0 {
					st.Dirs++
				}
			case unix.S_IFLNK:
				in.Target, in.Size = n.target, uint64(len(n.target))
				st.Symlinks++
			case unix.S_IFREG:
				if n.c == nil {
					return fmt.Errorf("import %s: content was not read", n.path)
				}
				n.c.Apply(in)
				st.Files++
			default:
				st.Others++
			}
			if err := t.PutInode(in); err != nil {
				return fmt.Errorf("import %s: %w", n.path, err)
			}
			for _, name := range sortedNames(n.xattrs) {
				if err := t.putXattr(in.Ino, name, n.xattrs[name]); err != nil {
					return err
				}
				st.Xattrs++
			}
		} else {
			st.Links++
		}
		if n.parent >= 0 {
			if err := t.PutDentry(inos[nodes[n.parent].first], n.name, inos[n.first], typ); err != nil {
				return err
			}
		}
	}
	t.SetEvent(Event{Op: OpImport, Path: ".", Path2: dir, Size: st.Bytes, Detail: h.Name})
	return nil
}

// ImportSession adds the session in archive r (ExportSession) to the store,
// keeping its id, name, history, log and checkpoints. An id the store
// already has is refused (ErrExist), as is a name a live session has; a
// damaged archive is refused (ErrArchive) with nothing imported.
//
// The whole archive is checked before anything of the session is written:
// chunks (checked against their hash as they arrive) are stored early, in
// batches, like PutContent's (a refused archive deletes again those that
// nothing references); the session's records are decoded and checked,
// then written in one kv transaction with their chunk references. Inode numbers are
// unique across a store, so the session's inodes get new numbers (in the
// same order); everything else, HLCs included, is kept, and the store's
// clock moves past the newest imported HLC. ctx ends it early (between
// records) with ctx.Err(), nothing imported.
func (s *Store) ImportSession(ctx context.Context, r io.Reader) (*SessionHeader, error) {
	b := &importBatch{s: s, ctx: ctx}
	h, err := s.importSession(r, b)
	if err != nil {
		return nil, s.dropChunks(b.added, err)
	}
	return h, nil
}

// importSession reads archive r (storing its chunks through b as they
// arrive), checks every record, then writes the session in one kv
// transaction and tells the index and the mount.
func (s *Store) importSession(r io.Reader, b *importBatch) (*SessionHeader, error) {
	a, err := readArchiveRecords(r, b)
	if err != nil {
		return nil, err
	}
	if err := a.check(); err != nil {
		return nil, err
	}
	if err := b.ctx.Err(); err != nil {
		return nil, err
	}
	if err := s.kv.Update(func(tx kv.Txn) error { return a.write(s, tx) }); err != nil {
		return nil, err
	}
	sid := a.info.Session
	s.paths.drop(sid)
	// The search index and the mount learn of the session from its last event.
	s.notify(sid, a.lastEvent())
	return s.Header(sid)
}

// archiveRec is one K record of a session archive: a key and its stored value.
type archiveRec struct{ k, v []byte }

// archiveImport is a session archive being imported: its records, and
// what checking them found.
type archiveImport struct {
	info *ArchiveInfo
	recs []archiveRec
	// Decoded records, by index in recs (nil for the other kinds).
	nodes  []*Inode
	dents  []*Dentry
	events []*Event

	h            *SessionHeader
	last         counters
	haveCounters bool
	maxHLC       HLC
	stateAt      HLC  // the newest state record's HLC
	forgotten    bool // as of the newest state record
	maxSeq       uint64
	inos         map[Ino]bool // every inode number the records name
}

// readArchiveRecords reads the whole archive: chunks go to b (flushed in
// batches), the session's records are kept for checking.
func readArchiveRecords(r io.Reader, b *importBatch) (*archiveImport, error) {
	a := &archiveImport{inos: map[Ino]bool{}}
	info, err := ReadSessionArchive(r, func(kind byte, k, v []byte) error {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		k, v = append([]byte(nil), k...), append([]byte(nil), v...)
		if kind == 'C' {
			b.keys = append(b.keys, chunkKey(Hash(k)))
			b.vals = append(b.vals, v)
			if b.bytes += len(v); b.bytes >= chunkBatchBytes {
				return b.flush()
			}
			return nil
		}
		a.recs = append(a.recs, archiveRec{k, v})
		return nil
	})
	if err == nil {
		err = b.flush()
	}
	if err != nil {
		return nil, err
	}
	a.info = info
	a.nodes = make([]*Inode, len(a.recs))
	a.dents = make([]*Dentry, len(a.recs))
	a.events = make([]*Event, len(a.recs))
	return a, nil
}

func (a *archiveImport) bad(k []byte, format string, args ...any) error {
	return fmt.Errorf("%w: record %q: %s", ErrArchive, k, fmt.Sprintf(format, args...))
}

// check decodes and checks every record and gathers the inode numbers.
func (a *archiveImport) check() error {
	sid := a.info.Session
	for i, rc := range a.recs {
		if len(rc.k) < 17 || !bytes.Equal(rc.k[1:17], sid[:]) {
			return a.bad(rc.k, "not a key of session %s", sid)
		}
		var err error
		switch rc.k[0] {
		case pHeader, pState, pCounters, pCheckpoint, pPrune:
			err = a.checkSessionRecord(rc)
		default:
			err = a.checkTreeRecord(i, rc)
		}
		if err != nil {
			if errors.Is(err, ErrArchive) {
				return err
			}
			return fmt.Errorf("%w: %w", ErrArchive, err)
		}
	}
	if a.h == nil {
		return fmt.Errorf("%w: session %s has no header record", ErrArchive, sid)
	}
	// The counters give the next commit its sequence number: without them,
	// or behind the log, it would overwrite imported events.
	if !a.haveCounters || a.last.NextSeq < a.maxSeq || a.maxSeq == 0 {
		return fmt.Errorf("%w: session %s: the log (%d events) and its counters (next %d, present %v) disagree",
			ErrArchive, sid, a.maxSeq, a.last.NextSeq, a.haveCounters)
	}
	a.inos[a.h.Root] = true
	delete(a.inos, 0)
	a.maxHLC = max(a.maxHLC, a.last.LastHLC, a.h.Created)
	return nil
}

// versioned checks that k is at least min bytes long and notes its HLC.
func (a *archiveImport) versioned(k []byte, min int) error {
	if len(k) < min {
		return a.bad(k, "short key")
	}
	a.maxHLC = max(a.maxHLC, hlcFromInv(k))
	return nil
}

// checkSessionRecord checks a record about the session as a whole:
// header, state, counters, checkpoint or prune state.
func (a *archiveImport) checkSessionRecord(rc archiveRec) error {
	k, v := rc.k, rc.v
	switch k[0] {
	case pHeader:
		if len(k) != 17 {
			return a.bad(k, "bad header key")
		}
		a.h = new(SessionHeader)
		if err := decode(k, v, a.h); err != nil {
			return err
		}
		if a.h.ID != a.info.Session {
			return a.bad(k, "header of session %s", a.h.ID)
		}
	case pState:
		if len(k) != 25 {
			return a.bad(k, "bad state key")
		}
		if err := a.versioned(k, 25); err != nil {
			return err
		}
		var state sessionState
		if err := decode(k, v, &state); err != nil {
			return err
		}
		if hlcFromInv(k) >= a.stateAt {
			a.forgotten, a.stateAt = state.Forgotten, hlcFromInv(k)
		}
	case pCounters:
		if len(k) != 17 {
			return a.bad(k, "bad counters key")
		}
		a.haveCounters = true
		return decode(k, v, &a.last)
	case pCheckpoint:
		if len(v) != 8 {
			return a.bad(k, "checkpoint value of %d bytes", len(v))
		}
	case pPrune:
		if len(k) != 17 {
			return a.bad(k, "bad prune state key")
		}
		return decode(k, v, new(pruneState))
	}
	return nil
}

// checkTreeRecord checks record i, an event, entry, inode or xattr, and
// keeps the decoded event, entry or inode.
func (a *archiveImport) checkTreeRecord(i int, rc archiveRec) error {
	k, v := rc.k, rc.v
	switch k[0] {
	case pEvent:
		if len(k) != 25 {
			return a.bad(k, "bad event key")
		}
		ev := new(Event)
		if err := decode(k, v, ev); err != nil {
			return err
		}
		if ev.Seq != binary.BigEndian.Uint64(k[17:]) {
			return a.bad(k, "event %d under the key of event %d", ev.Seq, binary.BigEndian.Uint64(k[17:]))
		}
		a.events[i] = ev
		a.maxSeq = max(a.maxSeq, ev.Seq)
		a.inos[ev.Ino] = true
		a.maxHLC = max(a.maxHLC, ev.HLC)
	case pDentry:
		if err := a.versioned(k, 17+8+1+8); err != nil {
			return err
		}
		if k[len(k)-9] != 0 {
			return a.bad(k, "bad entry key")
		}
		d := new(Dentry)
		if err := decode(k, v, d); err != nil {
			return err
		}
		a.dents[i] = d
		a.inos[Ino(binary.BigEndian.Uint64(k[17:]))], a.inos[d.Ino] = true, true
	case pInode:
		if len(k) != 17+8+8 {
			return a.bad(k, "bad inode key")
		}
		a.maxHLC = max(a.maxHLC, hlcFromInv(k))
		n := new(Inode)
		if err := decode(k, v, n); err != nil {
			return err
		}
		a.nodes[i] = n
		a.inos[n.Ino], a.inos[n.Parent] = true, true
		if n.Ino != Ino(binary.BigEndian.Uint64(k[17:])) {
			return a.bad(k, "inode record of inode %d", n.Ino)
		}
	case pXattr:
		if err := a.versioned(k, 17+8+1+8); err != nil {
			return err
		}
		if _, _, err := splitXattrKey(k); err != nil {
			return err
		}
		a.inos[Ino(binary.BigEndian.Uint64(k[17:]))] = true
		return decode(k, v, new(xattrVersion))
	default:
		return a.bad(k, "unknown key kind")
	}
	return nil
}

// write puts the checked session into the store in transaction tx.
func (a *archiveImport) write(s *Store, tx kv.Txn) error {
	sid := a.info.Session
	t := &WriteTx{ReadTx: ReadTx{s: s, r: tx}, w: tx, sid: sid}
	if err := a.admit(t); err != nil {
		return err
	}
	renum, err := a.renumber(t)
	if err != nil {
		return err
	}
	for i := range a.recs {
		if err := a.putRecord(t, i, renum); err != nil {
			return err
		}
	}
	if _, err := rebuildLiveLocked(tx, sid); err != nil {
		return err
	}
	s.clock.observe(a.maxHLC)
	if cur, err := tx.Get(metaKey("hlc")); err != nil {
		return err
	} else if len(cur) != 8 || HLC(binary.BigEndian.Uint64(cur)) < a.maxHLC {
		return tx.Put(metaKey("hlc"), u64(uint64(a.maxHLC)))
	}
	return nil
}

// admit refuses a session the store already has, a name a live session
// has, and a format the store cannot take.
func (a *archiveImport) admit(t *WriteTx) error {
	sid := a.info.Session
	if v, err := t.w.Get(headerKey(sid)); err != nil {
		return err
	} else if v != nil {
		return fmt.Errorf("%w: session %s is already in this store (forget --hard it first to replace it)", ErrExist, sid)
	}
	if !a.forgotten { // a forgotten session's name is free
		if err := t.checkNameFree(a.h.Name, sid); err != nil {
			return err
		}
	}
	return t.needFormat(max(a.info.Format, formatInline))
}

// renumber gives every inode of the archive a new number, in the old order.
func (a *archiveImport) renumber(t *WriteTx) (map[Ino]Ino, error) {
	old := make([]Ino, 0, len(a.inos))
	for ino := range a.inos {
		old = append(old, ino)
	}
	slices.Sort(old)
	renum := map[Ino]Ino{0: 0}
	for _, ino := range old {
		n, err := t.AllocIno()
		if err != nil {
			return nil, err
		}
		renum[ino] = n
	}
	return renum, nil
}

// putRecord writes record i with its inode numbers renumbered (and, for
// an inode, its chunk references).
func (a *archiveImport) putRecord(t *WriteTx, i int, renum map[Ino]Ino) error {
	withIno := func(k []byte, ino Ino) []byte {
		k = bytes.Clone(k)
		binary.BigEndian.PutUint64(k[17:], uint64(renum[ino]))
		return k
	}
	k, v := a.recs[i].k, a.recs[i].v
	var err error
	switch k[0] {
	case pHeader:
		c := *a.h
		c.Root = renum[a.h.Root]
		v, err = encode(&c)
	case pEvent:
		ev := *a.events[i]
		ev.Ino = renum[ev.Ino]
		v, err = encode(&ev)
	case pDentry:
		d := *a.dents[i]
		d.Ino = renum[d.Ino]
		k = withIno(k, Ino(binary.BigEndian.Uint64(k[17:])))
		v, err = encode(&d)
	case pInode:
		n := *a.nodes[i]
		n.Ino, n.Parent = renum[n.Ino], renum[n.Parent]
		k = withIno(k, a.nodes[i].Ino)
		if err = t.putChunkRefs(&n); err != nil {
			return fmt.Errorf("%w: %w (the archive lacks a chunk of inode %d)", ErrArchive, err, a.nodes[i].Ino)
		}
		v, err = encode(&n)
	case pXattr:
		k = withIno(k, Ino(binary.BigEndian.Uint64(k[17:])))
	}
	if err != nil {
		return err
	}
	return t.w.Put(k, v)
}

// lastEvent is the session's newest event.
func (a *archiveImport) lastEvent() Event {
	var last Event
	for _, ev := range a.events {
		if ev != nil && ev.Seq >= last.Seq {
			last = *ev
		}
	}
	return last
}

// observe makes the clock issue only HLCs above h (a session imported
// from another store carries that store's HLCs).
func (c *Clock) observe(h HLC) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h > c.last {
		c.last = h
	}
}
