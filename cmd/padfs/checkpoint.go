package main

import (
	"encoding/json"
	"fmt"

	"github.com/padfs/padfs/mvcc"
	"github.com/spf13/cobra"
)

func init() { addCommand(newCheckpointCmd) }

// checkpointRow is one checkpoint in --json output.
type checkpointRow struct {
	Session string `json:"session"`
	Name    string `json:"name"`
	HLC     string `json:"hlc"`
}

func newCheckpointCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "checkpoint [--session ID] [--json] NAME | --list",
		Short: "Name the current state of a session (or list the names)",
		Long: `Name the session's current HLC: one commit (event session.checkpoint) whose
state the name stands for from then on. .asof/NAME/ in a mount shows it, ls
.asof/ lists the name beside the HLCs, and padfs diff, padfs log --since and
padfs session fork --asof accept it wherever they accept an HLC. Writes a
running mount still buffers are committed first, so the checkpoint includes
every write that returned. On a PostgreSQL store it works from any host,
also while another host has the session mounted read-write: it then names
what that mount has committed (every file closed or fsync'ed there).

Names are unique per session. A name must be a valid file name of at most
128 bytes (no '/', no control characters, no leading or trailing blanks, not
"." or ".."), and must not read as anything else: not an HLC or RFC 3339
time, not all digits (a log sequence number), not "latest" or "now".

Prints the HLC the name stands for. --list prints every checkpoint (NAME
HLC, oldest first; exit 1 when there are none).`,
		Example: `  padfs checkpoint --session 01J9Z3... before-refactor
  ls /mnt/pad/.asof/before-refactor/
  padfs diff before-refactor`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sess, _ := cmd.Flags().GetString("session")
			asJSON, _ := cmd.Flags().GetBool("json")
			list, _ := cmd.Flags().GetBool("list")
			if list == (len(args) == 1) {
				return fmt.Errorf("give a checkpoint NAME, or --list")
			}
			return withApp(cmd, func(a *App) error {
				sid, err := pickSession(a, sess)
				if err != nil {
					return err
				}
				if list {
					return listCheckpoints(a, sid, asJSON)
				}
				if err := a.FlushMount(); err != nil {
					return fmt.Errorf("commit the mount's open writes: %w", err)
				}
				at, err := a.Store.CreateCheckpoint(sid, args[0])
				if err != nil {
					return fmt.Errorf("checkpoint %q: %w", args[0], err)
				}
				a.Notify(sid)
				if asJSON {
					b, _ := json.Marshal(checkpointRow{sid.String(), args[0], at.String()})
					_, err = fmt.Fprintf(a.Out, "%s\n", b)
					return err
				}
				_, err = fmt.Fprintln(a.Out, at)
				return err
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the session of the mount you are in)")
	c.Flags().Bool("json", false, "machine-readable output")
	c.Flags().Bool("list", false, "list the session's checkpoints instead")
	return c
}

func listCheckpoints(a *App, sid mvcc.SessionID, asJSON bool) error {
	cps, err := a.Store.ListCheckpoints(sid)
	if err != nil {
		return err
	}
	if asJSON {
		rows := []checkpointRow{}
		for _, c := range cps {
			rows = append(rows, checkpointRow{sid.String(), c.Name, c.HLC.String()})
		}
		b, _ := json.MarshalIndent(rows, "", "  ")
		if _, err := fmt.Fprintf(a.Out, "%s\n", b); err != nil {
			return err
		}
	} else {
		for _, c := range cps {
			if _, err := fmt.Fprintf(a.Out, "%s %s\n", c.Name, c.HLC); err != nil {
				return err
			}
		}
	}
	if len(cps) == 0 {
		return exitError{1}
	}
	return nil
}
