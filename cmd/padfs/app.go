package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/padfs/padfs/mvcc"
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
	Store *mvcc.Store
	Out   io.Writer // command output (stdout, or the control socket)
	Err   io.Writer // diagnostics and progress (stderr, or the socket)
	// Changed is called after a command changed a session behind the
	// mount's back (fork, forget, redact...), so the mount can drop the
	// kernel's caches for it. Nil-safe: use a.Notify.
	Changed func(mvcc.SessionID)
}

// Notify tells a running mount that session sid changed outside FUSE.
func (a *App) Notify(sid mvcc.SessionID) {
	if a.Changed != nil {
		a.Changed(sid)
	}
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

// withApp runs fn against the store of the command's data directory.
// TODO(cli): when a mount of that directory is running, forward the command
// over its control socket instead of opening the (locked) store.
func withApp(cmd *cobra.Command, fn func(a *App) error) error {
	dir, err := dataDir(cmd)
	if err != nil {
		return err
	}
	st, err := mvcc.OpenDir(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	return fn(&App{Dir: dir, Store: st, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr()})
}
