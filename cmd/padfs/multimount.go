package main

// Several mounts of one data directory.
//
// One process owns a data directory's store (bbolt locks it), its search
// index and its control socket: the first `padfs mount`. A later `padfs
// mount` of the same data directory finds it through the socket and asks
// it, with op "mount", to serve one more FUSE mount on the same store; it
// then stays in the foreground holding the request's connection open for
// the life of that mount:
//
//	client -> server   'Q' {"op":"mount", "mount":{session, asof, mountpoint, allow_other, debug}, "cwd":...}
//	                   'S' end the mount (sent on each SIGINT/SIGTERM: 1st unmount, 2nd detach lazily)
//	server -> client   'E' the mount's log lines and errors (one line: "padfs: cannot mount ...")
//	                   'J' MountInfo once mounted: the client prints its "padfs: mounted" line
//	                   'X' exit code, once the mount ended (2 when it never started; 75
//	                       before 'J': the process is exiting, mount without it)
//
// When the connection closes (the client was killed), the server ends the
// mount as a first signal would, and detaches it lazily if it is busy.
//
// Each mount is its own fs.Server with its own dirty buffers and kernel
// caches. Two writable mounts of one session would hold two buffers of one
// inode, each invisible to the other mount until committed, so they are
// refused: a session is mounted read-write once (an all-sessions mount
// counts as a read-write mount of every session); read-only --asof mounts
// of it are always allowed (their view of the past never changes). The
// CLI's commands through the socket invalidate and flush every mount.

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/internal/jsonbytes"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/timetravel"
	"golang.org/x/sys/unix"
)

// frameEnd (client -> server, op "mount") asks to end the mount.
const frameEnd = 'S'

// exitRetry is the exit code of op "mount" from a process that is exiting
// (its last mount just ended): the client then mounts as the first padfs
// once that process has released the store.
const exitRetry = 75 // EX_TEMPFAIL

var errExiting = errors.New("cannot mount: the padfs process serving the data directory is exiting")

// mountRequest is what `padfs mount` asks for, in the 'Q' frame's "mount"
// field when it goes to a running process. Paths and names are bytes:
// the _b64 fields carry those that are not valid UTF-8.
type mountRequest struct {
	Session       string `json:"session,omitempty"`
	AsOf          string `json:"asof,omitempty"`
	Mountpoint    string `json:"mountpoint"`
	AllowOther    bool   `json:"allow_other,omitempty"`
	Debug         bool   `json:"debug,omitempty"`
	Passthrough   string `json:"passthrough,omitempty"` // off (empty), auto, on
	SessionB64    string `json:"session_b64,omitempty"`
	MountpointB64 string `json:"mountpoint_b64,omitempty"`
}

func (r mountRequest) encode() *mountRequest {
	r.SessionB64, r.MountpointB64 = jsonbytes.B64(r.Session), jsonbytes.B64(r.Mountpoint)
	return &r
}

func (r *mountRequest) decode() error {
	var err error
	if r.Session, err = jsonbytes.Decode(r.Session, r.SessionB64); err != nil {
		return fmt.Errorf("control socket: bad mount request: session_b64: %w", err)
	}
	if r.Mountpoint, err = jsonbytes.Decode(r.Mountpoint, r.MountpointB64); err != nil {
		return fmt.Errorf("control socket: bad mount request: mountpoint_b64: %w", err)
	}
	r.SessionB64, r.MountpointB64 = "", ""
	return nil
}

// mountWhat is the "session ID" part of the "padfs: mounted" line.
func mountWhat(info *MountInfo) string {
	switch {
	case info.Session == "":
		return "all sessions"
	case info.AsOf != "":
		return "session " + info.Session + " read-only as of " + info.AsOf
	default:
		return "session " + info.Session
	}
}

// mountTarget resolves --session and --asof in st: the session (nil: all
// sessions) and the HLC of a read-only mount (nil: read-write).
func mountTarget(st *mvcc.Store, dir, sessionFlag, asofFlag string) (*mvcc.SessionID, *mvcc.HLC, error) {
	if sessionFlag == "" {
		if asofFlag != "" {
			return nil, nil, errors.New("--asof needs --session")
		}
		return nil, nil, nil
	}
	var asof *mvcc.HLC
	id, err := sessionByIDOrName(st, sessionFlag)
	if err == nil && asofFlag == "" {
		_, err = st.LiveHeader(id)
	} else if err == nil {
		var at mvcc.HLC
		if at, err = timetravel.Resolve(st, id, asofFlag); err == nil {
			_, err = st.HeaderAt(id, at)
			asof = &at
		}
	}
	switch {
	case err == nil:
		return &id, asof, nil
	case errors.Is(err, mvcc.ErrForgotten):
		return nil, nil, fmt.Errorf("cannot mount: %w", err)
	case errors.Is(err, mvcc.ErrNoSession):
		return nil, nil, fmt.Errorf("cannot mount: unknown session %q in %s (padfs session ls lists them)", sessionFlag, dir)
	default:
		return nil, nil, fmt.Errorf("cannot mount session %s: %w", sessionFlag, err)
	}
}

// mountSet is the FUSE mounts one process serves on its store.
type mountSet struct {
	st   *mvcc.Store
	dir  string
	base fs.Options // what the mount hooks set up (Virtual, Forget, SpillDir)
	log  *slog.Logger

	// leaseTTL is the lease time of read-write mounts of a shared store
	// (PostgreSQL; 0: the default).
	leaseTTL time.Duration

	mountMu sync.Mutex // serializes mounting: check, then mount
	mu      sync.Mutex
	mounts  []*servedMount
	changed chan struct{} // closed (and replaced) when a mount ends
	closing bool          // the process is exiting: no new mounts
}

// servedMount is one mount of a mountSet.
type servedMount struct {
	srv  *fs.Server
	info MountInfo
	sid  *mvcc.SessionID
	ro   bool
	log  *slog.Logger
	done chan struct{} // closed once unmounted and committed
	err  error         // of the final commit; read after done
}

func newMountSet(st *mvcc.Store, dir string, base fs.Options, log *slog.Logger) *mountSet {
	return &mountSet{st: st, dir: dir, base: base, log: log, changed: make(chan struct{})}
}

// mount resolves req and serves it as a further mount of the store, for
// the user uid/gid. Its errors are one line, as `padfs mount` prints them.
func (s *mountSet) mount(req mountRequest, uid, gid uint32, log *slog.Logger) (*servedMount, error) {
	mnt, err := checkMountpoint(req.Mountpoint)
	if err != nil {
		return nil, err
	}
	sid, asof, err := mountTarget(s.st, s.dir, req.Session, req.AsOf)
	if err != nil {
		return nil, err
	}
	s.mountMu.Lock()
	defer s.mountMu.Unlock()
	for {
		ending, err := s.admit(sid, asof != nil)
		if err != nil {
			return nil, err
		}
		if ending == nil {
			break
		}
		// The conflicting mount is unmounted and commits what it
		// buffered: wait for that (a remount right after a kill -9 of
		// its client), but not for one detached lazily that still
		// serves open files.
		s.mountMu.Unlock()
		select {
		case <-ending.done:
		case <-time.After(5 * time.Second):
		}
		s.mountMu.Lock()
		select {
		case <-ending.done:
		default:
			return nil, fmt.Errorf("cannot mount: %s is in use: still served (detached from %s, with files open there) by padfs pid %d; close them first",
				mountWhat(&ending.info), ending.info.Mountpoint, os.Getpid())
		}
	}
	opts := s.base
	opts.Session, opts.AsOf = sid, asof
	opts.AllowOther, opts.Debug = req.AllowOther, req.Debug
	if opts.Passthrough, err = fs.ParsePassthrough(cmp.Or(req.Passthrough, "off")); err != nil {
		return nil, err
	}
	opts.Uid, opts.Gid = uid, gid
	// On a shared store (PostgreSQL) the session's writer is one process
	// on any host: its lease, held until the mount committed its last
	// buffers.
	release := func() error { return nil }
	if asof == nil {
		if release, err = storeopen.LeaseMount(s.st, sid, s.leaseTTL); err != nil {
			return nil, err
		}
	}
	srv, err := fs.Mount(s.st, mnt, opts)
	if err != nil {
		if rerr := release(); rerr != nil {
			log.Warn("release lease", "err", rerr)
		}
		return nil, mountError(mnt, err)
	}
	sm := &servedMount{srv: srv, sid: sid, ro: asof != nil, log: log, done: make(chan struct{}),
		info: MountInfo{Mountpoint: mnt, Pid: os.Getpid(), Data: s.dir}}
	if sid != nil {
		sm.info.Session = sid.String()
	}
	if asof != nil {
		sm.info.AsOf = asof.String()
	}
	s.mu.Lock()
	s.mounts = append(s.mounts, sm)
	s.mu.Unlock()
	go func() {
		srv.Wait() // unmounted (by us or from outside); commits what is left
		sm.err = srv.Flush()
		if err := release(); err != nil {
			log.Warn("release lease", "mountpoint", mnt, "err", err)
		}
		s.remove(sm)
		close(sm.done)
	}()
	return sm, nil
}

// admit refuses a second writable mount of a session (see the top of the
// file); it also refuses everything once the process is exiting. A
// conflicting mount whose mountpoint is gone already is ending: admit
// returns it to be waited for.
func (s *mountSet) admit(sid *mvcc.SessionID, readOnly bool) (ending *servedMount, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return nil, errExiting
	}
	if readOnly {
		return nil, nil
	}
	for _, o := range s.mounts {
		if o.ro || (sid != nil && o.sid != nil && *o.sid != *sid) {
			continue
		}
		if _, mounted := mountedAt(o.info.Mountpoint); !mounted {
			return o, nil
		}
		what := "session " + o.info.Session + " is in use: mounted"
		if o.sid == nil {
			what = "every session is in use: all sessions are mounted"
		} else if sid == nil {
			what = "session " + o.info.Session + " (one of all sessions) is in use: mounted"
		}
		return nil, fmt.Errorf("cannot mount: %s read-write at %s (padfs pid %d); a session has one writable mount at a time: mount it read-only with --asof, or unmount %s first",
			what, o.info.Mountpoint, os.Getpid(), o.info.Mountpoint)
	}
	return nil, nil
}

func (s *mountSet) remove(sm *servedMount) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, o := range s.mounts {
		if o == sm {
			s.mounts = append(s.mounts[:i], s.mounts[i+1:]...)
			break
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// running returns the mounts served now, and a channel closed when one ends.
func (s *mountSet) running() ([]*servedMount, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*servedMount(nil), s.mounts...), s.changed
}

// closeIfIdle marks the set closing when no mount is left (true); else it
// returns a channel closed when one ends.
func (s *mountSet) closeIfIdle() (bool, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mounts) == 0 {
		s.closing = true
		return true, nil
	}
	return false, s.changed
}

// invalidateWait drops every mount's kernel caches of session sid and
// returns when they are dropped (for commands from the control socket).
func (s *mountSet) invalidateWait(sid mvcc.SessionID) {
	ms, _ := s.running()
	for _, m := range ms {
		m.srv.InvalidateSessionWait(sid)
	}
}

// invalidate is invalidateWait that returns at once (safe inside a FUSE
// request).
func (s *mountSet) invalidate(sid mvcc.SessionID) {
	ms, _ := s.running()
	for _, m := range ms {
		m.srv.InvalidateSession(sid)
	}
}

// flush commits the dirty buffers of every mount.
func (s *mountSet) flush() error {
	ms, _ := s.running()
	var errs []error
	for _, m := range ms {
		errs = append(errs, m.srv.Flush())
	}
	return errors.Join(errs...)
}

// infoFor describes the mount a command from cwd runs in: the innermost
// mount holding cwd, else fallback while it runs, else any running mount.
func (s *mountSet) infoFor(cwd string, fallback *MountInfo) *MountInfo {
	ms, _ := s.running()
	var best, own *MountInfo
	for _, m := range ms {
		if _, in := under(m.info.Mountpoint, cwd); in && (best == nil || len(m.info.Mountpoint) > len(best.Mountpoint)) {
			best = &m.info
		}
		if fallback != nil && m.info.Mountpoint == fallback.Mountpoint {
			own = &m.info
		}
	}
	switch {
	case best != nil:
		return best
	case own != nil:
		return own
	case len(ms) > 0:
		return &ms[0].info
	}
	return fallback
}

// end carries out the signal-th request to end sm: 1 commits and
// unmounts (saying so when the mountpoint is busy), 2 detaches lazily.
func (sm *servedMount) end(signal int, why string) {
	select {
	case <-sm.done:
		return // already unmounted
	default:
	}
	mnt := sm.info.Mountpoint
	switch signal {
	case 1:
		sm.log.Info("unmounting", "why", why, "mountpoint", mnt)
		sm.srv.CancelRequests() // a long truncate or commit must not hold up the flush
		if err := sm.srv.Flush(); err != nil {
			sm.log.Error("flush before unmount", "err", err)
		}
		if err := unmount(sm.srv, mnt); err != nil {
			sm.log.Warn("cannot unmount yet: close the files open there and cd out of it, or signal again to detach lazily (umount -l)",
				"mountpoint", mnt, "err", err)
		}
	case 2:
		sm.log.Info("detaching lazily (umount -l); exiting when the last open file is closed", "mountpoint", mnt)
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			sm.log.Error("lazy unmount", "mountpoint", mnt, "err", err)
		}
	}
}

// serveMount answers op "mount": it mounts, reports, and holds the
// connection until the mount ends.
func (s *ctlServer) serveMount(c *net.UnixConn, fc *frameConn, req ctlRequest, cred *unix.Ucred) error {
	fail := func(err error) error {
		fmt.Fprintln(stream{fc, frameStderr}, "padfs:", oneLine(err.Error()))
		return fc.send(frameExitCode, u32(2))
	}
	if s.mounts == nil {
		return fail(errors.New("this padfs process serves no mounts"))
	}
	if req.Mount == nil {
		return fail(errors.New("control socket: mount request without \"mount\""))
	}
	mreq := *req.Mount
	if err := mreq.decode(); err != nil {
		return fail(err)
	}
	level := slog.LevelInfo
	if mreq.Debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stream{fc, frameStderr}, &slog.HandlerOptions{Level: level}))
	sm, err := s.mounts.mount(mreq, cred.Uid, cred.Gid, log)
	if errors.Is(err, errExiting) {
		return fc.send(frameExitCode, u32(exitRetry))
	}
	if err != nil {
		return fail(err)
	}
	s.log.Info("serving a further mount", "mountpoint", sm.info.Mountpoint, "session", sm.info.Session, "asof", sm.info.AsOf, "client_pid", cred.Pid)
	b, _ := json.Marshal(encodeMountInfo(&sm.info))
	if err := fc.send(frameInfo, b); err != nil {
		sm.end(1, "client gone")
	}
	go func() { // 'S' frames end the mount; so does the client's going away
		n := 0
		for {
			typ, _, err := readFrame(c)
			if err != nil {
				select {
				case <-sm.done:
				default:
					s.log.Info("the client of a mount went away: unmounting", "mountpoint", sm.info.Mountpoint)
					sm.end(1, "client gone")
					select {
					case <-sm.done:
					default:
						sm.end(2, "client gone")
					}
				}
				return
			}
			if typ == frameEnd {
				n++
				sm.end(n, "signal")
			}
		}
	}()
	select {
	case <-sm.done:
	case <-s.ctx.Done(): // the process exits at once (a third signal)
		return errors.New("control socket closed")
	}
	s.log.Info("unmounted", "mountpoint", sm.info.Mountpoint)
	log.Info("unmounted", "mountpoint", sm.info.Mountpoint)
	if sm.err != nil {
		log.Error("commit at unmount", "err", sm.err)
		return fc.send(frameExitCode, u32(2))
	}
	return fc.send(frameExitCode, u32(0))
}

// mountThrough asks the process that serves dir (if any: ok false when no
// control socket answers) to serve req, and stays in the foreground until
// that mount ends: SIGINT/SIGTERM ask it to end. It returns the exit code.
func mountThrough(dir string, req mountRequest, out, errw io.Writer) (code int, ok bool) {
	c, err := dialCtl(dir)
	if err != nil {
		return 0, false
	}
	defer c.Close()
	sigc := make(chan os.Signal, 3)
	signal.Notify(sigc, unix.SIGINT, unix.SIGTERM)
	defer signal.Stop(sigc)
	fc := &frameConn{c: c}
	q := ctlRequest{V: ctlVersion, Op: "mount", Mount: req.encode()}
	q.Cwd, _ = os.Getwd()
	q.CwdB64 = jsonbytes.B64(q.Cwd)
	b, _ := json.Marshal(q)
	if err := fc.send(frameRequest, b); err != nil {
		return 0, false // the socket accepted and died: treat as absent
	}
	type frame struct {
		typ byte
		p   []byte
		err error
	}
	frames := make(chan frame)
	quit := make(chan struct{})
	defer close(quit)
	go func() {
		for {
			typ, p, err := readFrame(c)
			select {
			case frames <- frame{typ, p, err}:
			case <-quit:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	unregister := func() {}
	defer func() { unregister() }()
	var info MountInfo
	signals := 0
	for {
		select {
		case <-sigc:
			signals++
			if signals >= 3 {
				fmt.Fprintf(errw, "padfs: exiting without waiting for the unmount of %s (the padfs process pid %d still serves it until it is unmounted)\n", info.Mountpoint, info.Pid)
				return 0, true
			}
			fc.send(frameEnd, nil)
		case f := <-frames:
			if f.err != nil {
				fmt.Fprintf(errw, "padfs: lost the connection to the padfs process serving %s (%v); if %s is still mounted, it needs umount -l\n", dir, f.err, info.Mountpoint)
				return 2, true
			}
			switch f.typ {
			case frameStdout:
				out.Write(f.p)
			case frameStderr:
				errw.Write(f.p)
			case frameInfo:
				if info, err = decodeMountInfo(f.p); err != nil {
					fmt.Fprintln(errw, "padfs:", err)
					return 2, true
				}
				if unregister, err = registerMount(info.Mountpoint, dir); err != nil {
					fmt.Fprintln(errw, "padfs: commands run inside the mount will need --data:", err)
				}
				fmt.Fprintf(out, "padfs: mounted %s at %s (data %s, pid %d)\n", mountWhat(&info), info.Mountpoint, dir, os.Getpid())
			case frameExitCode:
				if len(f.p) != 4 {
					fmt.Fprintln(errw, "padfs: control socket: malformed exit frame")
					return 2, true
				}
				code := int(binary.BigEndian.Uint32(f.p))
				if code == exitRetry && info.Mountpoint == "" {
					return 0, false // that process is exiting: mount without it
				}
				return code, true
			}
		}
	}
}
