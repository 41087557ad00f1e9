package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/spf13/cobra"
)

// App is what a command runs against: the open store of one data
// directory, plus (inside a running mount's process) the mount itself.
// A command written as withApp(cmd, fn) works the same with no mount
// running (it opens the store) and beside a running mount (the CLI
// forwards the command over the mount's control socket and fn runs inside
// the mount process, against the live store).
type App struct {
	Dir   string
	URL   string // the store URL (--store, $PADFS_STORE); "" = Dir's own store
	Store *mvcc.Store
	In    io.Reader // the caller's stdin (read on demand over the socket)
	Out   io.Writer // command output (stdout, or the control socket)
	Err   io.Writer // diagnostics and progress (stderr, or the socket)
	// Changed is called after a command changed a session behind the
	// mount's back (fork, forget, redact...), so the mount can drop the
	// kernel's caches for it. Nil-safe: use a.Notify.
	Changed func(mvcc.SessionID)

	// Cwd is the caller's working directory (the client's, when
	// forwarded): resolve relative path arguments with a.Abs.
	Cwd string
	// Uid and Gid are the caller's (from SO_PEERCRED when forwarded).
	Uid, Gid uint32
	// Mount describes the running mount when the command was forwarded to
	// it; nil when the command opened the store itself.
	Mount *MountInfo
	// Mounts lists every mount the running process serves (nil when the
	// command opened the store itself).
	Mounts func() []MountInfo
	// Flush commits the running mount's dirty write buffers (nil without a
	// mount; use a.FlushMount).
	Flush func() error
	// Log is the process's logger (a mount's honours --debug); nil:
	// slog.Default().
	Log *slog.Logger
	// Ctx is the command's context: cancelled when the client of a
	// forwarded command goes away (long work stops between its steps).
	Ctx context.Context
	// Finished lists the jobs finishJobs finished before the command ran,
	// by session.
	Finished map[mvcc.SessionID]string
}

// Context returns a.Ctx, or a background context.
func (a *App) Context() context.Context {
	if a.Ctx == nil {
		return context.Background()
	}
	return a.Ctx
}

// FlushMount commits the dirty buffers of the running mount, if any, so that
// every write(2) that returned is in the store.
func (a *App) FlushMount() error {
	if a.Flush == nil {
		return nil
	}
	return a.Flush()
}

// MountInfo describes a running mount (the control socket's "info" answer).
type MountInfo struct {
	Mountpoint string `json:"mountpoint"`
	Session    string `json:"session,omitempty"` // "" = all sessions at the root
	AsOf       string `json:"asof,omitempty"`    // set for a read-only mount of Session as of this HLC
	Pid        int    `json:"pid"`
	Data       string `json:"data"`
}

// Notify tells a running mount that session sid changed outside FUSE.
func (a *App) Notify(sid mvcc.SessionID) {
	if a.Changed != nil {
		a.Changed(sid)
	}
}

// Abs resolves p against the caller's working directory.
func (a *App) Abs(p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(a.Cwd, p)
}

// dataDir resolves --data, $PADFS_DATA, $XDG_DATA_HOME/padfs, ~/.local/share/padfs.
func dataDir(cmd *cobra.Command) (string, error) {
	if d, _ := cmd.Flags().GetString("data"); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("PADFS_DATA"); d != "" {
		return filepath.Abs(d)
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "padfs"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("no data directory: set --data or $PADFS_DATA (%v)", err)
	}
	return filepath.Join(home, ".local", "share", "padfs"), nil
}

// storeURL resolves --store, then $PADFS_STORE ("" = the data directory's
// own store).
func storeURL(cmd *cobra.Command) string {
	if u, _ := cmd.Flags().GetString("store"); u != "" {
		return u
	}
	return os.Getenv(storeopen.EnvStore)
}

// commandDataDir is dataDir for commands that reach a store: without
// --data or $PADFS_DATA, a command run inside a padfs mount uses that
// mount's data directory (see registry.go), else the default.
func commandDataDir(cmd *cobra.Command, cwd string) (string, error) {
	if d, _ := cmd.Flags().GetString("data"); d == "" && os.Getenv("PADFS_DATA") == "" && cwd != "" {
		if d, ok := mountDataDir(cwd); ok {
			return d, nil
		}
	}
	return dataDir(cmd)
}

// ctxKey keys the values execute and the control socket's server put in
// a command's context.
type ctxKey int

const (
	argvKey   ctxKey = iota // []string: the command line being executed
	servedKey               // *served: set when running inside a mount's process
)

// served is what a mount's process hands the commands it runs for clients.
type served struct {
	app App // Dir, Store, Changed, Mount, Cwd, Uid, Gid; Out/Err/In are per command
}

// forwarded is returned by withApp after the command ran in a mount's
// process: its output has been relayed and the process should exit with
// code. It is an error (even for 0) so that code after withApp does not run
// a second time in the client.
type forwarded struct{ code int }

func (f forwarded) Error() string { return fmt.Sprintf("exit status %d (forwarded)", f.code) }

// withApp runs fn against the store of the command's data directory
// (commandDataDir: --data, $PADFS_DATA, the mount the caller is in, the
// default):
//   - inside a mount's process (a forwarded command): against the live store;
//   - when a mount serves the data directory: it forwards the whole command
//     line (with the working directory, and stdin on demand) over the
//     mount's control socket, relays the output and returns forwarded{code};
//   - otherwise: it opens the store itself for the duration of fn.
//
// Return withApp's error from RunE unchanged (wrapping is fine): anything a
// command does after withApp returns nil runs only where fn ran.
func withApp(cmd *cobra.Command, fn func(a *App) error) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if s, ok := ctx.Value(servedKey).(*served); ok {
		a := s.app
		a.In, a.Out, a.Err = cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
		a.Ctx = ctx
		finishJobs(ctx, &a) // one a client left cut short, say
		return fn(&a)
	}
	cwd, _ := os.Getwd()
	dir, err := commandDataDir(cmd, cwd)
	if err != nil {
		return err
	}
	argv, ok := ctx.Value(argvKey).([]string)
	if !ok {
		argv = os.Args[1:]
	}
	if code, ok, err := forward(ctx, dir, argv, cwd, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()); ok {
		if err != nil {
			return err
		}
		return forwarded{code}
	}
	url := storeURL(cmd)
	st, err := openStore(dir, url)
	if errors.Is(err, kv.ErrLocked) {
		// A mount may be starting up (store open, socket not yet listening):
		// give it a moment before reporting the lock.
		for i := 0; i < 20 && errors.Is(err, kv.ErrLocked); i++ {
			time.Sleep(100 * time.Millisecond)
			if code, ok, ferr := forward(ctx, dir, argv, cwd, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()); ok {
				if ferr != nil {
					return ferr
				}
				return forwarded{code}
			}
			st, err = openStore(dir, url)
		}
	}
	if err != nil {
		return err
	}
	defer st.Close()
	a := &App{Dir: dir, URL: url, Store: st, In: cmd.InOrStdin(), Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(),
		Cwd: cwd, Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid()), Ctx: ctx}
	finishJobs(ctx, a)
	return fn(a)
}

// openStore opens the store of data directory dir (the PostgreSQL one at
// url, if set), creating the directory (mode 0700) if needed, with errors
// that say what to do.
func openStore(dir, url string) (*mvcc.Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	st, err := storeopen.Open(dir, url)
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, kv.ErrLocked):
		return nil, fmt.Errorf("data directory %s is in use by another padfs process (%w) and no control socket answers at %s",
			dir, kv.ErrLocked, socketPath(dir))
	case url != "":
		return nil, fmt.Errorf("open store %s: %w", storeopen.Redact(url), err)
	default:
		return nil, fmt.Errorf("open store in %s: %w", dir, err)
	}
}

// oneLine folds a multi-line message into one line.
func oneLine(s string) string {
	var parts []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " ")
}
