package main

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/padfs/padfs/internal/jsonbytes"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/session"
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
		Use:   "diff [--session ID] [-u] [--json] [--exclude GLOB]... FROM [TO] [-- PATH...]",
		Short: "Show what changed in a session between two points in time",
		Long: `Compare a session's tree as of FROM with its tree as of TO (default: now).
FROM and TO are each a sequence number of the log (the state right after
that event), an HLC, an RFC 3339 time, a checkpoint name or now: the points
log --since, restore --asof and undo accept.

PATH arguments after -- keep the changes at or below those paths (relative
to the session root, or paths inside a running mount). --exclude GLOB
(repeatable) drops the changes whose path, or one of its components or
leading directories, matches GLOB (path.Match syntax: *.o, build, src/gen).

Prints one line per changed path, sorted by path (directories end in '/'):
  A  path         added
  M  path         modified (content, symlink target, type or permissions)
  D  path         deleted
  R  old  new     renamed: the same inode (file or directory) under another
                  name, found by inode identity, not by similar content
Fields are tab-separated. Entries that moved along with a renamed directory
are listed only if they changed themselves.

-u prints a unified diff instead, as a git-style patch that git apply
applies in a copy of the FROM tree to give the TO tree: "diff --git", git's
mode/rename/index headers, "--- a/PATH", "+++ b/PATH" (/dev/null for added
or deleted files) and hunks with three lines of context, laid out as GNU
diff -u lays them out and changing as few lines as it does (where several
changes are equally short, the lines chosen may differ; the headers differ:
a/ and b/ prefixes instead of file names and times). Binary files (a NUL byte in the first
8000 bytes) are git binary patches (zlib and base85, both directions),
which git apply applies and patch(1) does not. What a patch cannot express
(empty directories, fifos, devices, permission bits beyond 755/644) is
named on stderr, one line each: "padfs: diff -u cannot express: ...".
--json prints a JSON array of {status, path, from, type}; a path that is
not valid UTF-8 also gets path_b64 (from_b64) with its bytes in base64.

Exit status: 0 changes shown, 1 no changes (as padfs grep; unlike diff(1)),
2 error.`,
		Example: `  padfs diff before-refactor
  padfs diff -u 2026-11-29T14:00:00Z 2026-11-29T15:00:00Z
  padfs diff --json before-refactor after-refactor | jq -r '.[] | select(.status=="A") | .path'`,
		Args: func(cmd *cobra.Command, args []string) error {
			if n := pointArgs(cmd, args); n < 1 || n > 2 {
				return fmt.Errorf("diff takes FROM and at most TO before --, got %d", n)
			}
			return nil
		},
		RunE: runDiff,
	}
	c.Flags().String("session", "", "session id or name (default: the session of the mount you are in)")
	c.Flags().BoolP("unified", "u", false, "print a git patch that git apply applies to the FROM tree (binary files as git binary patches)")
	c.Flags().Bool("json", false, "print a JSON array of changes")
	c.Flags().StringArray("exclude", nil, "leave out paths matching this glob (repeatable)")
	return c
}

func runDiff(cmd *cobra.Command, args []string) error {
	sess, _ := cmd.Flags().GetString("session")
	unified, _ := cmd.Flags().GetBool("unified")
	asJSON, _ := cmd.Flags().GetBool("json")
	excludes, _ := cmd.Flags().GetStringArray("exclude")
	if unified && asJSON {
		return fmt.Errorf("-u and --json cannot be combined")
	}
	for _, g := range excludes {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("--exclude %q: %w", g, err)
		}
	}
	points, paths := args[:pointArgs(cmd, args)], args[pointArgs(cmd, args):]
	return withApp(cmd, func(a *App) error {
		sid, err := pickSession(a, sess)
		if err != nil {
			return err
		}
		from, err := resolveAt(a, sid, "FROM", points[0])
		if err != nil {
			return err
		}
		toArg := "now"
		if len(points) == 2 {
			toArg = points[1]
		}
		to, err := resolveAt(a, sid, "TO", toArg)
		if err != nil {
			return err
		}
		var under []string
		for _, p := range paths {
			under = append(under, sessionPath(a, sid, p))
		}
		changes, err := a.Store.Diff(cmd.Context(), sid, from, to)
		if err != nil {
			return err
		}
		changes = filterChanges(changes, under, excludes)
		if err := printChanges(a, sid, to, changes, unified, asJSON); err != nil {
			return err
		}
		if len(changes) == 0 {
			return exitError{1}
		}
		return nil
	})
}

// printChanges prints changes as status lines, JSON or (unified) a git
// patch of the tree as of to.
func printChanges(a *App, sid mvcc.SessionID, to mvcc.HLC, changes []mvcc.Change, unified, asJSON bool) error {
	switch {
	case asJSON:
		rows := []diffRow{}
		for _, c := range changes {
			rows = append(rows, diffRow{Status: string(c.Status), Path: c.Path, From: c.From, Type: nodeType(c),
				PathB64: jsonbytes.B64(c.Path), FromB64: jsonbytes.B64(c.From)})
		}
		b, _ := json.MarshalIndent(rows, "", "  ")
		_, err := fmt.Fprintf(a.Out, "%s\n", b)
		return err
	case unified:
		lost, err := session.WriteUnified(a.Context(), a.Out, a.Store, sid, to, changes)
		if err != nil {
			return err
		}
		for _, l := range lost {
			fmt.Fprintf(a.Err, "padfs: diff -u cannot express: %s\n", l)
		}
		return nil
	}
	for _, c := range changes {
		if _, err := fmt.Fprintln(a.Out, session.StatusLine(c)); err != nil {
			return err
		}
	}
	return nil
}

// pointArgs is the number of arguments before "--" (all without one).
func pointArgs(cmd *cobra.Command, args []string) int {
	if n := cmd.ArgsLenAtDash(); n >= 0 {
		return n
	}
	return len(args)
}

// filterChanges keeps the changes at or below one of under (none: all) and
// drops those an exclude glob matches.
func filterChanges(cs []mvcc.Change, under, excludes []string) []mvcc.Change {
	var out []mvcc.Change
	for _, c := range cs {
		if len(under) > 0 && !underAny(c.Path, under) && (c.From == "" || !underAny(c.From, under)) {
			continue
		}
		if excluded(c.Path, excludes) || c.From != "" && excluded(c.From, excludes) {
			continue
		}
		out = append(out, c)
	}
	return out
}

func underAny(p string, roots []string) bool {
	for _, r := range roots {
		r = strings.Trim(path.Clean("/"+r), "/")
		if r == "" || p == r || strings.HasPrefix(p, r+"/") {
			return true
		}
	}
	return false
}

// excluded reports whether a glob matches p, one of its components, or one
// of its leading directories (so "build" drops build/x and "*.o" a/b.o).
func excluded(p string, globs []string) bool {
	for _, g := range globs {
		for i := 0; i <= len(p); i++ {
			if i < len(p) && p[i] != '/' {
				continue
			}
			if ok, _ := path.Match(g, p[:i]); ok {
				return true
			}
		}
		for _, c := range strings.Split(p, "/") {
			if ok, _ := path.Match(g, c); ok {
				return true
			}
		}
	}
	return false
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
