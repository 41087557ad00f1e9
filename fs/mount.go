// Package fs serves a padfs store over FUSE (github.com/hanwen/go-fuse/v2).
//
// # Tree
//
// With Options.Session set, the mount root is that session's tree. Without
// it, the root lists the live sessions as directories named by their ULID;
// a session can also be looked up by its name (the newest live session with
// that name wins), mkdir NAME at the root creates a session named NAME (it is
// then listed by its ULID), and rmdir (or rm -rf) of a session directory
// soft-forgets it through Options.Forget (EPERM when that hook is nil).
//
// Every session root has hidden entries that lookups find but readdir never
// lists, so find, grep -r, du and cp -a of the live tree never descend into
// them:
//
//	.asof/         time travel: .asof/<name>/ is the whole session as of the
//	               HLC that <name> resolves to (timetravel.Resolve: checkpoint
//	               name, canonical HLC or any RFC 3339 time), read-only
//	               (EROFS); ls .asof/ lists timetravel.Points.
//	.grep/, .log/  reserved for Options.Virtual hooks (see VirtualDir).
//
// Creating, renaming onto or removing a reserved name at a session root
// fails: EEXIST when the name resolves (.asof, registered virtual dirs),
// EPERM otherwise.
//
// # Writes
//
// Writes are buffered per inode (dirty.go), shared by every handle of the
// inode, and committed as one version (mvcc.Store.WriteContent) on every
// FUSE flush (each close(2)), on release of the last handle, on fsync (then
// the store is synced too) and by a background ticker for files held open and
// dirty (after 1 s without writes, or at the latest after 5 s plus 1 s per
// 8 MiB of file). Buffers live in RAM up to 4 MiB (256 MiB for all
// buffers together) and spill to an unlinked temporary file in
// Options.SpillDir above that. While a file is dirty, a truncate
// (ftruncate, O_TRUNC, truncate by path) and chmod/chown/utimens join its
// pending version (tar -x costs a create and a write per file); on a clean
// file they are versions of their own, except a truncate through a
// writable descriptor, which starts the buffer. An unlinked file's buffer is
// never committed: nothing can reach it any more (once a commit has found
// it unlinked, the ticker leaves it alone until it is written or linked
// again, as linkat names an O_TMPFILE file).
//
// With Options.Passthrough, a file opened for writing with O_TRUNC or
// O_EXCL while empty and held by no other descriptor is served from a
// staging file the kernel reads and writes itself (FUSE passthrough); the
// staging file is that inode's buffer, committed the same way (stage.go).
//
// # Kernel caches
//
// Live entries, negative entries (names that do not exist) and attributes
// are cached for a minute; content is kept across opens (FOPEN_KEEP_CACHE)
// while the inode's ContentHLC is the one the kernel last read or wrote
// (a file written through the mount reads back from the page cache, with
// no FUSE READ). The kernel never drops pages on its own when it sees a
// new mtime or size (FUSE_EXPLICIT_INVAL_DATA): an open file's pages stay
// those of the version it read or wrote until InvalidateSession or an
// open of a newer version (close-to-open, as NFS). A live directory's
// listing is cached (FOPEN_CACHE_DIR) while the directory is the version
// it was listed at; every change of its entries is a new one. Symlink
// targets are cached (a target never changes: a new one is a new
// inode). Views in .asof/ of HLCs already in the past never change and
// are cached for an hour (negative entries for a minute). The kernel
// learns of every change made through the mount; changes made behind its
// back (fork, forget, redact, checkpoint by the CLI, writes through
// session.Wrap in the mount's process) must be announced with
// InvalidateSession, which drops the
// kernel's entries (negative ones included), attributes and pages of the
// session. What neither covers is bounded by the timeout: a background
// commit of a file refines the st_blocks estimate and the ctime that stat
// showed while it was dirty. .asof itself, checkpoint names and views of a
// time not yet past are cached for 1 s, and never negatively.
//
// # Inode numbers
//
// Live files report their mvcc inode number (unique store-wide). Nodes of
// .asof/ views and the synthetic directories get numbers derived from a hash
// with bit 62 set (2^62 <= ino < 2^63), which mvcc never allocates; go-fuse's
// own automatic numbers start at 2^63.
package fs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// Options configure a mount.
type Options struct {
	// Session is the session mounted at the root. Nil: the root lists the
	// live sessions as directories (see the package comment).
	Session *mvcc.SessionID
	// AsOf, with Session, mounts that session read-only as it was at this
	// HLC (the tree .asof/<AsOf>/ shows); this also works for a session
	// forgotten after AsOf. Nil: the live, writable tree.
	AsOf *mvcc.HLC
	// AllowOther lets other users in; the kernel then enforces file modes
	// and ownership (allow_other + default_permissions).
	AllowOther bool
	// Debug logs every FUSE request (go-fuse's trace).
	Debug bool
	// Uid and Gid own the root directories of sessions created by mkdir at
	// the root of a multi-session mount.
	Uid, Gid uint32
	// SpillDir holds the (unlinked) temporary files that large dirty
	// buffers spill to; created if missing. Empty: os.TempDir().
	SpillDir string
	// Passthrough serves files open for writing from staging files the
	// kernel reads and writes directly (FUSE passthrough, stage.go).
	Passthrough PassthroughMode
	// StageDir holds each mount's staging files (in a subdirectory of
	// its own, removed at unmount). Empty: SpillDir's "stage".
	StageDir string
	// StageBudget bounds the bytes of staging files kept after the
	// last close for passthrough reads. Zero: 1 GiB.
	StageBudget int64
	// Forget soft-forgets a session when its directory is removed at the
	// root of a multi-session mount. Nil: such an rmdir fails with EPERM.
	Forget func(mvcc.SessionID) error
	// Virtual adds read-only virtual directories to every live session
	// root, keyed by their name (".grep", ".log", or any other name that
	// starts with a dot). They are hidden from readdir like .asof.
	Virtual map[string]VirtualDir
	// Logger receives the mount's errors (causes of EIO, failed
	// background commits). Nil: slog.Default().
	Logger *slog.Logger

	// debugLog receives go-fuse's trace when Debug is set (tests count
	// requests with it); nil: the standard logger.
	debugLog *log.Logger
	// commitHook (tests only; nil otherwise) runs at every attempt to
	// commit a dirty buffer, before the store is asked; an error fails
	// that attempt as a store error would. It exists because a real
	// store cannot be made to refuse one commit and take the next, and
	// the retry paths (failed, dropIfIdle) need exercising. It runs
	// with the buffer locked: it must not touch the mount.
	commitHook func(sid mvcc.SessionID, ino mvcc.Ino) error
	// killedHook (tests only) runs when a long request is stopped: its
	// caller found being killed, or CancelRequests (cancel.go).
	killedHook func(err error)
	// stageSync (tests only) creates a staging file at the open that
	// finds the pool empty, so a test's every fresh open is staged.
	stageSync bool
	// manualTicks (tests only) stops the background ticker's clock:
	// the test calls m.tick with the time it chooses, so what the
	// ticker does does not depend on the machine's speed.
	manualTicks bool
}

// VirtualDir is the extension point for generated, read-only directories at
// a session root (.grep/, .log/). A file is generated once per open (the
// lookup that precedes the open generates it, and the open takes that
// content), so its content is always current; they are served
// with direct I/O, so readers see the whole generated content whatever size
// stat reported.
type VirtualDir struct {
	// List returns the names readdir shows (may be nil: an empty listing;
	// lookups of other names still go to Open).
	List func(sid mvcc.SessionID) ([]string, error)
	// Open returns the content of the file name in session sid. An error
	// wrapping mvcc.ErrNotFound means there is no such file (ENOENT). ctx
	// is the FUSE request's: an INTERRUPT cancels it, and an Open that
	// stops for it returns an error wrapping context.Canceled (EINTR).
	Open func(ctx context.Context, sid mvcc.SessionID, name string) ([]byte, error)
}

// reservedNames are hidden at every session root, whether or not a
// VirtualDir serves them.
var reservedNames = []string{".asof", ".grep", ".log"}

// Timeouts of the kernel's entry and attribute caches (see "Kernel caches"
// in the package comment).
const (
	// liveTimeout is for live entries (also negative ones: names that do
	// not exist) and attributes. Every change to a live tree reaches the
	// kernel's caches without waiting for it: the kernel learns those it
	// makes through FUSE itself, and InvalidateSession drops what changed
	// elsewhere in the process (the CLI's fork, forget, redact,
	// checkpoint; writes through session.Wrap). So the timeout only
	// bounds what escapes both: attributes that a background commit of
	// a dirty file refines (st_blocks, ctime), and changes nobody
	// announced. A minute covers an agent's burst of tools (git add, git
	// commit, git status re-stat the same tree) at no risk beyond that.
	liveTimeout = time.Minute
	// shortTimeout is for what changes without notice: .asof itself (its
	// mtime is the last commit), checkpoint names, views of a time not
	// yet past, and nodes that set no timeout of their own.
	shortTimeout = time.Second
	pastTimeout  = time.Hour
)

// Server is a running FUSE mount of a store (what Mount returns).
type Server struct {
	st *mvcc.Store
	// sharedStore: other processes write st too (PostgreSQL): a streamed
	// file keeps its pages (stream.go).
	sharedStore bool
	opts        Options
	mountpoint  string
	server      *fuse.Server
	root        *gofs.Inode
	started     time.Time

	sessMu   sync.Mutex
	sessions map[mvcc.SessionID]*session

	// Lock order: fileState.mu, then filesMu. filesMu is innermost: held
	// only to read or change files and the opens counts, never across
	// store I/O, a commit, or the wait for another lock (a fileState.mu
	// is held through a whole commit, so waiting for one under filesMu
	// stalled every open and getattr behind a large file's commit). sessMu
	// and negMu are leaves too: no other of these locks is taken under
	// them.
	filesMu sync.Mutex
	files   map[fileKey]*fileState
	// drops counts fileStates removed from files: a read of an inode
	// with no fileState before or after it, and no drop between, saw
	// no dirty buffer (see Node.Lookup).
	drops    atomic.Uint64
	memBytes atomic.Int64 // RAM held by dirty pages of all buffers
	// fillBytes: RAM held by the nodes' page copies (pagefill.go).
	fillBytes atomic.Int64
	// pt: open files may be served by passthrough from staging files
	// in stageDir (stage.go); set once at mount.
	pt       bool
	ptWhy    string // why not, when asked for
	stageDir string
	// stagePool holds ready staging files, kept full by stageFiller
	// (stageKick: an open took one; fillDone: it has stopped).
	stagePool chan *os.File
	stageKick chan struct{}
	fillDone  chan struct{}

	kills sync.Map // requests that must clear setuid/setgid (killpriv.go)
	// afterRelease: what runs once go-fuse has finished a RELEASE
	// (stage.go), keyed by the request's cancel channel.
	afterRelease sync.Map
	// bg counts commits that went on without the killed caller they
	// were for (interrupt.go); shutdown waits for them.
	bg sync.WaitGroup
	// cancel: long operations a killed caller or Unmount stops (cancel.go).
	cancel cancelables

	negMu     sync.Mutex
	negs      map[negKey]negEntry // negative entries the kernel may hold
	negPrune  int                 // prune expired negs when len reaches this
	invalGens map[mvcc.SessionID]uint64

	log *slog.Logger // opts.Logger or the default

	// invalidations: sessions InvalidateSession queued for the one
	// goroutine that runs them (invalidator), which shutdown waits for.
	invalMu   sync.Mutex
	invalQ    []mvcc.SessionID
	invalWake chan struct{} // capacity 1
	invalDone chan struct{}

	stop     chan struct{}
	tickDone chan struct{}
	stopOnce sync.Once
}

// session is what nodes know of their session.
type session struct {
	id   mvcc.SessionID
	root mvcc.Ino
}

// Mount mounts st at mountpoint and starts serving it.
func Mount(st *mvcc.Store, mountpoint string, opts Options) (*Server, error) {
	if st == nil {
		return nil, errors.New("fs.Mount: nil store")
	}
	for name := range opts.Virtual {
		if err := mvcc.ValidName(name); err != nil || name[0] != '.' || name == ".asof" {
			return nil, fmt.Errorf("fs.Mount: virtual directory name %q must be a valid name starting with '.' other than .asof", name)
		}
	}
	m := &Server{
		st: st, sharedStore: st.Shared(), opts: opts, mountpoint: mountpoint, started: time.Now(),
		sessions:  map[mvcc.SessionID]*session{},
		files:     map[fileKey]*fileState{},
		negs:      map[negKey]negEntry{},
		invalGens: map[mvcc.SessionID]uint64{},
		stop:      make(chan struct{}),
		tickDone:  make(chan struct{}),
		log:       cmp.Or(opts.Logger, slog.Default()),
		invalWake: make(chan struct{}, 1),
		invalDone: make(chan struct{}),
	}
	var root gofs.InodeEmbedder
	rootAttr := &gofs.StableAttr{Mode: unix.S_IFDIR}
	switch {
	case opts.AsOf != nil && opts.Session == nil:
		return nil, errors.New("fs.Mount: AsOf needs Session")
	case opts.AsOf != nil:
		at := *opts.AsOf
		h, err := st.HeaderAt(*opts.Session, at)
		if err != nil {
			return nil, fmt.Errorf("mount %s as of %s: %w", mountpoint, at, err)
		}
		n := &Node{m: m, s: m.session(h), ino: h.Root, view: &view{name: at.String(), at: at, stable: at < st.LastHLC()}}
		root = n
		rootAttr.Ino = n.stableIno(h.Root)
	case opts.Session != nil:
		h, err := st.LiveHeader(*opts.Session)
		if err != nil {
			return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
		}
		root = &Node{m: m, s: m.session(h), ino: h.Root}
		rootAttr.Ino = uint64(h.Root)
	default:
		root = &sessionsRoot{m: m}
	}
	raw, mo := nodeFS(root, rootAttr, opts)
	server, err := fuse.NewServer(killRaw{RawFileSystem: raw, kills: &m.kills, after: &m.afterRelease}, mountpoint, mo)
	if err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	closeFUSEOnExec()
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, fmt.Errorf("mount %s: %w", mountpoint, err)
	}
	m.server = server
	m.root = root.EmbeddedInode()
	if err := m.initPassthrough(); err != nil {
		if uerr := server.Unmount(); uerr != nil {
			err = errors.Join(err, uerr)
		}
		return nil, err
	}
	go m.ticker()
	go m.invalidator()
	return m, nil
}

// fuseLogger is go-fuse's sink for its diagnostics (and, with Debug, its
// trace): the mount's log at Info. go-fuse tells of every reply it could
// not splice, which it then copies: a 1 MiB read (O_DIRECT, dd bs=1M)
// makes a 1 MiB + 16 byte reply, more than a pipe holds, one line per
// read; those go at Debug.
func fuseLogger(opts Options) *log.Logger {
	if opts.debugLog != nil {
		return opts.debugLog
	}
	return log.New(fuseLogWriter{cmp.Or(opts.Logger, slog.Default())}, "", 0)
}

type fuseLogWriter struct{ log *slog.Logger }

func (w fuseLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelInfo
	if strings.HasPrefix(msg, "trySplice:") {
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, msg, "component", "go-fuse")
	return len(p), nil
}

// nodeFS is the go-fuse file system of root, and its mount options.
func nodeFS(root gofs.InodeEmbedder, rootAttr *gofs.StableAttr, opts Options) (fuse.RawFileSystem, *fuse.MountOptions) {
	sec, neg := shortTimeout, liveTimeout
	mo := &fuse.MountOptions{
		DirectMount: true,
		FsName:      "padfs",
		Name:        "padfs",
		AllowOther:  opts.AllowOther,
		Debug:       opts.Debug,
		MaxWrite:    1 << 20,
		// HANDLE_KILLPRIV_V2: padfs clears setuid/setgid itself
		// (killpriv.go), which spares a GETXATTR before every write.
		ExtraCapabilities: fuse.CAP_ATOMIC_O_TRUNC | fuse.CAP_HANDLE_KILLPRIV_V2,
		Logger:            fuseLogger(opts),

		// EXPLICIT_INVAL_DATA: the kernel keeps a file's pages when
		// it sees its mtime or size change (it truncates past a new
		// size itself). Those changes are padfs's own commits of what
		// the kernel wrote, which its pages hold already; Open keeps
		// the pages only for the content they came from (keepCache)
		// and InvalidateSession drops them for changes made elsewhere.
		ExplicitDataCacheControl: true,
		// A symlink's target never changes (a new target is a new
		// inode); InvalidateSession drops it with the pages.
		EnableSymlinkCaching: true,
	}
	if opts.AllowOther {
		mo.Options = append(mo.Options, "default_permissions")
	}
	raw := gofs.NewNodeFS(root, &gofs.Options{
		MountOptions:    *mo,
		EntryTimeout:    &sec,
		AttrTimeout:     &sec,
		NegativeTimeout: &neg, // lookups opt out with noNegativeEntry
		NullPermissions: true, // chmod 000 must stay 000
		RootStableAttr:  rootAttr,
	})
	return raw, mo
}

// closeFUSEOnExec marks this process's /dev/fuse descriptors close-on-exec.
// go-fuse's direct mount (padfs as root) leaves its descriptor inheritable,
// so every program padfs (or a test) starts would hold the server's end of
// the mount: were padfs to die, the connection would live on in the child,
// and every process touching the mount (that child too) would wait for a
// reply forever instead of failing with ENOTCONN.
func closeFUSEOnExec() {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if t, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && t == "/dev/fuse" {
			unix.CloseOnExec(fd)
		}
	}
}

// Wait blocks until the file system is unmounted (by Unmount or from
// outside), then commits what is still dirty.
func (m *Server) Wait() {
	m.server.Wait()
	m.shutdown()
}

// Unmount commits every dirty buffer, then unmounts. It fails (and the
// mount keeps running) when the mountpoint is busy.
func (m *Server) Unmount() error {
	m.CancelRequests() // a long truncate or commit must not hold it up
	ferr := m.Flush()
	if err := m.server.Unmount(); err != nil {
		return errors.Join(ferr, fmt.Errorf("unmount %s: %w", m.mountpoint, err))
	}
	m.shutdown()
	return ferr
}

// shutdown stops the ticker and commits what is left; idempotent.
func (m *Server) shutdown() {
	m.stopOnce.Do(func() {
		close(m.stop)
		<-m.tickDone
		<-m.invalDone
		m.bg.Wait()
		if err := m.Flush(); err != nil {
			m.log.Error("padfs: commit at unmount", "mountpoint", m.mountpoint, "err", err)
		}
		m.closeStages()
	})
}

// Flush commits every dirty buffer now.
func (m *Server) Flush() error {
	var errs []error
	for _, f := range m.openFiles() {
		if err := m.commit(f); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ticker commits files held open and dirty.
func (m *Server) ticker() {
	defer close(m.tickDone)
	var c <-chan time.Time // nil with manualTicks: never fires
	if !m.opts.manualTicks {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		c = t.C
	}
	for {
		select {
		case <-m.stop:
			return
		case now := <-c:
			m.tick(now)
		}
	}
}

// tick commits the buffers due at now, and drops those left clean and
// handle-less.
func (m *Server) tick(now time.Time) {
	for _, f := range m.openFiles() {
		if f.due(now) {
			if err := m.commit(f); err != nil {
				m.log.Error("padfs: background commit", "session", f.key.sid, "ino", f.key.ino, "err", err)
			}
			m.dropIfIdle(f)
		}
	}
	m.tickStages()
	if err := m.st.FlushHeldOlder(quietFor); err != nil {
		m.log.Error("padfs: background commit of a created file", "err", err)
	}
}

// InvalidateSession drops the kernel's caches (entries, attributes and
// content) of every node of session sid, for changes made outside FUSE
// (fork, forget, redact). It returns at once: the work is done by another
// goroutine, so it is safe to call from anywhere, including inside a FUSE
// request or a store Watch callback. Invalidations run one at a time, in
// the order asked; one already queued for sid covers a second request.
func (m *Server) InvalidateSession(sid mvcc.SessionID) {
	m.invalMu.Lock()
	if !slices.Contains(m.invalQ, sid) {
		m.invalQ = append(m.invalQ, sid)
	}
	m.invalMu.Unlock()
	select {
	case m.invalWake <- struct{}{}:
	default:
	}
}

// invalidator runs the queued invalidations until shutdown; those still
// queued then have no kernel cache left to drop.
func (m *Server) invalidator() {
	defer close(m.invalDone)
	for {
		select {
		case <-m.stop:
			return
		case <-m.invalWake:
		}
		for {
			m.invalMu.Lock()
			if len(m.invalQ) == 0 {
				m.invalMu.Unlock()
				break
			}
			sid := m.invalQ[0]
			m.invalQ = m.invalQ[1:]
			m.invalMu.Unlock()
			m.invalidate(sid)
		}
	}
}

// InvalidateSessionWait is InvalidateSession that returns when the
// kernel's caches are dropped, so a command that changed the session
// (restore, undo, fork...) exits only once the mount shows the change. It
// must not be called from inside a FUSE request of this mount.
func (m *Server) InvalidateSessionWait(sid mvcc.SessionID) {
	m.invalidate(sid)
}

func (m *Server) invalidate(sid mvcc.SessionID) {
	// Names that did not exist may now: drop the negative entries first.
	for _, k := range m.takeNegatives(sid) {
		k.dir.NotifyEntry(k.name)
	}
	// Clean buffers re-read their base version; dirty ones keep theirs.
	for _, f := range m.openFiles() {
		if f.key.sid == sid {
			f.refresh()
		}
	}
	seen := map[*gofs.Inode]bool{}
	var walk func(in *gofs.Inode)
	walk = func(in *gofs.Inode) {
		if seen[in] {
			return
		}
		seen[in] = true
		if n, ok := in.Operations().(*Node); ok {
			n.kcache.Store(0)
			n.fill.clear(m)
		}
		if in.IsDir() {
			for name, ch := range in.Children() {
				in.NotifyEntry(name)
				walk(ch)
			}
		}
		in.NotifyContent(0, 0) // attributes and pages (a directory's: its listing)
	}
	if m.opts.Session != nil {
		if *m.opts.Session == sid {
			walk(m.root)
		}
	} else {
		for name, ch := range m.root.Children() {
			if n, ok := ch.Operations().(*Node); ok && n.s.id == sid {
				m.root.NotifyEntry(name)
				walk(ch)
			}
		}
		// A new session (fork, session new) may take over a name
		// another session's entry holds, and changes the root's
		// link count.
		h, err := m.st.Header(sid)
		if err == nil && h.Name != "" {
			m.root.NotifyEntry(h.Name)
		}
		// by-name/ entries are not cached past a tick, but a rename
		// must not show the old name even that long.
		if bn := m.root.GetChild(byNameDir); bn != nil {
			for name := range bn.Children() {
				bn.NotifyEntry(name)
			}
			if err == nil && h.Name != "" {
				bn.NotifyEntry(h.Name)
			}
		}
		m.root.NotifyContent(-1, 0)
	}
	for _, f := range m.openFiles() {
		if f.key.sid == sid && f.node != nil {
			f.node.kcache.Store(0)
			f.node.NotifyContent(0, 0)
		}
	}
}

// session returns the shared descriptor of a session.
func (m *Server) session(h *mvcc.SessionHeader) *session {
	m.sessMu.Lock()
	defer m.sessMu.Unlock()
	s := m.sessions[h.ID]
	if s == nil {
		s = &session{id: h.ID, root: h.Root}
		m.sessions[h.ID] = s
	}
	return s
}

// reserved reports whether name is hidden at session roots, and whether it
// currently resolves (EEXIST rather than EPERM on create).
func (m *Server) reserved(name string) (reserved, exists bool) {
	if name == ".asof" {
		return true, true
	}
	if _, ok := m.opts.Virtual[name]; ok {
		return true, true
	}
	for _, r := range reservedNames {
		if r == name {
			return true, false
		}
	}
	return false, false
}

// statfs reports the numbers of the file system holding the spill
// directory (normally the data directory).
func (m *Server) statfs(out *fuse.StatfsOut) unix.Errno {
	var s syscall.Statfs_t // go-fuse's FromStatfsT takes syscall's type
	dir := m.spillDir()
	if _, err := os.Stat(dir); err != nil {
		dir = os.TempDir()
	}
	if err := syscall.Statfs(dir, &s); err != nil {
		return m.toErrno(opStatfs, err)
	}
	out.FromStatfsT(&s)
	out.NameLen = mvcc.NameMax
	if out.Files == 0 {
		out.Files, out.Ffree = 1<<32, 1<<32
	}
	return 0
}

func (m *Server) spillDir() string {
	if m.opts.SpillDir != "" {
		return m.opts.SpillDir
	}
	return os.TempDir()
}

// callerIDs returns the uid and gid of the process behind a request.
func callerIDs(ctx context.Context) (uint32, uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return 0, 0
}
