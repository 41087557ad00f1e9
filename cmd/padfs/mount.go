package main

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/timetravel"
	"github.com/spf13/cobra"
)

func init() { addCommand(newMountCmd) }

// mountHook prepares a mount's process. Hooks run in registration order
// with the store open, before FUSE mounts: they may add to the fs options
// (e.g. a Virtual directory such as .grep/ or .log/) and start background
// work (e.g. an index following the store). stop, if not nil, runs after the
// unmount and before the store closes, in reverse order. A hook's error
// aborts the mount with that one-line message.
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
the root lists the live sessions as directories and mkdir there creates one.

Once mounted, padfs prints one line on stdout:
  padfs: mounted session ID at MOUNTPOINT (data DIR, pid N)
and serves the control socket DATA/padfs.sock, through which the other padfs
commands on the same data directory reach this process. Logs go to stderr.
SIGINT or SIGTERM commits dirty buffers and unmounts; if the mountpoint is
busy, a second signal detaches it lazily (umount -l) and a third one exits at
once (committed data is safe; the dead mount then needs umount -l).

With --store postgres://... (or $PADFS_STORE) a read-write mount takes the
lease of its session (without --session: of all sessions), so that one
process at a time writes it; another read-write mount of it, on any host,
fails naming the holder (pid, host, since). The lease is renewed every
--lease-ttl/3 and expires --lease-ttl (15s) after a crashed or paused holder
stopped renewing it; a holder that lost it can no longer commit (EIO).
--asof mounts take no lease.`,
		Example: "  padfs mount --session $(padfs session new) ~/pad\n  padfs mount --session refactor ~/pad\n  padfs mount --data /srv/pads --allow-other /mnt/pads",
		Args:    cobra.ExactArgs(1),
		RunE:    runMount,
	}
	c.Flags().String("session", "", "mount this session (id or name) at the root (default: all sessions as directories)")
	c.Flags().Bool("allow-other", false, "let other users in (file modes and ownership are enforced by the kernel)")
	c.Flags().Bool("debug", false, "debug logging (and go-fuse's request trace)")
	c.Flags().Duration("lease-ttl", 15*time.Second, "with --store postgres://...: how long after this process stops renewing (crash, pause) its read-write lease expires")
	c.Flags().String("asof", "", "with --session: mount that session read-only as of an HLC, RFC 3339 time or checkpoint (works for forgotten sessions too)")
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
	url := storeURL(cmd)
	st, err := openStore(dir, url)
	if errors.Is(err, kv.ErrLocked) {
		if info, qerr := queryMount(dir); qerr == nil {
			return fmt.Errorf("data directory %s is in use by another padfs (pid %d, mounted at %s)", dir, info.Pid, info.Mountpoint)
		}
		return fmt.Errorf("data directory %s is in use by another padfs process (store locked)", dir)
	}
	if err != nil {
		return err
	}
	closeStore := func() {
		if err := st.Close(); err != nil {
			log.Error("close store", "dir", dir, "err", err)
		}
	}
	what := "all sessions"
	var sid *mvcc.SessionID
	var asof *mvcc.HLC
	if sessionFlag != "" {
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
		if err != nil {
			closeStore()
			switch {
			case errors.Is(err, mvcc.ErrForgotten):
				return fmt.Errorf("cannot mount: %w", err)
			case errors.Is(err, mvcc.ErrNoSession):
				return fmt.Errorf("cannot mount: unknown session %q in %s (padfs session ls lists them)", sessionFlag, dir)
			default:
				return fmt.Errorf("cannot mount session %s: %w", sessionFlag, err)
			}
		}
		sid = &id
		what = "session " + sid.String()
		if asof != nil {
			what += " read-only as of " + asof.String()
		}
	}

	if asof == nil {
		// A shared store (PostgreSQL) admits one writer per session.
		ttl, _ := cmd.Flags().GetDuration("lease-ttl")
		release, err := storeopen.LeaseMount(st, sid, ttl)
		if err != nil {
			closeStore()
			return err
		}
		defer func() {
			if err := release(); err != nil {
				log.Warn("release lease", "err", err)
			}
		}()
	}

	opts := fs.Options{
		Session:    sid,
		AsOf:       asof,
		AllowOther: allowOther,
		Debug:      debug,
		Uid:        uint32(os.Getuid()),
		Gid:        uint32(os.Getgid()),
		SpillDir:   filepath.Join(dir, "spill"),
		Forget: func(id mvcc.SessionID) error {
			_, err := st.Forget(id)
			return err
		},
	}
	hookApp := &App{Dir: dir, URL: url, Store: st, In: os.Stdin, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(),
		Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	hookApp.Cwd, _ = os.Getwd()
	var stops []func()
	runStops := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	for _, h := range mountHooks {
		stop, err := h(hookApp, &opts)
		if err != nil {
			runStops()
			closeStore()
			return err
		}
		if stop != nil {
			stops = append(stops, stop)
		}
	}
	m, err := fs.Mount(st, mnt, opts)
	if err != nil {
		runStops()
		closeStore()
		return mountError(mnt, err)
	}
	hookApp.Changed, hookApp.Flush = m.InvalidateSession, m.Flush
	info := &MountInfo{Mountpoint: mnt, Pid: os.Getpid(), Data: dir}
	if sid != nil {
		info.Session = sid.String()
	}
	ctl, err := listenCtl(App{Dir: dir, URL: url, Store: st, Changed: m.InvalidateSession, Flush: m.Flush, Mount: info}, log)
	if err != nil {
		if uerr := m.Unmount(); uerr != nil {
			log.Error("unmount", "mountpoint", mnt, "err", uerr)
		}
		runStops()
		closeStore()
		return err
	}

	unregister, err := registerMount(mnt, dir)
	if err != nil {
		log.Warn("commands run inside the mount will need --data", "err", err)
	}
	defer unregister()

	sigc := make(chan os.Signal, 3)
	signal.Notify(sigc, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigc)
	done := make(chan struct{})
	go func() { m.Wait(); close(done) }()

	fmt.Fprintf(cmd.OutOrStdout(), "padfs: mounted %s at %s (data %s, pid %d)\n", what, mnt, dir, os.Getpid())
	log.Debug("mounted", "mountpoint", mnt, "session", info.Session, "data", dir)

	signals := 0
wait:
	for {
		select {
		case <-done:
			break wait
		case s := <-sigc:
			signals++
			switch signals {
			case 1:
				log.Info("unmounting", "signal", s.String(), "mountpoint", mnt)
				if err := m.Flush(); err != nil {
					log.Error("flush before unmount", "err", err)
				}
				if err := unmount(m, mnt); err != nil {
					log.Warn("cannot unmount yet: close the files open there and cd out of it, or signal again to detach lazily (umount -l)",
						"mountpoint", mnt, "err", err)
				}
			case 2:
				log.Info("detaching lazily (umount -l); exiting when the last open file is closed", "mountpoint", mnt)
				if err := syscall.Unmount(mnt, syscall.MNT_DETACH); err != nil {
					log.Error("lazy unmount", "mountpoint", mnt, "err", err)
				}
			default:
				log.Warn("exiting without waiting for the unmount; run umount -l on the mountpoint", "mountpoint", mnt)
				break wait
			}
		}
	}
	ctl.Close()
	ferr := m.Flush()
	if ferr != nil {
		log.Error("flush", "err", ferr)
	}
	runStops()
	cerr := st.Close()
	if cerr != nil {
		log.Error("close store", "dir", dir, "err", cerr)
	}
	log.Info("unmounted", "mountpoint", mnt)
	return errors.Join(ferr, cerr)
}

// unmount unmounts m. As root it calls umount(2) itself first, so that a
// busy mountpoint is reported as EBUSY (go-fuse would fall back to
// fusermount and report that instead); the mount's Wait then returns.
func unmount(m interface{ Unmount() error }, mnt string) error {
	if os.Geteuid() == 0 {
		err := syscall.Unmount(mnt, 0)
		if err == nil || errors.Is(err, syscall.EBUSY) {
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
	case errors.Is(err, syscall.ENOTCONN):
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
	case errors.Is(err, syscall.EPERM), errors.Is(err, syscall.EACCES):
		return fmt.Errorf("cannot mount %s: permission denied (run as root or install fuse3 for fusermount3): %s", mnt, msg)
	}
	return fmt.Errorf("cannot mount %s: %s", mnt, msg)
}
