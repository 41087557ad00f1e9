package main

import (
	"encoding/json"
	"fmt"

	"github.com/padfs/padfs/internal/jsonbytes"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/session"
	"github.com/padfs/padfs/timetravel"
	"github.com/spf13/cobra"
)

func init() { addCommand(newDiffCmd) }

// diffRow is one change in --json output.
type diffRow struct {
	Status string `json:"status"` // A, M, D or R
	Path   string `json:"path"`
	From   string `json:"from,omitempty"` // the older path, when it differs
	Type   string `json:"type"`           // file, dir, symlink, other
	// Paths are bytes: see internal/jsonbytes.
	PathB64 string `json:"path_b64,omitempty"`
	FromB64 string `json:"from_b64,omitempty"`
}

func newDiffCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "diff [--session ID] [-u] [--json] FROM [TO]",
		Short: "Show what changed in a session between two points in time",
		Long: `Compare a session's tree as of FROM with its tree as of TO (default: now).
FROM and TO are each an HLC, an RFC 3339 time or a checkpoint name.

Prints one line per changed path, sorted by path (directories end in '/'):
  A  path         added
  M  path         modified (content, symlink target, type or permissions)
  D  path         deleted
  R  old  new     renamed: the same inode (file or directory) under another
                  name, found by inode identity, not by similar content
Fields are tab-separated. Entries that moved along with a renamed directory
are listed only if they changed themselves.

-u prints a unified diff instead, as a git-style patch (git apply or
patch -p1 apply it): "diff --git", git's mode/rename headers, "--- a/PATH",
"+++ b/PATH" (/dev/null for added or deleted files) and hunks with three
lines of context, equal to GNU diff -u's hunks for the same two files (the
headers differ: a/ and b/ prefixes instead of file names and times). Binary
files (a NUL byte in the first 8000 bytes) are named, not dumped.
--json prints a JSON array of {status, path, from, type}; a path that is
not valid UTF-8 also gets path_b64 (from_b64) with its bytes in base64.

Exit status: 0 changes shown, 1 no changes (as padfs grep; unlike diff(1)),
2 error.`,
		Example: `  padfs diff before-refactor
  padfs diff -u 2026-11-29T14:00:00Z 2026-11-29T15:00:00Z
  padfs diff --json before-refactor after-refactor | jq -r '.[] | select(.status=="A") | .path'`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			sess, _ := cmd.Flags().GetString("session")
			unified, _ := cmd.Flags().GetBool("unified")
			asJSON, _ := cmd.Flags().GetBool("json")
			if unified && asJSON {
				return fmt.Errorf("-u and --json cannot be combined")
			}
			return withApp(cmd, func(a *App) error {
				sid, err := pickSession(a, sess)
				if err != nil {
					return err
				}
				from, err := resolvePoint(a.Store, sid, "FROM", args[0])
				if err != nil {
					return err
				}
				var to mvcc.HLC
				if len(args) == 2 {
					if to, err = resolvePoint(a.Store, sid, "TO", args[1]); err != nil {
						return err
					}
				} else {
					if err := a.FlushMount(); err != nil {
						return fmt.Errorf("commit the mount's open writes: %w", err)
					}
					if to, err = a.Store.Now(); err != nil {
						return err
					}
				}
				changes, err := a.Store.Diff(sid, from, to)
				if err != nil {
					return err
				}
				switch {
				case asJSON:
					rows := []diffRow{}
					for _, c := range changes {
						rows = append(rows, diffRow{Status: string(c.Status), Path: c.Path, From: c.From, Type: nodeType(c),
							PathB64: jsonbytes.B64(c.Path), FromB64: jsonbytes.B64(c.From)})
					}
					b, _ := json.MarshalIndent(rows, "", "  ")
					if _, err := fmt.Fprintf(a.Out, "%s\n", b); err != nil {
						return err
					}
				case unified:
					if err := session.WriteUnified(a.Out, a.Store, changes); err != nil {
						return err
					}
				default:
					for _, c := range changes {
						if _, err := fmt.Fprintln(a.Out, session.StatusLine(c)); err != nil {
							return err
						}
					}
				}
				if len(changes) == 0 {
					return exitError{1}
				}
				return nil
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the session of the mount you are in)")
	c.Flags().BoolP("unified", "u", false, "print a unified diff (git-style patch) of text files")
	c.Flags().Bool("json", false, "print a JSON array of changes")
	return c
}

// resolvePoint resolves an HLC, RFC 3339 time or checkpoint name.
func resolvePoint(st *mvcc.Store, sid mvcc.SessionID, what, s string) (mvcc.HLC, error) {
	at, err := timetravel.Resolve(st, sid, s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return at, nil
}

func nodeType(c mvcc.Change) string {
	n := c.New
	if n == nil {
		n = c.Old
	}
	switch {
	case n.IsDir():
		return "dir"
	case n.IsRegular():
		return "file"
	case n.IsSymlink():
		return "symlink"
	}
	return "other"
}
