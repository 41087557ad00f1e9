package main

import (
	"encoding/json"
	"fmt"

	"github.com/padfs/padfs/internal/jsonbytes"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/timetravel"
	"github.com/spf13/cobra"
)

func init() { addSessionCommand(newForkCmd) }

// forkRow is the --json output of padfs session fork.
type forkRow struct {
	ID       string `json:"id"`
	Name     string `json:"name,omitempty"`
	Parent   string `json:"parent"`
	ForkedAt string `json:"forked_at"`
	Created  string `json:"created"`
	NameB64  string `json:"name_b64,omitempty"` // internal/jsonbytes
}

func newForkCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fork SRC [--asof T] [--name N] [--id ULID] [--json]",
		Short: "Create a new session from another session's tree, and print its id",
		Long: `Create a new session whose tree is SRC's tree as of T (default: now) and
print only its id. SRC is a session id or name; T an HLC, RFC 3339 time or
checkpoint name of SRC. The new session's header records SRC as its parent
and the HLC it was forked from (padfs session ls shows both); its log starts
with one session.fork event. SRC is not touched.

Only metadata is copied: the new session gets its own inode numbers (hard
links stay hard links), and shares every content chunk with SRC, so forking a
1 GB session copies no file bytes. The history before T is not copied: the new
session's .asof/ starts at the fork (SRC's keeps it).

--id forks into a given (new) ULID; an id that exists already is refused.
A forgotten SRC can be forked as of a time before it was forgotten.`,
		Example: `  padfs session fork 01J9Z3... --name try-b
  padfs mount --session $(padfs session fork main --asof before-refactor) ~/pad-b`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			asof, _ := cmd.Flags().GetString("asof")
			name, _ := cmd.Flags().GetString("name")
			idFlag, _ := cmd.Flags().GetString("id")
			asJSON, _ := cmd.Flags().GetBool("json")
			return withApp(cmd, func(a *App) error {
				src, err := sessionByIDOrName(a.Store, args[0])
				if err != nil {
					return err
				}
				opt := mvcc.ForkOptions{Name: name}
				if idFlag != "" {
					if opt.ID, err = mvcc.ParseSessionID(idFlag); err != nil {
						return fmt.Errorf("--id: %w", err)
					}
				}
				at := mvcc.Latest
				if asof != "" {
					if at, err = timetravel.Resolve(a.Store, src, asof); err != nil {
						return fmt.Errorf("--asof: %w", err)
					}
				} else if err := a.FlushMount(); err != nil {
					return fmt.Errorf("commit the mount's open writes: %w", err)
				}
				h, err := a.Store.Fork(cmd.Context(), src, at, opt)
				if err != nil {
					return fmt.Errorf("fork %s: %w", src, err)
				}
				a.Notify(h.ID)
				if asJSON {
					b, _ := json.Marshal(forkRow{ID: h.ID.String(), Name: h.Name, Parent: src.String(),
						ForkedAt: h.ForkedAt.String(), Created: h.Created.String(), NameB64: jsonbytes.B64(h.Name)})
					_, err = fmt.Fprintf(a.Out, "%s\n", b)
					return err
				}
				_, err = fmt.Fprintln(a.Out, h.ID)
				return err
			})
		},
	}
	c.Flags().String("asof", "", "fork SRC's state as of this HLC, RFC 3339 time or checkpoint (default: now)")
	c.Flags().String("name", "", "name of the new session")
	c.Flags().String("id", "", "id (ULID) of the new session (default: a fresh one)")
	c.Flags().Bool("json", false, "print {id, name, parent, forked_at, created}")
	return c
}
