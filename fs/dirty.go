package fs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// Dirty buffers. Every live regular file that is open has one fileState,
// shared by all its handles: reads and writes of any handle go through it,
// so a reader sees written bytes at once. The content it presents is
//
//	pages written since the last commit (64 KiB each, in RAM up to 4 MiB,
//	then in an unlinked temporary file; a page in RAM holds only up to
//	its last byte that may be non-zero, rounded up to 4 KiB, so a small
//	file costs a small buffer)
//	over a stored content (under) up to baseLimit: the committed version
//	(base), or the chunks a stream has stored of the bytes written
//	(stream.go), whose pages are then dropped
//	over zeros (holes, or what a truncate cut off and an extension re-grew)
//
// and a commit streams that view, start to end, into mvcc.WriteContent as
// one version, then drops the pages. Invariant: the bytes of present pages
// at or beyond size are zero, and baseLimit <= size.
const (
	pageSize = 64 << 10
	spillAt  = 4 << 20 // bytes of pages kept in RAM before spilling
	// memCap bounds the RAM pages of all buffers together: past it, the
	// file being written spills whatever its size.
	memCap = 256 << 20
	// Ticker policy: commit a file held open and dirty once it has been
	// quiet for quietFor, or dirty for maxDirty plus 1 s per 8 MiB (so
	// a large file being streamed is not re-chunked over and over).
	quietFor = time.Second
	maxDirty = 5 * time.Second
	// retryAfter is how long the ticker waits after a failed commit.
	retryAfter = 10 * time.Second
)

type fileKey struct {
	sid mvcc.SessionID
	ino mvcc.Ino
}

type fileState struct {
	m    *Server
	key  fileKey
	node *Node // the go-fuse node that opened it (kernel cache bookkeeping)

	opens int // handles; guarded by m.filesMu

	// mu guards the fields below. It is held through a commit (store
	// I/O); it may be held when taking m.filesMu, never taken under it
	// (see Server.filesMu).
	mu        sync.RWMutex
	base      *mvcc.Inode // committed version
	under     *mvcc.Inode // content under the pages: base, or a stream's stored bytes
	baseLimit int64       // under's bytes at or beyond this read as zeros
	size      int64
	mtime     int64 // ns
	dirty     bool
	since     time.Time // first change since the last commit
	last      time.Time // last change
	failed    time.Time // last failed commit (the ticker backs off)
	// unlinked: the last commit found the inode without a name, so it
	// stored nothing. The ticker leaves f alone until that may have
	// changed: a write (touchLocked), a link (Node.Link: linkat of an
	// O_TMPFILE) or InvalidateSession (refresh). Close, fsync, Flush
	// and the last release still try, and find out for themselves.
	unlinked bool
	// pending holds chmod/chown/utimens made while dirty: they are
	// committed with the content, in the same version.
	pending  mvcc.SetAttr
	mem      map[int64][]byte
	spill    *os.File
	slots    map[int64]int64 // page -> offset in spill
	spillEnd int64
	free     []int64 // slots of dropped pages, for reuse
	// stage, when set, is the inode's content instead of the pages
	// and the base: the passthrough backing file (stage.go).
	stage *stage
	// ptOpens counts the handles the kernel serves from stage: while
	// there are any, the stage cannot go.
	ptOpens int
	strm    streamState // the writes streamed into the store (stream.go)
}

// acquire returns the fileState of n's inode, creating it, and counts one
// more handle on it.
func (m *Server) acquire(n *Node) (*fileState, error) {
	key := fileKey{n.s.id, n.ino}
	m.filesMu.Lock()
	f := m.files[key]
	if f != nil {
		f.opens++
		if f.node == nil || f.opens == 1 {
			f.node = n // an idle stage's node may be forgotten
		}
		m.filesMu.Unlock()
		return f, nil
	}
	m.filesMu.Unlock()
	base, err := m.st.LatestInode(key.sid, key.ino)
	if err != nil {
		return nil, err
	}
	if !base.IsRegular() {
		return nil, fmt.Errorf("%w: inode %d is not a regular file", mvcc.ErrInvalid, key.ino)
	}
	m.filesMu.Lock()
	created := false
	if f = m.files[key]; f == nil {
		f = &fileState{m: m, key: key, node: n}
		f.resetLocked(base)
		m.files[key] = f
		created = true
	}
	f.opens++
	m.filesMu.Unlock()
	if created {
		// A change committed between reading base and publishing f
		// (another handle's last close, a truncate by path) would be
		// missed: from now on every change goes through f, so one
		// more look settles it.
		f.mu.Lock()
		if cur, err := m.st.LatestInode(key.sid, key.ino); err == nil && cur.HLC != f.base.HLC && !f.dirty {
			f.resetLocked(cur)
		}
		f.mu.Unlock()
	}
	return f, nil
}

// release drops one handle; the last one commits (unless the file was
// unlinked meanwhile: nobody can reach its content any more) and frees the
// buffer.
func (m *Server) release(f *fileState) error {
	m.filesMu.Lock()
	f.opens--
	last := f.opens == 0
	m.filesMu.Unlock()
	if !last {
		return nil
	}
	err := m.commit(f)
	if err == nil {
		// A file created and never written (mvcc/held.go).
		err = m.st.FlushHeldIno(f.key.sid, f.key.ino)
	}
	m.dropIfIdle(f)
	return err
}

// dropIfIdle forgets f once no handle holds it and nothing is left to
// commit: after the last release, or after a background commit that
// succeeded where the last release's commit had failed. It may wait for
// a commit of f (f.mu), so it does not hold filesMu meanwhile: every
// other open would wait too.
func (m *Server) dropIfIdle(f *fileState) {
	m.filesMu.Lock()
	idle := m.idleLocked(f)
	m.filesMu.Unlock()
	if !idle {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirty && !f.unlinkedLocked() {
		return
	}
	// Under f.mu nothing makes f dirty; a new handle raises opens under
	// filesMu, so the check is repeated with the removal.
	if f.keepIdleStageLocked() || f.ptOpens > 0 {
		// Kept for passthrough reads, or until go-fuse has let go of
		// the stage's backing id (stage.go: ptClosed drops it then).
		return
	}
	m.dropIfIdleLocked(f)
}

// dropIfIdleLocked removes f from the server, with its pages and stage,
// if it is idle (idleLocked). The caller holds f.mu.
func (m *Server) dropIfIdleLocked(f *fileState) {
	m.filesMu.Lock()
	drop := m.idleLocked(f)
	if drop {
		delete(m.files, f.key)
		m.drops.Add(1)
	}
	m.filesMu.Unlock()
	if drop {
		f.dropPagesLocked()
		f.dropStageLocked()
	}
}

// idleLocked reports whether f has no handle and is still the buffer of
// its inode. filesMu is held.
func (m *Server) idleLocked(f *fileState) bool { return f.opens == 0 && m.files[f.key] == f }

// file returns the fileState of an inode if it is open.
func (m *Server) file(sid mvcc.SessionID, ino mvcc.Ino) *fileState {
	m.filesMu.Lock()
	defer m.filesMu.Unlock()
	return m.files[fileKey{sid, ino}]
}

// openFiles lists the fileStates (for Flush and the ticker).
func (m *Server) openFiles() []*fileState {
	m.filesMu.Lock()
	defer m.filesMu.Unlock()
	out := make([]*fileState, 0, len(m.files))
	for _, f := range m.files {
		out = append(out, f)
	}
	return out
}

// commit writes f's buffer as one version if it is dirty.
func (m *Server) commit(f *fileState) error { return m.commitCtx(context.Background(), f) }

// commitCtx is commit that ctx stops early (then f stays dirty).
func (m *Server) commitCtx(ctx context.Context, f *fileState) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commitLocked(ctx)
}

func (f *fileState) commitLocked(ctx context.Context) error {
	if f.stage != nil {
		if err := f.prepareStageCommitLocked(); err != nil {
			f.failed = time.Now()
			return err
		}
	}
	if !f.dirty {
		return nil
	}
	if h := f.m.opts.commitHook; h != nil {
		if err := h(f.key.sid, f.key.ino); err != nil {
			f.failed = time.Now()
			return fmt.Errorf("commit inode %d of session %s: %w", f.key.ino, f.key.sid, err)
		}
	}
	cur, err := f.m.st.LatestInode(f.key.sid, f.key.ino)
	if err != nil {
		f.failed = time.Now()
		return fmt.Errorf("commit inode %d of session %s: %w", f.key.ino, f.key.sid, err)
	}
	if cur.Nlink == 0 {
		// Kept for its open handles only; nothing to do until it is
		// written or linked again (see unlinked).
		f.unlinked = true
		return nil
	}
	sp := mvcc.Sparse{R: lockedReader{f}, Size: f.size, Data: f.dataRangesLocked()}
	n, err := f.writeContentLocked(ctx, sp) // stream.go
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("commit inode %d (%s) of session %s: %w", f.key.ino, cur.Name, f.key.sid, ctx.Err())
	}
	if err != nil {
		f.failed = time.Now()
		err = fmt.Errorf("commit inode %d (%s) of session %s: %w", f.key.ino, cur.Name, f.key.sid, err)
		if errors.Is(err, mvcc.ErrForgotten) || errors.Is(err, mvcc.ErrNoSession) {
			// The session is gone: nothing can take these bytes.
			f.m.log.Warn("padfs: discarding unsaved writes", "err", err)
			f.resetLocked(f.base)
		}
		return err
	}
	if f.stage != nil {
		f.stageCommittedLocked(n)
	}
	f.resetLocked(n)
	if f.node != nil {
		// The kernel's pages came from the writes we just committed;
		// passthrough writes left none (stale ones, maybe).
		kc := uint64(n.ContentHLC)
		if f.stage != nil {
			kc = 0
		}
		f.node.kcache.Store(kc)
	}
	return nil
}

// dataRangesLocked returns the runs of the view that may hold data: the
// present pages and the base's data below baseLimit. The rest reads as
// zeros, so a commit stores it as holes without reading it.
func (f *fileState) dataRangesLocked() []mvcc.Range {
	if f.stage != nil {
		return f.stageDataLocked(f.size)
	}
	pages := make([]int64, 0, len(f.mem)+len(f.slots))
	for pg := range f.mem {
		pages = append(pages, pg)
	}
	for pg := range f.slots {
		pages = append(pages, pg)
	}
	slices.Sort(pages)
	var pr []mvcc.Range
	for _, pg := range pages {
		if start := pg * pageSize; start < f.size {
			pr = append(pr, mvcc.Range{Off: start, Len: min(pageSize, f.size-start)})
		}
	}
	return mvcc.MergeRanges(pr, f.under.DataRanges(f.baseLimit))
}

func (f *fileState) unlinkedLocked() bool {
	cur, err := f.m.st.LatestInode(f.key.sid, f.key.ino)
	return err == nil && cur.Nlink == 0
}

// due reports whether the ticker should commit f now.
func (f *fileState) due(now time.Time) bool {
	if f.isStaged() {
		// Passthrough writes are seen only by looking.
		f.mu.Lock()
		if f.stage != nil {
			f.syncStageLocked()
		}
		f.mu.Unlock()
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if !f.dirty || f.unlinked || now.Sub(f.failed) < retryAfter {
		return false
	}
	// Scaled by the bytes buffered, not the size: a sparse file may be
	// huge and cheap to commit.
	buffered := int64(len(f.mem)+len(f.slots)) * pageSize
	if f.stage != nil || f.strm.st != nil {
		buffered = f.size // a stream's stored bytes are not in pages
	}
	limit := maxDirty + time.Duration(buffered/(8<<20))*time.Second
	return now.Sub(f.last) >= quietFor || now.Sub(f.since) >= limit
}

// refresh re-reads the base of a clean buffer (after a change outside
// FUSE).
func (f *fileState) refresh() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unlinked = false // the change may have been a link
	if f.stage != nil {
		f.syncStageLocked()
	}
	if f.dirty {
		return
	}
	if n, err := f.m.st.LatestInode(f.key.sid, f.key.ino); err == nil && n.IsRegular() {
		f.resetLocked(n)
	}
}

// resetLocked makes f a clean view of version n.
func (f *fileState) resetLocked(n *mvcc.Inode) {
	f.dropPagesLocked()
	if f.stage != nil && f.stage.content != n.ContentHLC {
		f.restageLocked(n)
	}
	f.base, f.under = n, n
	f.size = int64(n.Size)
	f.baseLimit = f.size
	f.streamResetLocked(n)
	f.mtime = n.Mtime
	f.pending = mvcc.SetAttr{}
	f.dirty = false
	f.unlinked = false
	f.since, f.last = time.Time{}, time.Time{}
}

// linked tells f that its inode has a name again (linkat of an O_TMPFILE
// descriptor): the ticker commits it again.
func (f *fileState) linked() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.unlinked = false
}

func (f *fileState) dropPagesLocked() {
	f.streamCancelLocked()
	f.streamUnderResetLocked()
	f.m.memBytes.Add(-int64(len(f.mem)) * pageSize)
	for _, page := range f.mem {
		recyclePage(page)
	}
	f.mem = nil
	if f.spill != nil {
		f.spill.Close()
		f.spill = nil
	}
	f.slots = nil
	f.spillEnd = 0
	f.free = nil
}

func (f *fileState) touchLocked(mtime int64) {
	now := time.Now()
	if !f.dirty {
		f.since = now
	}
	f.dirty = true
	f.unlinked = false
	f.last = now
	f.mtime = mtime
}

// overlay is what a dirty buffer changes in an inode's attributes.
type overlay struct {
	size, blocks uint64
	mtime, ctime int64
	pending      mvcc.SetAttr
}

// attrLocked reports (f.mu held), while f is dirty, the buffer's size, mtime, an estimate of
// st_blocks and the pending attribute changes.
func (f *fileState) attrLocked() (bool, overlay) {
	if f.stage != nil {
		return f.stageAttrLocked()
	}
	if !f.dirty {
		return false, overlay{}
	}
	var stored int64
	if u := f.under; u.Size > 0 {
		// The stored bytes under the pages, prorated below baseLimit
		// (in float: a sparse size times a block count overflows int64).
		stored = int64(float64(u.Blocks()*512) * (float64(f.baseLimit) / float64(u.Size)))
	}
	stored += int64(len(f.mem)+len(f.slots)) * pageSize
	stored = min(stored, f.size+511)
	return true, overlay{size: uint64(f.size), blocks: uint64(stored+511) / 512,
		mtime: f.mtime, ctime: f.last.UnixNano(), pending: f.pending}
}

// addPending records chmod/chown/utimens for the next commit; false if f
// is clean (then the caller commits them on their own).
func (f *fileState) addPending(a mvcc.SetAttr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.syncStageLocked()
	if !f.dirty {
		return false
	}
	f.addPendingLocked(a)
	return true
}

func (f *fileState) addPendingLocked(a mvcc.SetAttr) {
	p := &f.pending
	if a.Mode != nil {
		p.Mode = a.Mode
	}
	if a.Uid != nil {
		p.Uid = a.Uid
	}
	if a.Gid != nil {
		p.Gid = a.Gid
	}
	if a.Atime != nil {
		p.Atime = a.Atime
	}
	if a.Mtime != nil {
		p.Mtime = a.Mtime
		f.mtime = *a.Mtime
	}
	f.last = time.Now()
}

type lockedReader struct{ f *fileState }

func (r lockedReader) ReadAt(p []byte, off int64) (int, error) { return r.f.readAtLocked(p, off) }

// readAt reads the current content (dirty or not) for request ctx (see
// lockFor).
func (f *fileState) readAt(ctx context.Context, p []byte, off int64) (int, error) {
	if !f.lockFor(ctx, true) {
		return 0, errKilled
	}
	defer f.mu.RUnlock()
	return f.readAtLocked(p, off)
}

func (f *fileState) hasPage(p int64) bool {
	if f.mem != nil {
		_, ok := f.mem[p]
		return ok
	}
	_, ok := f.slots[p]
	return ok
}

func (f *fileState) readAtLocked(p []byte, off int64) (int, error) {
	if f.stage != nil {
		return f.stageReadAtLocked(p, off)
	}
	if off >= f.size {
		return 0, io.EOF
	}
	var eof error
	if rest := f.size - off; int64(len(p)) > rest {
		p, eof = p[:rest], io.EOF
	}
	done := 0
	for done < len(p) {
		pos := off + int64(done)
		pg, in := pos/pageSize, pos%pageSize
		if f.hasPage(pg) {
			n := min(int64(len(p)-done), pageSize-in)
			if err := f.readPageLocked(pg, in, p[done:done+int(n)]); err != nil {
				return done, err
			}
			done += int(n)
			continue
		}
		// A run of absent pages: from under below baseLimit, zeros above.
		end := off + int64(len(p))
		for q := pg + 1; q*pageSize < end; q++ {
			if f.hasPage(q) {
				end = q * pageSize
				break
			}
		}
		if pos < f.baseLimit {
			end = min(end, f.baseLimit)
			n, err := f.m.st.ReadAt(f.under, p[done:done+int(end-pos)], pos)
			if err != nil && !(errors.Is(err, io.EOF) && n == int(end-pos)) {
				return done, fmt.Errorf("read inode %d at %d: %w", f.key.ino, pos, err)
			}
		} else {
			clear(p[done : done+int(end-pos)])
		}
		done += int(end - pos)
	}
	return done, eof
}

// readPageLocked copies bytes [in, in+len(dst)) of present page pg.
func (f *fileState) readPageLocked(pg, in int64, dst []byte) error {
	if f.mem != nil {
		c := 0
		if page := f.mem[pg]; in < int64(len(page)) {
			c = copy(dst, page[in:])
		}
		clear(dst[c:]) // beyond a short page: zeros
		return nil
	}
	if _, err := f.spill.ReadAt(dst, f.slots[pg]+in); err != nil {
		return fmt.Errorf("read spill file of inode %d: %w", f.key.ino, err)
	}
	return nil
}

// pageContentLocked returns a fresh copy of page pg as the view shows it,
// at least need bytes long: all of it that is within the file, rounded up
// to 4 KiB (the rest of the page reads as zeros).
func (f *fileState) pageContentLocked(pg, need int64) ([]byte, error) {
	start := pg * pageSize
	n := min(int64(pageSize), max(0, f.size-start))
	buf := make([]byte, pageLen(max(n, need)))
	if n == 0 {
		return buf, nil
	}
	if _, err := f.readAtLocked(buf[:n], start); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf, nil
}

// pageLen rounds a page's length up to 4 KiB, at most pageSize.
func pageLen(n int64) int64 { return min(pageSize, (n+4095)&^4095) }

// writeAt writes p at off into the buffer; with kill it also clears
// setuid/setgid (killpriv.go) in the same version, and reports whether
// the mode changed.
func (f *fileState) writeAt(ctx context.Context, p []byte, off int64, kill bool) (killed bool, err error) {
	if !f.lockFor(ctx, false) {
		return false, errKilled
	}
	var st *mvcc.Stream
	defer func() { streamWait(ctx, st) }() // after the unlock below
	defer f.mu.Unlock()
	f.streamSyncLocked() // drops the pages stored since the last write
	if err := f.writeAtLocked(p, off); err != nil {
		f.streamCancelLocked()
		return false, err
	}
	st = f.streamWroteLocked(p, off)
	f.touchLocked(time.Now().UnixNano())
	if kill {
		return f.killPrivLocked(ctx)
	}
	return false, nil
}

// withPending returns mode and gid with a pending chmod and chown applied.
func withPending(p *mvcc.SetAttr, mode, gid uint32) (uint32, uint32) {
	if p.Mode != nil {
		mode = mode&unix.S_IFMT | *p.Mode&07777
	}
	if p.Gid != nil {
		gid = *p.Gid
	}
	return mode, gid
}

// killPrivLocked clears setuid/setgid as a change by the caller of ctx, who
// the kernel says lacks CAP_FSETID, must (killpriv.go): in the pending
// version when f is dirty, else in a version of its own.
func (f *fileState) killPrivLocked(ctx context.Context) (bool, error) {
	mode := f.base.Mode
	if f.dirty {
		mode, _ = withPending(&f.pending, mode, f.base.Gid)
	}
	if mode&privBits == 0 {
		return false, nil
	}
	// Rare: re-read the mode, in case a chmod committed on its own
	// while the buffer was dirty left f.base behind.
	cur, err := f.m.st.LatestInode(f.key.sid, f.key.ino)
	if err != nil {
		return false, fmt.Errorf("inode %d of session %s: %w", f.key.ino, f.key.sid, err)
	}
	mode, gid := cur.Mode, cur.Gid
	if f.dirty {
		mode, gid = withPending(&f.pending, mode, gid)
	}
	km := killedMode(ctx, mode, gid, true)
	if km == mode {
		return false, nil
	}
	perm := km & 07777
	if f.dirty {
		f.pending.Mode = &perm
		f.last = time.Now()
		return true, nil
	}
	n, err := f.m.st.SetAttr(f.key.sid, f.key.ino, mvcc.SetAttr{Mode: &perm})
	if err != nil {
		return false, fmt.Errorf("clear setuid/setgid of inode %d of session %s: %w", f.key.ino, f.key.sid, err)
	}
	f.resetLocked(n)
	return true, nil
}

func (f *fileState) writeAtLocked(p []byte, off int64) error {
	if f.stage != nil {
		return f.stageWriteAtLocked(p, off)
	}
	end := off + int64(len(p))
	for len(p) > 0 {
		pg, in := off/pageSize, off%pageSize
		n := min(int64(len(p)), pageSize-in)
		full := in == 0 && n == pageSize
		if f.mem != nil || f.spill == nil {
			if f.mem == nil {
				f.mem = map[int64][]byte{}
			}
			page, ok := f.mem[pg]
			if !ok {
				if full {
					page = fullPages.Get().(*[pageSize]byte)[:] // overwritten whole
				} else {
					var err error
					if page, err = f.pageContentLocked(pg, in+n); err != nil {
						return err
					}
				}
				f.mem[pg] = page
				f.m.memBytes.Add(pageSize)
			} else if int64(len(page)) < in+n {
				// Grow a short page (at least doubling).
				grown := make([]byte, pageLen(max(in+n, 2*int64(len(page)))))
				copy(grown, page)
				page = grown
				f.mem[pg] = page
			}
			copy(page[in:], p[:n])
		} else {
			slot, ok := f.slots[pg]
			if !ok {
				slot = f.newSlotLocked()
				if !full {
					page, err := f.pageContentLocked(pg, pageSize)
					if err != nil {
						return err
					}
					copy(page[in:], p[:n])
					if _, err := f.spill.WriteAt(page, slot); err != nil {
						return fmt.Errorf("write spill file of inode %d: %w", f.key.ino, err)
					}
					f.slots[pg] = slot
					off, p = off+n, p[n:]
					continue
				}
				f.slots[pg] = slot
			}
			if _, err := f.spill.WriteAt(p[:n], slot+in); err != nil {
				return fmt.Errorf("write spill file of inode %d: %w", f.key.ino, err)
			}
		}
		off, p = off+n, p[n:]
	}
	if end > f.size {
		f.size = end
	}
	if f.mem != nil && (len(f.mem)*pageSize > f.spillLimitLocked() || f.m.memBytes.Load() > memCap) {
		return f.spillLocked()
	}
	return nil
}

// newSlotLocked returns a free page slot in the spill file.
func (f *fileState) newSlotLocked() int64 {
	if n := len(f.free); n > 0 {
		slot := f.free[n-1]
		f.free = f.free[:n-1]
		return slot
	}
	slot := f.spillEnd
	f.spillEnd += pageSize
	return slot
}

// fullPages recycles the RAM pages dropped for a stream (stream.go), which
// would otherwise cost a streamed file its size in allocations, zeroed,
// and garbage.
var fullPages = sync.Pool{New: func() any { return new([pageSize]byte) }}

// recyclePage gives a dropped RAM page to fullPages (a whole one only).
func recyclePage(page []byte) {
	if len(page) == pageSize {
		fullPages.Put((*[pageSize]byte)(page))
	}
}

// dropPageLocked forgets page pg (its bytes are stored elsewhere, or cut).
func (f *fileState) dropPageLocked(pg int64) {
	if page, ok := f.mem[pg]; ok {
		delete(f.mem, pg)
		f.m.memBytes.Add(-pageSize)
		recyclePage(page)
	}
	if slot, ok := f.slots[pg]; ok {
		delete(f.slots, pg)
		f.free = append(f.free, slot)
	}
}

// spillLocked moves the RAM pages into an unlinked temporary file.
func (f *fileState) spillLocked() error {
	dir := f.m.spillDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("spill directory %s: %w", dir, err)
	}
	tf, err := os.CreateTemp(dir, ".padfs-spill-*")
	if err != nil {
		return fmt.Errorf("spill inode %d: %w", f.key.ino, err)
	}
	os.Remove(tf.Name())
	slots := make(map[int64]int64, len(f.mem))
	var end int64
	for pg, page := range f.mem {
		if _, err := tf.WriteAt(page, end); err != nil {
			tf.Close()
			return fmt.Errorf("spill inode %d to %s: %w", f.key.ino, dir, err)
		}
		slots[pg] = end
		end += pageSize
	}
	// Short pages leave holes; the last one must not end the file early.
	if err := tf.Truncate(end); err != nil {
		tf.Close()
		return fmt.Errorf("spill inode %d to %s: %w", f.key.ino, dir, err)
	}
	f.m.memBytes.Add(-int64(len(f.mem)) * pageSize)
	for _, page := range f.mem {
		recyclePage(page)
	}
	f.spill, f.slots, f.spillEnd, f.mem, f.free = tf, slots, end, nil, nil
	return nil
}

// truncate sets the buffer's size (and marks it dirty).
func (f *fileState) truncate(size int64, mtime int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.truncateLocked(size); err != nil {
		return err
	}
	f.touchLocked(mtime)
	return nil
}

func (f *fileState) truncateLocked(size int64) error {
	if f.stage != nil {
		return f.stageTruncateLocked(size)
	}
	f.streamTruncatedLocked(size)
	if size < f.size {
		cut := func(pg int64) bool { return pg*pageSize >= size }
		for pg := range f.mem {
			if cut(pg) {
				f.dropPageLocked(pg)
			}
		}
		for pg := range f.slots {
			if cut(pg) {
				f.dropPageLocked(pg)
			}
		}
		if in := size % pageSize; in != 0 && f.hasPage(size/pageSize) {
			pg := size / pageSize
			if f.mem != nil {
				if page := f.mem[pg]; in < int64(len(page)) {
					clear(page[in:])
				}
			} else if _, err := f.spill.WriteAt(make([]byte, pageSize-in), f.slots[pg]+in); err != nil {
				return fmt.Errorf("write spill file of inode %d: %w", f.key.ino, err)
			}
		}
	}
	f.baseLimit = min(f.baseLimit, size)
	f.size = size
	if f.baseLimit == 0 {
		f.streamUnderResetLocked() // nothing of a stream's chunks is left in view
	}
	return nil
}

// punchHole zeroes [off, off+n) without changing the size. The work is
// bounded by the data in the range, not by its length: a page that would
// read as zeros without its buffer (no stored data under it) is dropped,
// and only pages over stored data are kept, zeroed.
func (f *fileState) punchHole(off, n int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stage != nil {
		f.syncStageLocked()
	}
	end := min(off+n, f.size)
	if off >= end {
		return nil
	}
	f.streamCancelLocked()
	if f.stage != nil {
		if err := f.stagePunchLocked(off, end-off); err != nil {
			return err
		}
		f.touchLocked(time.Now().UnixNano())
		return nil
	}
	zero := make([]byte, pageSize)
	// Partial pages at the edges: zeros written over them.
	if in := off % pageSize; in != 0 || end-off < pageSize {
		c := min(end-off, pageSize-in)
		if err := f.writeAtLocked(zero[:c], off); err != nil {
			return err
		}
		off += c
	}
	if off < end && end%pageSize != 0 && end < f.size {
		c := end % pageSize
		if err := f.writeAtLocked(zero[:c], end-c); err != nil {
			return err
		}
		end -= c
	}
	if off >= end {
		// All within one page, zeroed above: dropping "the whole
		// pages" [off/pageSize, ceil(end/pageSize)) would drop that
		// page, and its other unsaved bytes with it.
		f.touchLocked(time.Now().UnixNano())
		return nil
	}
	// Whole pages in [off, end): drop the buffered ones, then zero
	// those over stored data (under).
	first, last := off/pageSize, (end+pageSize-1)/pageSize // [first, last)
	drop := func(pg int64) bool { return pg >= first && pg < last }
	for pg := range f.mem {
		if drop(pg) {
			f.dropPageLocked(pg)
		}
	}
	for pg := range f.slots {
		if drop(pg) {
			f.dropPageLocked(pg)
		}
	}
	for _, d := range f.under.DataRanges(f.baseLimit) {
		s, e := max(d.Off, off), min(d.Off+d.Len, end)
		for pos := s - s%pageSize; pos < e; pos += pageSize {
			c := min(pageSize, f.size-pos)
			if err := f.writeAtLocked(zero[:c], pos); err != nil {
				return err
			}
		}
	}
	f.touchLocked(time.Now().UnixNano())
	return nil
}

func (f *fileState) isDirty() bool {
	if f.isStaged() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.syncStageLocked() // passthrough writes are seen by looking
		return f.dirty
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.dirty
}

// isStaged reports whether f's content is a staging file (stage.go).
func (f *fileState) isStaged() bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.stage != nil
}
