package main

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func init() { addCommand(newMountCmd) }

// mountHook prepares a mount's process. Hooks run in registration order
// with the store open, before FUSE mounts: they may add to the fs options
// (e.g. a Virtual directory such as .grep/ or .log/) and start background
// work (e.g. an index following the store). stop, if not nil, runs after the
// unmount and before the store closes, in reverse order. A hook's error
// aborts the mount with that one-line message. Hooks run once per process:
// the options they set up serve every mount the process serves
// (multimount.go), with Session, AsOf, AllowOther, Debug, Uid and Gid set
// per mount.
type mountHook func(a *App, o *fs.Options) (stop func(), err error)

var mountHooks []mountHook

// addMountHook registers a mount hook (call it from init).
func addMountHook(h mountHook) { mountHooks = append(mountHooks, h) }

func newMountCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "mount [--data DIR] [--session ID [--asof T]] [--allow-other] [--debug] MOUNTPOINT",
		Short: "Mount a session (or all sessions) in the foreground until SIGINT/SIGTERM",
		Long: `Mount the store of the data directory at MOUNTPOINT and serve it in the
foreground. With --session, the mount root is that session's tree; without it,
the root lists the live sessions as directories named by id, and by-name/
holds a symlink NAME -> ../ID per named session; mkdir NAME there creates a
session, rmdir (or rm -rf) of a session directory soft-forgets it.

Once mounted, padfs prints one line on stdout:
  padfs: mounted session ID at MOUNTPOINT (data DIR, pid N)
and serves the control socket DATA/padfs.sock, through which the other padfs
commands on the same data directory reach this process. Logs go to stderr.
SIGINT or SIGTERM commits dirty buffers and unmounts; if the mountpoint is
busy, a second signal detaches it lazily (umount -l) and a third one exits at
once (committed data is safe; the dead mount then needs umount -l).

While a padfs mount of the data directory runs, a further padfs mount (of
another session, or of a session read-only --asof) is served by that running
process; the new command stays in the foreground, and its SIGINT/SIGTERM (or
its death, or umount) ends its mount only. A session is mounted read-write
once at a time (a mount of all sessions counts for every session). The first
process exits once its own mount and every further one have ended; signals
after its own mount ended end the others.

With --store postgres://... (or $PADFS_STORE) a read-write mount also takes
the lease of its session (without --session: of all sessions), so that one
process at a time writes it; another read-write mount of it, on any host,
fails naming the holder (pid, host, since). The lease is renewed every
--lease-ttl/3 and expires --lease-ttl (15s) after a crashed or paused holder
stopped renewing it; a holder that lost it can no longer commit (EIO).
--asof mounts take no lease. Further mounts served by a running process use
its --lease-ttl.`,
		Example: "  padfs mount --session $(padfs session new) ~/pad\n  padfs mount --session refactor ~/pad\n  padfs mount --data /srv/pads --allow-other /mnt/pads",
		Args:    cobra.ExactArgs(1),
		RunE:    runMount,
	}
	c.Flags().String("session", "", "mount this session (id or name) at the root (default: all sessions as directories)")
	c.Flags().Bool("allow-other", false, "let other users in (file modes and ownership are enforced by the kernel)")
	c.Flags().Bool("debug", false, "debug logging (and go-fuse's request trace)")
	c.Flags().String("passthrough", "off", "serve files open for writing from staging files the kernel reads and writes itself (FUSE passthrough): off, auto (when the kernel allows it) or on (fail without it)")
	c.Flags().Duration("lease-ttl", 15*time.Second, "with --store postgres://...: how long after this process stops renewing (crash, pause) its read-write lease expires")
	c.Flags().String("asof", "", "with --session: mount that session read-only as of an HLC, RFC 3339 time or checkpoint (works for forgotten sessions too)")
	// For profiling the real binary (the index worker has its own:
	// $PADFS_INDEX_CPUPROFILE); not part of the interface.
	c.Flags().String("cpuprofile", "", "write a CPU profile of the mount's process to this file")
	c.Flags().String("memprofile", "", "write a heap profile of the mount's process to this file at exit")
	c.Flags().MarkHidden("cpuprofile")
	c.Flags().MarkHidden("memprofile")
	return c
}

func runMount(cmd *cobra.Command, args []string) error {
	if _, ok := cmd.Context().Value(servedKey).(*served); ok {
		return errors.New("mount cannot run through the control socket of another mount")
	}
	sessionFlag, _ := cmd.Flags().GetString("session")
	asofFlag, _ := cmd.Flags().GetString("asof")
	if asofFlag != "" && sessionFlag == "" {
		return errors.New("--asof needs --session")
	}
	allowOther, _ := cmd.Flags().GetBool("allow-other")
	debug, _ := cmd.Flags().GetBool("debug")
	passthrough, _ := cmd.Flags().GetString("passthrough")
	if _, err := fs.ParsePassthrough(passthrough); err != nil {
		return err
	}
	if p, _ := cmd.Flags().GetString("cpuprofile"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return fmt.Errorf("cpu profile %s: %w", p, err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	if p, _ := cmd.Flags().GetString("memprofile"); p != "" {
		defer func() {
			if f, err := os.Create(p); err == nil {
				pprof.Lookup("heap").WriteTo(f, 0)
				f.Close()
			}
		}()
	}
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	slog.SetDefault(log) // the fs and mvcc layers log through slog's default

	mnt, err := checkMountpoint(args[0])
	if err != nil {
		return err
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return fmt.Errorf("cannot mount %s: no /dev/fuse (load the fuse kernel module, or give the container --device /dev/fuse)", mnt)
	}
	dir, err := dataDir(cmd)
	if err != nil {
		return err
	}
	req := mountRequest{Session: sessionFlag, AsOf: asofFlag, Mountpoint: mnt, AllowOther: allowOther, Debug: debug, Passthrough: passthrough}
	// A padfs process serving dir already: it serves this mount too.
	if code, ok := mountThrough(dir, req, cmd.OutOrStdout(), cmd.ErrOrStderr()); ok {
		return exitCode(code)
	}
	st, err := openStore(dir, storeURL(cmd))
	// One may be starting up (store open, socket not yet listening).
	for i := 0; i < 50 && errors.Is(err, kv.ErrLocked); i++ {
		time.Sleep(100 * time.Millisecond)
		if code, ok := mountThrough(dir, req, cmd.OutOrStdout(), cmd.ErrOrStderr()); ok {
			return exitCode(code)
		}
		st, err = openStore(dir, storeURL(cmd))
	}
	if errors.Is(err, kv.ErrLocked) {
		return fmt.Errorf("data directory %s is in use by another padfs process (store locked) that serves no control socket", dir)
	}
	if err != nil {
		return err
	}
	finishJobs(cmd.Context(), &App{Dir: dir, URL: storeURL(cmd), Store: st, In: os.Stdin, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(),
		Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), Ctx: cmd.Context()})
	return serveStore(cmd, log, st, dir, req)
}

// exitCode is the error runMount returns for a mount served by another
// process: its messages are printed already.
func exitCode(code int) error {
	if code == 0 {
		return nil
	}
	return exitError{code}
}

// serveStore is `padfs mount` in the process that owns the store: it runs
// the mount hooks, mounts req, serves the control socket (and through it
// the further mounts other `padfs mount` commands ask for), and returns
// once its own mount and every further one have ended.
func serveStore(cmd *cobra.Command, log *slog.Logger, st *mvcc.Store, dir string, req mountRequest) error {
	tuneGC()
	// What was set up is undone in reverse on every return: the hooks'
	// stops, then the store.
	var undo cleanups
	defer undo.run()
	var cerr error
	undo.push(func() {
		if cerr = st.Close(); cerr != nil {
			log.Error("close store", "dir", dir, "err", cerr)
		}
	})
	// Refuse an unknown session before the hooks start the index.
	if _, _, err := mountTarget(st, dir, req.Session, req.AsOf); err != nil {
		return err
	}
	// Staging files of an earlier process hold nothing acknowledged
	// (fs/stage.go); this process owns the data directory now.
	os.RemoveAll(filepath.Join(dir, "stage"))
	opts := mountOptions(st, dir, log)
	url := storeURL(cmd)
	hookApp := &App{Dir: dir, URL: url, Store: st, In: os.Stdin, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(),
		Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), Log: log}
	hookApp.Cwd, _ = os.Getwd()
	for _, h := range mountHooks {
		stop, err := h(hookApp, &opts)
		if err != nil {
			return err
		}
		if stop != nil {
			undo.push(stop)
		}
	}
	set := newMountSet(st, dir, opts, log)
	set.leaseTTL, _ = cmd.Flags().GetDuration("lease-ttl")
	own, err := set.mount(req, uint32(os.Getuid()), uint32(os.Getgid()), log)
	if err != nil {
		return err
	}
	mnt := own.info.Mountpoint
	hookApp.Changed, hookApp.Flush = set.invalidate, set.flush
	// Commands from the control socket run outside any FUSE request, so
	// they may wait for the invalidation: the mounts show their change
	// once they exit. (The .grep/ hook above runs inside one: not there.)
	ctl, err := listenCtlMounts(App{Dir: dir, URL: url, Store: st, Changed: set.invalidateWait, Flush: set.flush, Mount: &own.info}, set, log)
	if err != nil {
		if uerr := own.srv.Unmount(); uerr != nil {
			log.Error("unmount", "mountpoint", mnt, "err", uerr)
		} else {
			<-own.done
		}
		return err
	}

	unregister, err := registerMount(mnt, dir)
	if err != nil {
		log.Warn("commands run inside the mount will need --data", "err", err)
	}
	defer unregister()

	sigc := make(chan os.Signal, 3)
	signal.Notify(sigc, unix.SIGINT, unix.SIGTERM)
	defer signal.Stop(sigc)

	fmt.Fprintf(cmd.OutOrStdout(), "padfs: mounted %s at %s (data %s, pid %d)\n", mountWhat(&own.info), mnt, dir, os.Getpid())
	log.Debug("mounted", "mountpoint", mnt, "session", own.info.Session, "data", dir)

	now := waitOwn(own, sigc, log, mnt)
	if !now {
		log.Info("unmounted", "mountpoint", mnt)
		now = waitOthers(set, sigc, log)
	}
	ctl.Close()
	ferr := errors.Join(own.err, set.flush())
	if ferr != nil {
		log.Error("flush", "err", ferr)
	}
	undo.run() // sets cerr
	if !now {
		log.Info("every mount of the data directory ended; exiting", "data", dir)
	}
	return errors.Join(ferr, cerr)
}

// mountOptions are the fs options of this process's mounts of st.
func mountOptions(st *mvcc.Store, dir string, log *slog.Logger) fs.Options {
	return fs.Options{
		Logger:   log,
		Uid:      uint32(os.Getuid()),
		Gid:      uint32(os.Getgid()),
		SpillDir: filepath.Join(dir, "spill"),
		StageDir: filepath.Join(dir, "stage"),
		Forget: func(id mvcc.SessionID) error {
			_, err := st.Forget(id)
			return err
		},
	}
}

// waitOwn waits until this process's own mount ends; the first two
// signals end it (unmount, then a lazy detach), the third gives up
// waiting (true: exit at once).
func waitOwn(own *servedMount, sigc <-chan os.Signal, log *slog.Logger, mnt string) bool {
	signals := 0
	for {
		select {
		case <-own.done:
			return false
		case s := <-sigc:
			signals++
			if signals >= 3 {
				log.Warn("exiting without waiting for the unmount; run umount -l on the mountpoint", "mountpoint", mnt)
				return true
			}
			own.end(signals, s.String())
		}
	}
}

// waitOthers keeps the process (store, index, control socket) serving
// the further mounts of set until they end. Signals end them: the first
// unmounts each, the second detaches them lazily, the third gives up
// (true: exit without waiting).
func waitOthers(set *mountSet, sigc <-chan os.Signal, log *slog.Logger) bool {
	signals := 0
	for said := false; ; said = true {
		idle, changed := set.closeIfIdle()
		if idle {
			return false
		}
		if !said {
			ms, _ := set.running()
			mnts := make([]string, len(ms))
			for i, m := range ms {
				mnts[i] = m.info.Mountpoint
			}
			log.Info("still serving the other mounts of this data directory; exiting when they end (signal again to end them)", "mountpoints", mnts)
		}
		select {
		case <-changed:
		case s := <-sigc:
			signals++
			if signals >= 3 {
				log.Warn("exiting without waiting for the other mounts; run umount -l on their mountpoints")
				return true
			}
			ms, _ := set.running()
			for _, m := range ms {
				m.end(signals, s.String())
			}
		}
	}
}

// unmount unmounts m. As root it calls umount(2) itself first, so that a
// busy mountpoint is reported as EBUSY (go-fuse would fall back to
// fusermount and report that instead); the mount's Wait then returns.
func unmount(m interface{ Unmount() error }, mnt string) error {
	if os.Geteuid() == 0 {
		err := unix.Unmount(mnt, 0)
		if err == nil || errors.Is(err, unix.EBUSY) {
			if err != nil {
				return fmt.Errorf("unmount %s: %w", mnt, err)
			}
			return nil
		}
	}
	return m.Unmount()
}

// checkMountpoint returns the absolute mountpoint, or a one-line reason it
// cannot be mounted on: missing, not a directory, or already a mount.
func checkMountpoint(arg string) (string, error) {
	mnt, err := filepath.Abs(arg)
	if err != nil {
		return "", fmt.Errorf("mountpoint %s: %w", arg, err)
	}
	fi, err := os.Stat(mnt)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("cannot mount: mountpoint %s does not exist (mkdir -p it first)", mnt)
	case errors.Is(err, unix.ENOTCONN):
		return "", fmt.Errorf("cannot mount: mountpoint %s is a dead FUSE mount (umount -l %s first)", mnt, mnt)
	case err != nil:
		return "", fmt.Errorf("cannot mount: mountpoint %s: %v", mnt, errors.Unwrap(err))
	case !fi.IsDir():
		return "", fmt.Errorf("cannot mount: mountpoint %s is not a directory", mnt)
	}
	// The kernel records the resolved path: compare and register that.
	if mnt, err = filepath.EvalSymlinks(mnt); err != nil {
		return "", fmt.Errorf("cannot mount: mountpoint %s: %w", arg, err)
	}
	if fstype, ok := mountedAt(mnt); ok {
		return "", fmt.Errorf("cannot mount: mountpoint %s is busy: already a %s mount (unmount it first)", mnt, fstype)
	}
	return mnt, nil
}

// mountedAt reports whether path is a mount point, and its fs type, from
// /proc/self/mountinfo.
func mountedAt(path string) (string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent major:minor root mountpoint opts... - fstype source superopts
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMountinfo(fields[4]) != path {
			continue
		}
		fstype := "?"
		for i, f := range fields {
			if f == "-" && i+1 < len(fields) {
				fstype = fields[i+1]
			}
		}
		return fstype, true
	}
	return "", false
}

// unescapeMountinfo undoes the kernel's octal escapes (\040 for space...).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range s[i+1 : i+4] {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + byte(c-'0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountError turns a failed mount into one line with the likely fix.
func mountError(mnt string, err error) error {
	msg := oneLine(err.Error())
	switch {
	case strings.Contains(msg, "fusermount") && os.Geteuid() != 0:
		return fmt.Errorf("cannot mount %s: not root and no working fusermount3 (install the fuse3 package): %s", mnt, msg)
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return fmt.Errorf("cannot mount %s: permission denied (run as root or install fuse3 for fusermount3): %s", mnt, msg)
	}
	return fmt.Errorf("cannot mount %s: %s", mnt, msg)
}

// cleanups are undo steps, run last pushed first. run pops each before
// calling it, so a second run (a deferred one after an explicit one) does
// nothing.
type cleanups []func()

func (c *cleanups) push(f func()) { *c = append(*c, f) }

func (c *cleanups) run() {
	for len(*c) > 0 {
		f := (*c)[len(*c)-1]
		*c = (*c)[:len(*c)-1]
		f()
	}
}
