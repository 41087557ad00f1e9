package fs

// Staging backing files (FUSE passthrough).
//
// A file opened for writing while it is empty (a fresh create, O_TRUNC)
// and held by no other descriptor gets a staging file: an unlinked file in
// the mount's stage directory that the kernel is handed as the passthrough
// backing file (FOPEN_PASSTHROUGH), so its reads, writes and shared
// mappings run at the local disk's page-cache speed and never reach padfs.
// From then on the stage is the inode's buffer (it replaces dirty.go's
// pages): a flush, fsync, last release or the ticker reads it and commits
// its content through the ordinary content path, one version, as for any
// dirty buffer. Nothing in a stage is acknowledged until that commit, so a
// stage is worth nothing after a crash: the files are unlinked at birth
// and the directory is emptied when a mount starts and removed when it
// ends.
//
// The kernel (fs/fuse/iomode.c) refuses to mix modes on one inode: while
// an inode has a backing file every open of it must be passthrough with
// that same backing, and a passthrough open of an inode that has cached
// opens fails (open(2) then returns EIO). So a stage is started only when
// the opener is the inode's only handle, every later open of a staged
// inode is passthrough (go-fuse reuses the inode's backing id while one is
// registered), and a writable open of a non-empty file without a stage
// stays on the buffered path: a backing file must hold the whole content
// before the kernel reads it directly (there is no hook to fill it
// lazily), so staging it would copy the whole file at open, O(size) for
// an append of one line.
//
// Passthrough writes do not tell padfs anything: a stage is found changed
// by its ctime, size or mtime (ext4 and tmpfs timestamps are fine-grained
// once queried, so two writes between two looks never show the same
// ctime). A write through a shared mapping to a page already dirty does
// not touch the ctime, so a commit first starts writeback of the stage
// (sync_file_range), which write-protects its mapped pages: the next write
// through a mapping faults and stamps the ctime.
//
// After the last close the stage is kept, idle, while it holds the
// inode's current content (its ContentHLC): reading a file just written
// is passthrough too. It is dropped when its inode gets a version from
// elsewhere (InvalidateSession), is unlinked, or falls out of the idle
// budget (oldest first).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// PassthroughMode says whether open files are served through FUSE
// passthrough with staging files.
type PassthroughMode int

const (
	// PassthroughOff never uses passthrough (the zero value).
	PassthroughOff PassthroughMode = iota
	// PassthroughAuto uses it when the kernel and the process allow it,
	// and logs one line saying why not otherwise.
	PassthroughAuto
	// PassthroughOn fails the mount when passthrough is unavailable.
	PassthroughOn
)

// ParsePassthrough parses "auto", "on" or "off".
func ParsePassthrough(s string) (PassthroughMode, error) {
	switch s {
	case "auto":
		return PassthroughAuto, nil
	case "on":
		return PassthroughOn, nil
	case "off":
		return PassthroughOff, nil
	}
	return 0, fmt.Errorf("passthrough %q: want auto, on or off", s)
}

const (
	// defaultStageBudget bounds the bytes of idle stages (kept after the
	// last close for read-back) of one mount.
	defaultStageBudget = 1 << 30
	// maxIdleStages bounds their number (each holds a descriptor).
	maxIdleStages = 256
	// stageMinFree is the free space (and a tenth of the file system)
	// below which no stage starts and idle ones are dropped: a stage
	// doubles the disk a file takes until it goes, and must not be what
	// fills the disk (the full-disk guarantees assume padfs's own files).
	stageMinFree = 512 << 20
)

// stageRoom reports whether the stage directory's file system has room
// for staging (see stageMinFree).
func (m *Server) stageRoom() bool {
	var s unix.Statfs_t
	if err := unix.Statfs(m.stageDir, &s); err != nil {
		return false
	}
	free, total := s.Bavail*uint64(s.Bsize), s.Blocks*uint64(s.Bsize)
	return free >= stageMinFree && free >= total/10
}

// stage is the staging backing file of one inode (guarded by its
// fileState's mu).
type stage struct {
	file *os.File
	// seen is the stage's stat at the last look: at its start, before
	// the read of a commit, after padfs's own writes to it.
	seen stageStat
	// content is the ContentHLC of the version the stage holds, 0 once
	// it changed since (or before its first commit).
	content mvcc.HLC
	idleAt  time.Time // when its last handle went
}

type stageStat struct {
	size, blocks int64
	mtime, ctime int64 // ns
}

func (s stageStat) same(o stageStat) bool {
	return s.size == o.size && s.mtime == o.mtime && s.ctime == o.ctime
}

func (s *stage) stat() (stageStat, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(s.file.Fd()), &st); err != nil {
		return stageStat{}, fmt.Errorf("stat staging file %s: %w", s.file.Name(), err)
	}
	return stageStat{size: st.Size, blocks: st.Blocks, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, nil
}

// PassthroughFd hands the kernel the stage of a passthrough handle
// (go-fuse's FilePassthroughFder; asked once, at open).
func (h *handle) PassthroughFd() (int, bool) {
	if h.pt == nil {
		return -1, false
	}
	return int(h.pt.Fd()), true
}

// initPassthrough decides whether this mount uses passthrough: it makes
// the mount's stage directory and registers a backing file with the
// kernel once, which fails when not root, on a kernel without
// CONFIG_FUSE_PASSTHROUGH or over a stacked file system.
func (m *Server) initPassthrough() error {
	mode := m.opts.Passthrough
	if mode == PassthroughOff {
		return nil
	}
	why := m.probePassthrough()
	if why == nil {
		m.stagePool = make(chan *os.File, stagePoolSize)
		m.stageKick = make(chan struct{}, 1)
		m.fillDone = make(chan struct{})
		go m.stageFiller()
		m.pt = true
		m.log.Debug("padfs: passthrough on", "mountpoint", m.mountpoint, "stage", m.stageDir)
		return nil
	}
	m.removeStageDir()
	m.ptWhy = why.Error()
	if mode == PassthroughOn {
		return fmt.Errorf("mount %s: --passthrough=on: %w", m.mountpoint, why)
	}
	m.log.Info("padfs: passthrough unavailable, open files go through padfs", "mountpoint", m.mountpoint, "why", why)
	return nil
}

func (m *Server) probePassthrough() error {
	if m.server.KernelSettings().Flags64()&fuse.CAP_PASSTHROUGH == 0 {
		return errors.New("the kernel offers no FUSE passthrough (CONFIG_FUSE_PASSTHROUGH, Linux 6.9+)")
	}
	parent := m.opts.StageDir
	if parent == "" {
		parent = filepath.Join(m.spillDir(), "stage")
	}
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return fmt.Errorf("stage directory: %w", err)
	}
	dir, err := os.MkdirTemp(parent, "mount-")
	if err != nil {
		return fmt.Errorf("stage directory: %w", err)
	}
	m.stageDir = dir
	tf, err := m.createStageFile()
	if err != nil {
		return err
	}
	defer tf.Close()
	id, errno := m.server.RegisterBackingFd(&fuse.BackingMap{Fd: int32(tf.Fd())})
	switch errno {
	case 0:
	case unix.EPERM:
		return fmt.Errorf("register a backing file: %w (passthrough needs CAP_SYS_ADMIN: root)", errno)
	case unix.ELOOP:
		return fmt.Errorf("register a backing file in %s: %w (the stage directory is on a stacked file system: overlayfs, FUSE)", dir, errno)
	default:
		return fmt.Errorf("register a backing file in %s: %w", dir, errno)
	}
	if errno := m.server.UnregisterBackingFd(id); errno != 0 {
		return fmt.Errorf("unregister a backing file: %w", errno)
	}
	return nil
}

// Passthrough reports whether the mount serves open files through FUSE
// passthrough, and if not, why (empty when it was not asked for).
func (m *Server) Passthrough() (on bool, why string) { return m.pt, m.ptWhy }

func (m *Server) removeStageDir() {
	if m.stageDir != "" {
		os.RemoveAll(m.stageDir)
		m.stageDir = ""
	}
}

// createStageFile creates an empty staging file without a name: nothing
// of it outlives the process.
func (m *Server) createStageFile() (*os.File, error) {
	fd, err := unix.Open(m.stageDir, unix.O_RDWR|unix.O_TMPFILE|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), filepath.Join(m.stageDir, "(staging file)")), nil
	}
	tf, err := os.CreateTemp(m.stageDir, "s-") // no O_TMPFILE there
	if err != nil {
		return nil, fmt.Errorf("staging file: %w", err)
	}
	os.Remove(tf.Name())
	return tf, nil
}

// newStage returns an empty stage from the pool, nil when there is none
// ready (the open then takes the buffered path).
func (m *Server) newStage() (*stage, error) {
	var tf *os.File
	select {
	case tf = <-m.stagePool:
	default:
	}
	select {
	case m.stageKick <- struct{}{}:
	default:
	}
	if tf == nil && m.opts.stageSync {
		var err error
		if tf, err = m.createStageFile(); err != nil {
			return nil, err
		}
	}
	if tf == nil {
		return nil, nil
	}
	s := &stage{file: tf}
	var err error
	if s.seen, err = s.stat(); err != nil {
		tf.Close()
		return nil, err
	}
	return s, nil
}

const (
	// stagePoolSize staging files are kept ready: creating one costs
	// about half a millisecond on ext4 (a journal transaction), more
	// than the FUSE writes of a small file, so an open never creates
	// one itself.
	stagePoolSize = 2
	// refillPause: the pool refills once fresh opens have paused this
	// long. A burst of small files (tar -x, git, a shell loop) drains it
	// and stays buffered; a stream of large files, each taking longer
	// than this to write, is staged.
	refillPause = 5 * time.Millisecond
)

// stageFiller keeps the pool full, in the pauses between fresh opens.
func (m *Server) stageFiller() {
	defer close(m.fillDone)
	for {
		if len(m.stagePool) == cap(m.stagePool) {
			select {
			case <-m.stop:
				return
			case <-m.stageKick:
			}
		}
		t := time.NewTimer(refillPause)
		select {
		case <-m.stop:
			t.Stop()
			return
		case <-m.stageKick:
			t.Stop()
			continue // still busy: wait for a pause again
		case <-t.C:
		}
		tf, err := m.createStageFile()
		if err != nil {
			m.log.Warn("padfs: cannot make staging files; writing through padfs", "dir", m.stageDir, "err", err)
			select {
			case <-m.stop:
				return
			case <-time.After(retryAfter):
			}
			continue
		}
		select {
		case m.stagePool <- tf:
		default:
			tf.Close()
		}
	}
}

// passthroughFor returns the staging file a new handle of f is served
// from for request ctx, starting one for a fresh writer (O_TRUNC or
// O_EXCL) of an empty file that is f's only handle; nil: the buffered
// path. It counts the handle in f.ptOpens (Release gives it back). ok is
// false when the caller was killed while it waited for f.
//
// Other writers (touch, truncate, >>) stay buffered and give up an idle
// stage: a stage cannot grow past its file system's largest file (16 TiB
// on ext4) while the kernel holds it, and `truncate -s 1P f` must work.
func (f *fileState) passthroughFor(ctx context.Context, writable, fresh bool) (pt *os.File, ok bool) {
	if !f.m.pt {
		return nil, true
	}
	if !f.lockFor(ctx, false) {
		return nil, false
	}
	defer f.mu.Unlock()
	if f.stage != nil && writable && !fresh && f.ptOpens == 0 && f.unstageLocked() {
		return nil, true
	}
	if f.stage == nil {
		if !writable || !fresh || f.size != 0 || len(f.mem) != 0 || f.spill != nil {
			return nil, true
		}
		f.m.filesMu.Lock()
		only := f.opens == 1
		f.m.filesMu.Unlock()
		if !only {
			return nil, true // others hold the inode in cached mode
		}
		if !f.m.stageRoom() {
			return nil, true
		}
		s, err := f.m.newStage()
		if err != nil {
			f.m.log.Warn("padfs: no staging file, writing through padfs", "ino", f.key.ino, "err", err)
		}
		if s == nil {
			return nil, true
		}
		if !f.dirty {
			s.content = f.base.ContentHLC
		}
		f.stage = s
	}
	f.ptOpens++
	return f.stage.file, true
}

// afterRelease collects what runs when a RELEASE is done.
type afterRelease struct{ fns []func() }

// Release runs the inner RELEASE, then what the node's Release left for
// after it: go-fuse drops its reference to the inode's backing id only
// after the node's Release returns, and until then an open of the inode
// gets that backing whatever the node says. So a stage counts as unused
// (ptOpens, which lets it be dropped or replaced) only from here on.
func (r killRaw) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	a := &afterRelease{}
	r.after.Store(cancel, a)
	r.RawFileSystem.Release(cancel, in)
	r.after.Delete(cancel)
	for _, fn := range a.fns {
		fn()
	}
}

// whenReleased runs fn once the RELEASE of request ctx is done (at once
// outside one).
func (m *Server) whenReleased(ctx context.Context, fn func()) {
	if fc, ok := ctx.(*fuse.Context); ok {
		if v, ok := m.afterRelease.Load(fc.Cancel); ok {
			a := v.(*afterRelease)
			a.fns = append(a.fns, fn)
			return
		}
	}
	fn()
}

// ptClosed gives back a passthrough handle's count.
func (f *fileState) ptClosed() {
	f.mu.Lock()
	f.ptOpens--
	f.mu.Unlock()
}

// syncStageLocked notices changes made to the stage behind padfs's back
// (passthrough writes, mappings): f turns dirty with the stage's size and
// mtime. It returns the stage's stat; without a stage it does nothing.
func (f *fileState) syncStageLocked() (stageStat, error) {
	s := f.stage
	if s == nil {
		return stageStat{}, nil
	}
	st, err := s.stat()
	if err != nil {
		return st, err
	}
	if st.same(s.seen) {
		return st, nil
	}
	s.seen, s.content = st, 0
	f.size = st.size
	if f.pending.Mtime == nil {
		f.mtime = st.mtime
	}
	if !f.dirty {
		f.since = time.Now()
	}
	f.dirty, f.unlinked = true, false
	f.last = time.Unix(0, st.ctime)
	return st, nil
}

// prepareStageCommitLocked readies a commit of the stage: it notices what
// changed, then starts writeback, which write-protects the pages mapped
// shared, so a write through a mapping after the commit's read stamps
// the ctime (see the package comment above).
func (f *fileState) prepareStageCommitLocked() error {
	if _, err := f.syncStageLocked(); err != nil {
		return err
	}
	if !f.dirty {
		return nil
	}
	if err := unix.SyncFileRange(int(f.stage.file.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		return fmt.Errorf("write back staging file of inode %d: %w", f.key.ino, err)
	}
	return nil
}

// stageCommittedLocked records that the stage holds version n.
func (f *fileState) stageCommittedLocked(n *mvcc.Inode) {
	f.stage.content = n.ContentHLC
}

// stageAttrLocked is attrLocked for a staged f: the stage's size, mtime
// and blocks while it differs from the committed version.
func (f *fileState) stageAttrLocked() (bool, overlay) {
	st, err := f.stage.stat()
	if err != nil || (!f.dirty && st.same(f.stage.seen)) {
		return false, overlay{}
	}
	mtime := st.mtime
	if st.same(f.stage.seen) {
		mtime = f.mtime // padfs's own change: what the commit will store
	}
	if f.pending.Mtime != nil {
		mtime = *f.pending.Mtime // a utimens wins (WriteContentAttr)
	}
	return true, overlay{size: uint64(st.size), blocks: uint64(st.blocks), mtime: mtime,
		ctime: st.ctime, pending: f.pending}
}

func (f *fileState) stageReadAtLocked(p []byte, off int64) (int, error) {
	n, err := f.stage.file.ReadAt(p, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("read staging file of inode %d at %d: %w", f.key.ino, off, err)
	}
	return n, err
}

// stageTouchLocked records padfs's own change of the stage (a FUSE write
// of a non-passthrough handle, a truncate), so the next look does not
// take it for the kernel's.
func (f *fileState) stageTouchLocked() error {
	st, err := f.stage.stat()
	if err != nil {
		return err
	}
	f.stage.seen, f.stage.content = st, 0
	f.size = st.size
	return nil
}

func (f *fileState) stageWriteAtLocked(p []byte, off int64) error {
	if _, err := f.stage.file.WriteAt(p, off); err != nil {
		return fmt.Errorf("write staging file of inode %d: %w", f.key.ino, err)
	}
	return f.stageTouchLocked()
}

func (f *fileState) stageTruncateLocked(size int64) error {
	err := f.stage.file.Truncate(size)
	if errors.Is(err, unix.EFBIG) && f.unstageLocked() {
		// Past the local file system's largest file (16 TiB on ext4):
		// the buffered path takes any size up to mvcc.MaxFileSize.
		return f.truncateLocked(size)
	}
	if errors.Is(err, unix.EFBIG) {
		return fmt.Errorf("truncate inode %d to %d while open through its staging file: %w", f.key.ino, size, mvcc.ErrTooBig)
	}
	if err != nil {
		return fmt.Errorf("truncate staging file of inode %d: %w", f.key.ino, err)
	}
	return f.stageTouchLocked()
}

// unstageLocked turns f back into a buffer over its committed version,
// committing the stage first; false when a passthrough handle still holds
// the stage (the kernel reads it) or the commit did not take it.
func (f *fileState) unstageLocked() bool {
	if f.ptOpens > 0 {
		return false
	}
	if err := f.commitLocked(context.Background()); err != nil || f.dirty {
		return false
	}
	f.dropStageLocked()
	f.resetLocked(f.base)
	return true
}

func (f *fileState) stagePunchLocked(off, n int64) error {
	if err := unix.Fallocate(int(f.stage.file.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n); err != nil {
		return fmt.Errorf("punch hole in staging file of inode %d: %w", f.key.ino, err)
	}
	return f.stageTouchLocked()
}

// stageDataLocked returns the data runs of the stage below size (holes
// are committed as holes, without reading them).
func (f *fileState) stageDataLocked(size int64) []mvcc.Range {
	fd := int(f.stage.file.Fd())
	var out []mvcc.Range
	for pos := int64(0); pos < size; {
		d, err := unix.Seek(fd, pos, unix.SEEK_DATA)
		if err != nil || d >= size {
			break // ENXIO: only holes from pos on
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil || h > size {
			h = size
		}
		out = append(out, mvcc.Range{Off: d, Len: h - d})
		pos = h
	}
	return out
}

// stageSeekLocked is lseek's SEEK_DATA/SEEK_HOLE on the stage.
func (f *fileState) stageSeekLocked(off uint64, whence uint32) (uint64, unix.Errno) {
	r, err := unix.Seek(int(f.stage.file.Fd()), int64(off), int(whence))
	if err != nil {
		var errno unix.Errno
		if errors.As(err, &errno) {
			return 0, errno
		}
		return 0, unix.EIO
	}
	return uint64(r), 0
}

// restageLocked makes the stage hold version n (a version that came from
// elsewhere, for a stage that handles still read): an idle stage is
// dropped, one still open is rewritten.
func (f *fileState) restageLocked(n *mvcc.Inode) {
	if f.ptOpens == 0 {
		f.dropStageLocked()
		return
	}
	if err := f.copyIntoStageLocked(n); err != nil {
		f.m.log.Error("padfs: staging file left behind its version", "ino", f.key.ino, "err", err)
		return
	}
	f.stage.content = n.ContentHLC
}

func (f *fileState) copyIntoStageLocked(n *mvcc.Inode) error {
	if err := f.stage.file.Truncate(0); err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, r := range n.DataRanges(int64(n.Size)) {
		for pos := r.Off; pos < r.Off+r.Len; {
			c := min(int64(len(buf)), r.Off+r.Len-pos)
			got, err := f.m.st.ReadAt(n, buf[:c], pos)
			if err != nil && !(errors.Is(err, io.EOF) && int64(got) == c) {
				return err
			}
			if _, err := f.stage.file.WriteAt(buf[:c], pos); err != nil {
				return err
			}
			pos += c
		}
	}
	if err := f.stage.file.Truncate(int64(n.Size)); err != nil {
		return err
	}
	st, err := f.stage.stat()
	if err != nil {
		return err
	}
	f.stage.seen = st
	return nil
}

func (f *fileState) dropStageLocked() {
	if f.stage != nil {
		f.stage.file.Close()
		f.stage = nil
	}
}

// keepIdleStageLocked reports whether f, about to be dropped with no
// handle left, stays as an idle stage for passthrough reads of the
// content it holds.
func (f *fileState) keepIdleStageLocked() bool {
	if f.stage == nil || f.dirty || f.stage.content == 0 || f.stage.content != f.base.ContentHLC {
		return false
	}
	f.stage.idleAt = time.Now()
	return true
}

// tickStages drops idle stages of unlinked or vanished inodes, then the
// oldest idle ones beyond the budget.
func (m *Server) tickStages() {
	if !m.pt {
		return
	}
	type idle struct {
		f    *fileState
		at   time.Time
		size int64
	}
	var idles []idle
	var total int64
	for _, f := range m.openFiles() {
		f.mu.RLock()
		s := f.stage
		var it idle
		if s != nil && !f.dirty && f.ptOpens == 0 {
			it = idle{f, s.idleAt, f.size}
		}
		f.mu.RUnlock()
		if it.f == nil {
			continue
		}
		m.filesMu.Lock()
		isIdle := m.idleLocked(f)
		m.filesMu.Unlock()
		if !isIdle {
			continue
		}
		if cur, err := m.st.LatestInode(f.key.sid, f.key.ino); err != nil || cur.Nlink == 0 {
			m.evictStage(f)
			continue
		}
		idles = append(idles, it)
		total += it.size
	}
	budget := m.opts.StageBudget
	if budget == 0 {
		budget = defaultStageBudget
	}
	if len(idles) > 0 && !m.stageRoom() {
		budget = 0
	}
	slices.SortFunc(idles, func(a, b idle) int { return a.at.Compare(b.at) })
	for len(idles) > 0 && (total > budget || len(idles) > maxIdleStages) {
		m.evictStage(idles[0].f)
		total -= idles[0].size
		idles = idles[1:]
	}
}

// evictStage drops an idle, clean stage and its fileState.
func (m *Server) evictStage(f *fileState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.dirty || f.ptOpens > 0 {
		return
	}
	m.dropIfIdleLocked(f)
}

// closeStages drops every stage at unmount (after the last flush).
func (m *Server) closeStages() {
	m.filesMu.Lock()
	fs := make([]*fileState, 0, len(m.files))
	for _, f := range m.files {
		fs = append(fs, f)
	}
	m.filesMu.Unlock()
	for _, f := range fs {
		f.mu.Lock()
		f.dropStageLocked()
		f.mu.Unlock()
	}
	if m.fillDone != nil {
		<-m.fillDone // m.stop is closed
		for len(m.stagePool) > 0 {
			(<-m.stagePool).Close()
		}
	}
	m.removeStageDir()
}
