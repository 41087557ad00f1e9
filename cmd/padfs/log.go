package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"context"
	"github.com/padfs/padfs/fs"
	"github.com/padfs/padfs/mvcc"
	"github.com/spf13/cobra"
)

func init() {
	addCommand(newLogCmd)
	addMountHook(logMountHook)
}

// The mount's event log: every session root has a hidden .log/ directory
// (beside .asof/) holding events.jsonl, the session's whole log as JSON
// lines (one event per line, oldest first, as padfs log --json prints it),
// regenerated at every open, so `tail .log/events.jsonl` and `jq` work.
// .log/N (N a sequence number) and .log/T (an HLC, RFC 3339 time or
// checkpoint name) hold the events after N or T only (exclusive, as
// padfs log --since).
const logFileName = "events.jsonl"

func logMountHook(a *App, o *fs.Options) (func(), error) {
	if o.Virtual == nil {
		o.Virtual = map[string]fs.VirtualDir{}
	}
	st := a.Store
	o.Virtual[".log"] = fs.VirtualDir{
		List: func(mvcc.SessionID) ([]string, error) { return []string{logFileName}, nil },
		Open: func(_ context.Context, sid mvcc.SessionID, name string) ([]byte, error) {
			if name == logFileName {
				return st.LogJSONL(sid)
			}
			f, err := sinceFilter(st, sid, name)
			if err != nil {
				return nil, fmt.Errorf("%w: .log/%s: %v", mvcc.ErrNotFound, name, err)
			}
			var b strings.Builder
			err = st.EachEvent(sid, f, func(ev mvcc.Event) bool {
				b.Write(ev.JSON())
				b.WriteByte('\n')
				return true
			})
			return []byte(b.String()), err
		},
	}
	return nil, nil
}

// sinceFilter parses a --since value with the shared resolver (when.go):
// a sequence number keeps the events after it, any other point the events
// with a later HLC. Both exclusive.
func sinceFilter(st *mvcc.Store, sid mvcc.SessionID, since string) (mvcc.LogFilter, error) {
	if since == "" {
		return mvcc.LogFilter{}, nil
	}
	w, err := resolveWhen(st, sid, "--since", since, nil)
	if err != nil {
		return mvcc.LogFilter{}, err
	}
	if w.IsSeq {
		return mvcc.LogFilter{AfterSeq: w.Seq}, nil
	}
	return mvcc.LogFilter{AfterHLC: w.At}, nil
}

func newLogCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "log [--session ID] [--since SEQ|HLC|TIME|CHECKPOINT|now] [--json] [PATH]",
		Short: "Print a session's event log, oldest first",
		Long: `Print the event log of a session, oldest first: one event per commit, with
its per-session sequence number (no gaps), HLC, operation, path(s), and for
content changes the size and SHA-256. Session-level events are logged too:
session.create, session.fork, session.checkpoint, session.rename,
session.forget, session.redact. A padfs restore (or undo) is one event,
"restore PATH (as of T)".

--since skips everything up to and including the given point (exclusive): a
sequence number, or an HLC / RFC 3339 time / checkpoint name / now (the
points in time diff, restore and undo accept too). PATH keeps the
events that name PATH or a path below it (relative to the session root, or a
path inside a running mount). --json prints one JSON object per line, the
format of the mount's hidden .log/events.jsonl file.

Exit status: 0 events printed, 1 none selected, 2 error.`,
		Example: `  padfs log --session 01J9Z3... --since 42
  padfs log --json --since before-refactor src/ | jq -r .path
  tail -n 5 /mnt/pad/.log/events.jsonl`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sess, _ := cmd.Flags().GetString("session")
			since, _ := cmd.Flags().GetString("since")
			asJSON, _ := cmd.Flags().GetBool("json")
			return withApp(cmd, func(a *App) error {
				sid, err := pickSession(a, sess)
				if err != nil {
					return err
				}
				if err := a.FlushMount(); err != nil {
					return fmt.Errorf("commit the mount's open writes: %w", err)
				}
				f, err := sinceFilter(a.Store, sid, since)
				if err != nil {
					return err
				}
				if len(args) == 1 {
					f.Path = sessionPath(a, sid, args[0])
				}
				n := 0
				var werr error
				err = a.Store.EachEvent(sid, f, func(ev mvcc.Event) bool {
					n++
					if asJSON {
						_, werr = fmt.Fprintf(a.Out, "%s\n", ev.JSON())
					} else {
						werr = writeEventLine(a.Out, ev)
					}
					return werr == nil
				})
				if err == nil {
					err = werr
				}
				if err != nil {
					return err
				}
				if n == 0 {
					return exitError{1}
				}
				return nil
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the session of the mount you are in)")
	c.Flags().String("since", "", "only events after this sequence number, HLC, RFC 3339 time, checkpoint name or now (exclusive)")
	c.Flags().Bool("json", false, "one JSON object per line")
	return c
}

// writeEventLine prints one event for humans:
//
//	SEQ HLC OP PATH [-> TO] [SIZE bytes sha256:HASH12] [DETAIL]
func writeEventLine(w io.Writer, ev mvcc.Event) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s %s", ev.Seq, ev.HLC, ev.Op)
	if ev.Path != "" {
		fmt.Fprintf(&b, " %s", ev.Path)
	}
	if ev.Path2 != "" {
		fmt.Fprintf(&b, " -> %s", ev.Path2)
	}
	if ev.Hash != "" {
		h := ev.Hash
		if len(h) > 12 {
			h = h[:12]
		}
		fmt.Fprintf(&b, " %d bytes sha256:%s", ev.Size, h)
	} else if ev.Size != 0 {
		fmt.Fprintf(&b, " %d bytes", ev.Size)
	}
	if ev.Detail != "" {
		fmt.Fprintf(&b, " (%s)", ev.Detail)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// pickSession resolves a --session value (a ULID or a session name), or
// with none the session of the running mount the caller is in.
func pickSession(a *App, flag string) (mvcc.SessionID, error) {
	if flag != "" {
		return sessionByIDOrName(a.Store, flag)
	}
	if a.Mount != nil {
		if a.Mount.Session != "" {
			return mvcc.ParseSessionID(a.Mount.Session)
		}
		if rel, ok := under(a.Mount.Mountpoint, a.Cwd); ok && rel != "." {
			first := strings.SplitN(rel, string(filepath.Separator), 2)[0]
			return sessionByIDOrName(a.Store, first)
		}
	}
	return mvcc.SessionID{}, errors.New("which session? give --session ID (or run the command inside a mounted session)")
}

// sessionByIDOrName finds a session by id, else by name (the newest live
// session of that name, as the mount's root resolves names).
func sessionByIDOrName(st *mvcc.Store, s string) (mvcc.SessionID, error) {
	h, err := st.ResolveSession(s)
	if err != nil {
		return mvcc.SessionID{}, err
	}
	return h.ID, nil
}

// under returns p relative to dir when p is dir or below it.
func under(dir, p string) (string, bool) {
	if dir == "" || p == "" {
		return "", false
	}
	rel, err := filepath.Rel(dir, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

// sessionPath turns a PATH argument into a path relative to the session
// root. When the command runs for a caller inside a running mount, or PATH
// is absolute, a path inside the mounted session is translated; any other
// path is taken as relative to the session root already.
func sessionPath(a *App, sid mvcc.SessionID, p string) string {
	if a.Mount != nil {
		root := a.Mount.Mountpoint
		if _, in := under(root, a.Cwd); in || filepath.IsAbs(p) {
			if rel, ok := under(root, a.Abs(p)); ok {
				if a.Mount.Session != "" {
					return filepath.ToSlash(rel)
				}
				parts := strings.SplitN(rel, string(filepath.Separator), 2)
				if id, err := sessionByIDOrName(a.Store, parts[0]); err == nil && id == sid {
					if len(parts) == 1 {
						return "."
					}
					return filepath.ToSlash(parts[1])
				}
			}
		}
	}
	return filepath.ToSlash(p)
}
