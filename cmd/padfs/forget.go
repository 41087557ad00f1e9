package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/session"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func init() { addSessionCommand(newForgetCmd) }

func newForgetCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "forget [--force] ID | forget --hard ID [--confirm TOKEN]",
		Short: "Forget a session: soft (history stays readable) or hard (purged for good)",
		Long: `Soft (default): the session leaves live listings (padfs session ls shows it
with --all), can no longer be written, and mounting it is refused, but every
read as of a time before the forget still works (.asof/, padfs log, padfs
diff, padfs session fork --asof). The forget is an event in its log. Removing
a session's directory at the root of a multi-session mount does the same.

Hard, in two steps. padfs session forget --hard ID changes nothing and prints
a receipt: the files, versions, bytes and chunks that would be purged, and a
confirmation token bound to that receipt. padfs session forget --hard ID
--confirm TOKEN then purges irreversibly: every key of the session (header,
log, checkpoints, every version of every file), every content chunk no other
session still references, and the session's search index entries; then it
compacts the store (and the index) so that no byte of the purged content
remains in any file of the data directory. It runs in short batches (at most
512 keys each), so writers of other sessions wait at most a few milliseconds
at a time; the session is marked first and is invisible from then on.
Progress (keys done of total, then the compaction) goes to stderr. A purge
cut short (the client went away, kill -9, power loss) resumes where it
stopped when padfs next opens the store, or with padfs session forget --hard
ID (no token needed: it was confirmed). A wrong or
stale token (the session changed since the receipt, or a fork now shares its
chunks) is refused and nothing is purged. Content shared with other sessions
(e.g. forks of this one) stays: it is theirs too.

A session that a running padfs mount serves read-write (padfs mount
--session ID, not --asof; also a further mount of the data directory, and
on a PostgreSQL store a mount on another host, which holds its lease) is
refused unless --force: its users would lose their directory mid-work. (A mount of all sessions does not count: there
rmdir of a session directory forgets it too.)

ID is a session id or name. --json prints the receipt (or the result) as
JSON.`,
		Example: `  padfs session forget 01J9Z3...
  padfs session forget --hard 01J9Z3...
  padfs session forget --hard 01J9Z3... --confirm forget-5f1c0e...`,
		Args: cobra.ExactArgs(1),
		RunE: runForget,
	}
	c.Flags().Bool("hard", false, "purge irreversibly (two steps: receipt, then --confirm TOKEN)")
	c.Flags().String("confirm", "", "the token of the receipt printed by --hard: carry out the purge")
	c.Flags().Bool("json", false, "machine-readable output")
	c.Flags().Bool("force", false, "forget even a session mounted read-write (its mount then fails every write)")
	return c
}

// runForget is session forget: soft, a hard forget's receipt, or the purge.
func runForget(cmd *cobra.Command, args []string) error {
	hard, _ := cmd.Flags().GetBool("hard")
	token, _ := cmd.Flags().GetString("confirm")
	asJSON, _ := cmd.Flags().GetBool("json")
	force, _ := cmd.Flags().GetBool("force")
	if token != "" && !hard {
		return errors.New("--confirm goes with --hard")
	}
	return withApp(cmd, func(a *App) error {
		if id, ok := finishedBefore(a, args[0], mvcc.JobPurge); ok && hard {
			_, err := fmt.Fprintf(a.Out, "purged session %s (the hard forget begun earlier is finished)\n", id)
			return err
		}
		sid, err := sessionByIDOrName(a.Store, args[0]) // a forgotten one by id: it can still be purged
		if id, perr := mvcc.ParseSessionID(args[0]); perr == nil && hard {
			if j, ok := busyJob(a, id, err); ok && j.Kind == mvcc.JobPurge {
				// Cut short (client gone, kill -9): finish it; it
				// was confirmed when it began.
				fmt.Fprintf(a.Err, "padfs: finishing the hard forget of session %s begun earlier (%d of %d keys done)\n", id, j.Done, j.Total)
				return purge(a, id, "", asJSON)
			}
		}
		if err != nil {
			return err
		}
		if !force && (!hard || token != "") {
			if err := refuseMountedRW(a, sid); err != nil {
				return err
			}
		}
		if force && (!hard || token != "") {
			// Only a session's lease holder may commit to it.
			release, err := takeLeaseForForce(a, sid)
			if err != nil {
				return err
			}
			defer release()
		}
		switch {
		case !hard:
			return softForget(a, sid, asJSON)
		case token == "":
			return purgeReceipt(a, sid, asJSON)
		default:
			return purge(a, sid, token, asJSON)
		}
	})
}

func softForget(a *App, sid mvcc.SessionID, asJSON bool) error {
	// Commit what a mount of the session still buffers: it belongs to the
	// history before the forget.
	if err := a.FlushMount(); err != nil {
		return fmt.Errorf("commit the mount's open writes: %w", err)
	}
	at, err := a.Store.Forget(sid)
	if err != nil {
		return err
	}
	a.Notify(sid)
	if asJSON {
		b, _ := json.Marshal(map[string]string{"session": sid.String(), "forgotten": at.String()})
		_, err = fmt.Fprintf(a.Out, "%s\n", b)
		return err
	}
	_, err = fmt.Fprintf(a.Out, "forgot session %s at %s (readable as of earlier times; padfs session forget --hard purges it)\n", sid, at)
	return err
}

func purgeReceipt(a *App, sid mvcc.SessionID, asJSON bool) error {
	// The receipt must see what the mount still buffers, else committing
	// that at the purge voids the token: on a full disk the commit needs
	// the reserve's room already.
	releaseReserve(a.Dir)
	defer restoreReserve(a.Dir)
	flushBeforeFreeing(a)
	r, err := a.Store.PlanPurge(sid)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(a.Out, purgeReceiptJSON{r, retained(a)})
	}
	name := ""
	if r.Name != "" {
		name = fmt.Sprintf(" (%s)", r.Name)
	}
	_, err = fmt.Fprintf(a.Out, `Hard forget of session %s%s would purge, irreversibly:
  files:    %d (and %d directories, root included)
  versions: %d
  bytes:    %d
  chunks:   %d (%d more stay: other sessions share them)
  log:      %d events
Nothing has been changed. To purge, run (the token is void as soon as the
session changes):
  padfs session forget --hard %s --confirm %s
token: %s
`, sid, name, r.Files, r.Dirs, r.Versions, r.Bytes, r.Chunks, r.SharedChunks, r.LastSeq, sid, r.Token, r.Token)
	printRetained(a)
	return err
}

func purge(a *App, sid mvcc.SessionID, token string, asJSON bool) error {
	// A full disk must not stop a purge: it writes before it frees.
	releaseReserve(a.Dir)
	defer restoreReserve(a.Dir)
	flushBeforeFreeing(a)
	r, err := lifecycle(a, sid, func(st *session.Store, progress mvcc.Progress) (*mvcc.PurgeReceipt, error) {
		if token == "" {
			r, err := st.FinishJob(a.Context(), sid, progress)
			pr, _ := r.(*mvcc.PurgeReceipt)
			return pr, err
		}
		return st.Purge(a.Context(), sid.String(), token, progress)
	})
	if errors.Is(err, mvcc.ErrToken) {
		return fmt.Errorf("%w; nothing was purged: run padfs session forget --hard %s for a fresh receipt", err, sid)
	}
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(a.Out, withRetained(a, map[string]any{"purged": r}))
	}
	_, err = fmt.Fprintf(a.Out, "purged session %s: %d files, %d versions, %d bytes, %d chunks\n",
		sid, r.Files, r.Versions, r.Bytes, r.Chunks)
	printRetained(a)
	return err
}

// purgeReceiptJSON is a hard forget's receipt and what the store's server
// keeps of deleted data.
type purgeReceiptJSON struct {
	*mvcc.PurgeReceipt
	Retained string `json:"retained,omitempty"`
}

// retained is what the store's server keeps of deleted data where padfs
// cannot reach it (PostgreSQL's WAL, replicas, backups), or "".
func retained(a *App) string { return kv.Retained(a.Store.KV()) }

// withRetained adds retained(a) to a JSON result, if there is any.
func withRetained(a *App, m map[string]any) map[string]any {
	if t := retained(a); t != "" {
		m["retained"] = t
	}
	return m
}

// printRetained ends a hard forget's or redaction's receipt with
// retained(a), if there is anything to say.
func printRetained(a *App) {
	if t := retained(a); t != "" {
		fmt.Fprintf(a.Out, "Kept outside padfs's reach: %s.\n", t)
	}
}

// lifecycle runs op, a call of the Go API that changes session sid in the
// store and then in its search index (session.Store.Purge,
// session.Session.Redact), over the App's store and index: the running
// mount's index when the command runs in its process, else one opened for
// the command. Progress goes to a.Err as bars; once the store changed (op
// returned a receipt, even with an error from the index), a running mount
// is told.
func lifecycle[R any](a *App, sid mvcc.SessionID, op func(st *session.Store, progress mvcc.Progress) (*R, error)) (*R, error) {
	ix, release, err := a.Index()
	if err != nil {
		return nil, fmt.Errorf("open the search index: %w; nothing was changed", err)
	}
	defer release()
	prog := newProgress(a.Err)
	r, err := op(session.Wrap(a.Store, ix), prog.report)
	prog.done()
	if r != nil {
		a.Notify(sid)
	}
	return r, err
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// progress draws one progress bar per stage on w (stderr).
type progress struct {
	w     io.Writer
	bar   *progressbar.ProgressBar
	stage string
}

func newProgress(w io.Writer) *progress { return &progress{w: w} }

func (p *progress) report(stage string, done, total int64) {
	if p.bar == nil || stage != p.stage {
		p.done()
		desc := map[string]string{"purge": "purging keys", "redact": "rewriting versions", "compact": "compacting store"}[stage]
		if desc == "" {
			desc = stage
		}
		p.stage = stage
		p.bar = progressbar.NewOptions64(max(total, 1),
			progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(desc),
			progressbar.OptionShowCount(),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(p.w) }),
		)
	}
	if total > 0 {
		p.bar.ChangeMax64(total)
	}
	_ = p.bar.Set64(done)
}

func (p *progress) done() {
	if p.bar != nil && !p.bar.IsFinished() {
		_ = p.bar.Finish()
	}
	p.bar = nil
}
