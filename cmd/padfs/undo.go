package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/padfs/padfs/mvcc"
	"github.com/spf13/cobra"
)

func init() { addCommand(newUndoCmd) }

func newUndoCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "undo [--session ID] [--dry-run] [N | CHECKPOINT | T]",
		Short: "Put the tree back as it was before the last N commits (or at a checkpoint)",
		Long: `Restore the whole tree of the session to its state before its last N
commits (default 1), or as of a checkpoint (or any point padfs restore
--asof accepts but a bare number, which counts commits), as ONE new commit:
padfs restore --asof of the whole tree. Commits are the log's tree changes;
session events (create, fork, checkpoint, forget, redact) are not counted.
An undo is a commit too, so undo after undo redoes.

Prints the reverted events ("reverted: SEQ HLC OP PATH ...", oldest first),
then the changes as padfs restore does (A/M/D/R lines). --dry-run prints
the same ("would revert: ...") and changes nothing.

Exit status: 0 undone, 1 nothing differs (nothing committed), 2 error.`,
		Example: `  padfs undo
  padfs undo 3
  padfs undo before-refactor`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sess, _ := cmd.Flags().GetString("session")
			dry, _ := cmd.Flags().GetBool("dry-run")
			arg := "1"
			if len(args) == 1 {
				arg = args[0]
			}
			return withApp(cmd, func(a *App) error {
				sid, err := pickSession(a, sess)
				if err != nil {
					return err
				}
				if err := a.FlushMount(); err != nil {
					return fmt.Errorf("commit the mount's open writes: %w", err)
				}
				evs, err := a.Store.Log(sid, mvcc.LogFilter{})
				if err != nil {
					return err
				}
				at, reverted, err := undoTarget(a, sid, evs, arg)
				if err != nil {
					return err
				}
				verb := "reverted"
				if dry {
					verb = "would revert"
				}
				for _, ev := range reverted {
					fmt.Fprintf(a.Out, "%s: ", verb)
					if err := writeEventLine(a.Out, ev); err != nil {
						return err
					}
				}
				return runRestore(a, sid, at, nil, dry)
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the session of the mount you are in)")
	c.Flags().Bool("dry-run", false, "print what would be reverted and change nothing")
	return c
}

// treeEvent reports whether an event changed the tree (session events do
// not).
func treeEvent(ev mvcc.Event) bool { return !ev.Op.Session() }

// undoTarget returns the point to restore to and the tree events after it:
// N counts the last N tree commits; anything else is a point in time.
func undoTarget(a *App, sid mvcc.SessionID, evs []mvcc.Event, arg string) (mvcc.HLC, []mvcc.Event, error) {
	var tree []mvcc.Event
	for _, ev := range evs {
		if treeEvent(ev) {
			tree = append(tree, ev)
		}
	}
	if strings.Trim(arg, "0123456789") == "" {
		n, err := strconv.ParseUint(arg, 10, 64)
		switch {
		case err != nil || n == 0:
			return 0, nil, fmt.Errorf("undo %s: give a number of commits from 1 to %d, or a checkpoint", arg, len(tree))
		case n > uint64(len(tree)):
			return 0, nil, fmt.Errorf("undo %d: session %s has only %d commits to undo", n, sid, len(tree))
		}
		first := tree[len(tree)-int(n)]
		// The state right before it: as of the event before it (the
		// session's first event, its creation, is never a tree commit).
		var at mvcc.HLC
		for _, ev := range evs {
			if ev.Seq == first.Seq-1 {
				at = ev.HLC
			}
		}
		if at == 0 {
			return 0, nil, fmt.Errorf("undo %d: no event before %d in session %s", n, first.Seq, sid)
		}
		return at, tree[len(tree)-int(n):], nil
	}
	at, err := resolveAt(a, sid, "undo", arg)
	if err != nil {
		return 0, nil, err
	}
	var after []mvcc.Event
	for _, ev := range tree {
		if ev.HLC > at {
			after = append(after, ev)
		}
	}
	return at, after, nil
}
