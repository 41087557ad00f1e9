package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/padfs/padfs/internal/jsonbytes"
	"github.com/padfs/padfs/mvcc"
	"github.com/spf13/cobra"
)

func init() {
	addCommand(newSessionCmd)
	addSessionCommand(newSessionNewCmd)
	addSessionCommand(newSessionLsCmd)
	addSessionCommand(newSessionRenameCmd)
}

func newSessionRenameCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "rename ID NAME",
		Short: "Give a session a new name (unique among live sessions)",
		Long: `Rename a live session (ID is its id or current name). Names are unique
among live sessions: a name another live session has is refused, naming that
session. The rename is an event in the session's log (session.rename).`,
		Example: "  padfs session rename 01J9Z3... refactor-v2",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withApp(cmd, func(a *App) error {
				sid, err := sessionByIDOrName(a.Store, args[0])
				if err != nil {
					return err
				}
				if err := a.Store.RenameSession(sid, args[1]); err != nil {
					return fmt.Errorf("rename session %s: %w", sid, err)
				}
				a.Notify(sid)
				return nil
			})
		},
	}
}

// newSessionCmd is `padfs session`; its subcommands register with
// addSessionCommand.
func newSessionCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "session",
		Short: "Create, list, fork and forget sessions",
		Long: `A session is one versioned tree (one agent's scratchpad). Mount it with
padfs mount --session ID; mounting it again later resumes it.`,
	}
	for _, newCmd := range sessionCommands {
		c.AddCommand(newCmd())
	}
	return c
}

func newSessionNewCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "new [--name N] [--from DIR]",
		Short: "Create a session (empty, or a copy of a host directory) and print only its id",
		Long: `Create a session and print its id. With --from DIR the session starts as a
copy of host directory DIR: modes, owners, symlinks, hard links, user.*
xattrs, empty directories, times; the files are read and chunked on every
core and deduplicated against the store, and the whole tree is one commit
(event session.import), so nothing of it is visible before it is complete.`,
		Example: "  padfs mount --session $(padfs session new --name refactor) ~/pad\n  padfs session new --name src --from ~/src/project",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, _ := cmd.Flags().GetString("name")
			from, _ := cmd.Flags().GetString("from")
			tty, _ := cmd.Flags().GetBool(ttyFlag)
			if from != "" {
				forwardTerminal(cmd)
			}
			return withApp(cmd, func(a *App) error {
				if from != "" {
					return importTree(a, from, name, tty)
				}
				h, err := a.Store.CreateSession(name, a.Uid, a.Gid)
				if err != nil {
					return fmt.Errorf("create session: %w", err)
				}
				a.Notify(h.ID)
				_, err = fmt.Fprintln(a.Out, h.ID)
				return err
			})
		},
	}
	c.Flags().String("name", "", "a human-readable name (a valid file name; unique among live sessions)")
	c.Flags().String("from", "", "start as a copy of this host directory (one commit)")
	c.Flags().Bool(ttyFlag, false, "draw the progress bar (set for a running mount when stderr is a terminal)")
	_ = c.Flags().MarkHidden(ttyFlag)
	return c
}

// sessionRow is one line of `padfs session ls` (and one object of --json).
type sessionRow struct {
	ID        string `json:"id"`
	Name      string `json:"name,omitempty"`
	Created   string `json:"created"` // canonical HLC
	Files     int64  `json:"files"`   // non-directories in the latest tree (hard links once)
	Dirs      int64  `json:"dirs"`    // directories below the root
	Bytes     int64  `json:"bytes"`   // sum of regular file sizes
	Last      string `json:"last,omitempty"`
	Events    uint64 `json:"events"`
	Parent    string `json:"parent,omitempty"`
	ForkedAt  string `json:"forked_at,omitempty"`
	Forgotten string `json:"forgotten,omitempty"` // HLC of the forget
	NameB64   string `json:"name_b64,omitempty"`  // the name's bytes, if not UTF-8 (internal/jsonbytes)
}

func newSessionLsCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "ls [--json] [--all]",
		Short: "List sessions: id, name, created time, file count and bytes",
		Long: `List the sessions of the data directory, oldest first. Files and bytes are
counted in each session's latest tree. Forgotten sessions are hidden unless
--all is given. --json prints an array of objects with id, name, created
(HLC), files, dirs, bytes, last (HLC of the last commit), events, and for
forks parent and forked_at, for forgotten sessions forgotten.`,
		Example: "  padfs session ls\n  padfs session ls --json | jq -r '.[].id'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			all, _ := cmd.Flags().GetBool("all")
			return withApp(cmd, func(a *App) error {
				rows, err := listSessions(a.Store, all)
				if err != nil {
					return err
				}
				if asJSON {
					if rows == nil {
						rows = []sessionRow{}
					}
					b, err := json.MarshalIndent(rows, "", "  ")
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(a.Out, "%s\n", b)
					return err
				}
				if len(rows) == 0 {
					return nil
				}
				tw := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tNAME\tCREATED\tFILES\tBYTES")
				for _, r := range rows {
					name := r.Name
					if name == "" {
						name = "-"
					}
					if r.Forgotten != "" {
						name += " (forgotten)"
					}
					created := r.Created
					if h, err := mvcc.ParseHLC(r.Created); err == nil {
						created = h.Time().Format("2006-01-02 15:04:05Z")
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\n", r.ID, name, created, r.Files, r.Bytes)
				}
				return tw.Flush()
			})
		},
	}
	c.Flags().Bool("json", false, "print a JSON array of objects")
	c.Flags().Bool("all", false, "include forgotten sessions")
	return c
}

// listSessions lists the sessions with their latest tree's size.
func listSessions(st *mvcc.Store, all bool) ([]sessionRow, error) {
	infos, err := st.Sessions()
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	var rows []sessionRow
	for _, si := range infos {
		if si.Forgotten && !all {
			continue
		}
		r := sessionRow{ID: si.ID.String(), Name: si.Name, NameB64: jsonbytes.B64(si.Name),
			Created: si.Created.String(), Events: si.Events}
		if si.LastHLC != 0 {
			r.Last = si.LastHLC.String()
		}
		if si.Parent != nil {
			r.Parent, r.ForkedAt = si.Parent.String(), si.ForkedAt.String()
		}
		if si.Forgotten {
			r.Forgotten = si.ForgottenAt.String()
		}
		if err := st.View(func(t *mvcc.ReadTx) error {
			return countTree(t, si.ID, si.Root, &r)
		}); err != nil {
			return nil, fmt.Errorf("session %s: %w", si.ID, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// countTree walks the latest tree below root (one snapshot), counting each
// inode once.
func countTree(t *mvcc.ReadTx, sid mvcc.SessionID, root mvcc.Ino, r *sessionRow) error {
	seen := map[mvcc.Ino]bool{}
	stack := []mvcc.Ino{root}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		var ents []mvcc.Dentry
		if err := t.ReadDir(sid, dir, mvcc.Latest, func(d mvcc.Dentry) bool {
			ents = append(ents, d)
			return true
		}); err != nil {
			return err
		}
		for _, d := range ents {
			if seen[d.Ino] {
				continue
			}
			seen[d.Ino] = true
			n, err := t.Inode(sid, d.Ino, mvcc.Latest)
			if err != nil {
				return err
			}
			switch {
			case n.IsDir():
				r.Dirs++
				stack = append(stack, n.Ino)
			case n.IsRegular():
				r.Files++
				r.Bytes += int64(n.Size)
			default:
				r.Files++
			}
		}
	}
	return nil
}
