package main

import (
	"fmt"
	"io"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/session"
	"github.com/spf13/cobra"
)

func init() { addCommand(newRestoreCmd) }

func newRestoreCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "restore [--session ID] --asof T [--dry-run] [PATH...]",
		Short: "Put files back as they were at T, as one new commit",
		Long: `Bring the named files and directories (default: the whole tree) back to
their state as of T, as ONE new commit (event "restore"): what was created
after T is removed, what was deleted comes back with its mode, owner, times,
symlink target, hard links and xattrs, and changed files get their old
content. Nothing is rewritten: the restore is itself in the history, so a
later restore (or padfs undo) can undo it. No file bytes are copied: the
restored versions share their content with the old ones.

T is anything padfs diff accepts: a log sequence number (the state right
after that event), an HLC, an RFC 3339 time, a checkpoint name, or now.
PATH is relative to the session root, or a path inside a running mount.
Beside a running mount the restore runs in the mount's process and the
mount shows the result at once (its buffered writes are committed first, so
they stay in the history before the restore).

Prints what changed, as padfs diff does from the current state to T: A
(comes back), M (modified), D (removed), R (renamed back). --dry-run prints
the same and changes nothing.

Exit status: 0 restored (or, with --dry-run, something would change), 1
nothing differs from T (nothing committed), 2 error.`,
		Example: `  t=$(padfs now); make clean; padfs restore --asof $t
  padfs restore --asof before-refactor src/parser.go docs/
  padfs restore --dry-run --asof 2026-11-29T14:00:00Z`,
		RunE: func(cmd *cobra.Command, args []string) error {
			sess, _ := cmd.Flags().GetString("session")
			asof, _ := cmd.Flags().GetString("asof")
			dry, _ := cmd.Flags().GetBool("dry-run")
			if asof == "" {
				return fmt.Errorf("restore needs --asof T (an HLC, RFC 3339 time, checkpoint name or sequence number)")
			}
			return withApp(cmd, func(a *App) error {
				sid, err := pickSession(a, sess)
				if err != nil {
					return err
				}
				at, err := resolveAt(a, sid, "--asof", asof)
				if err != nil {
					return err
				}
				var paths []string
				for _, p := range args {
					paths = append(paths, sessionPath(a, sid, p))
				}
				return runRestore(a, sid, at, paths, dry)
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the session of the mount you are in)")
	c.Flags().String("asof", "", "the point in time to go back to (HLC, RFC 3339 time, checkpoint, sequence number, now)")
	c.Flags().Bool("dry-run", false, "print what would change and change nothing")
	return c
}

// runRestore restores paths of sid as of at (see mvcc.Store.Restore),
// tells the mount, and prints the changes; exit 1 when nothing differs.
func runRestore(a *App, sid mvcc.SessionID, at mvcc.HLC, paths []string, dry bool) error {
	// What the mount still buffers belongs to the history before the
	// restore (and would otherwise be written over the restored files).
	if err := a.FlushMount(); err != nil {
		return fmt.Errorf("commit the mount's open writes: %w", err)
	}
	res, err := a.Store.Restore(a.Context(), sid, at, mvcc.RestoreOptions{Paths: paths, DryRun: dry})
	if err != nil {
		return fmt.Errorf("restore as of %s: %w", at, err)
	}
	if res.HLC != 0 {
		a.Notify(sid)
	}
	if err := writeChanges(a.Out, res.Changes); err != nil {
		return err
	}
	if !res.Changed {
		return exitError{1}
	}
	return nil
}

func writeChanges(w io.Writer, cs []mvcc.Change) error {
	for _, c := range cs {
		if _, err := fmt.Fprintln(w, session.StatusLine(c)); err != nil {
			return err
		}
	}
	return nil
}
