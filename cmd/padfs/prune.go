package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/timetravel"
	"github.com/spf13/cobra"
)

func init() { addCommand(newPruneCmd) }

// pruneRow is one session's result in --json output.
type pruneRow struct {
	Session   string   `json:"session"`
	Before    string   `json:"before"`
	Versions  int      `json:"versions"`
	Chunks    int      `json:"chunks"`
	Bytes     int64    `json:"bytes"`
	Records   int      `json:"records"`
	Scanned   int      `json:"scanned"`
	KeptLast  int      `json:"kept_last"`
	Kept      []string `json:"kept_checkpoints,omitempty"`
	DryRun    bool     `json:"dry_run"`
	Recounted bool     `json:"recounted,omitempty"`
}

func newPruneCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "prune [--session ID | --all] (--before T | --policy) [--keep-checkpoints=false] [--keep-last N] [--dry-run] [--compact] [--json]",
		Short: "Delete history before T, keeping the state as of T and everything after it",
		Long: `Delete every version of a file, directory entry or xattr that was superseded
before T, and every content chunk no remaining version names. The state as
of T, as of every named checkpoint before T (unless --keep-checkpoints=false)
and every state after T stay exactly as they were. T is an HLC, an RFC 3339
time, a checkpoint name, or a duration ago (90m, 36h, 7d, 2w; capped at
now).

Files and directories unlinked before T go entirely (their last version
too) once unlinked for more than an hour, since a process may still hold
them open; names removed before T leave the keyspace, so listings no longer
visit them.

After a prune, .asof/ of a point before T that is no kept checkpoint shows
the state as of T (the prune point), and ls .asof/ lists T first, then
the commits after it, and the checkpoint names (which stay). The log
(padfs log, .log/) keeps every event.

--keep-last N also keeps the last N saves of every file (and directory),
however old: its inode versions from the newest back to the N-th that
counts. Each commit of content or attributes counts (a close that wrote, a
chmod, a touch) except the truncation of a rewrite, an empty version a
non-empty one replaced ("echo x > f" is one save); names and xattrs do not
count; an inode unlinked for more than an hour keeps none. Then
.asof/ of a point before T shows the names as of T, and a file whose
version at that point is still one of its N newest shows that version
(content and attributes); every other file shows its state as of T.
padfs restore --asof of such a point restores that version. --json reports
"kept_last", the versions superseded before T that N kept.

It runs in short write transactions (at most 256 versions each), so writers
of a running mount wait at most a few milliseconds at a time. It reads the
records of the commits before T, not the whole store; a session written by
an older padfs is scanned chain by chain once instead (the receipt's
"scanned"). Freed pages are reused by new writes; --compact then gives the
space back to the filesystem (writers wait while the store is copied).

--policy runs the data directory's policy (DATA/policy.json, see padfs
prune --help-policy) once. --dry-run changes nothing and prints what would
go. --json prints an object (an array of them with --all or --policy).`,
		Example: `  padfs prune --before 7d --dry-run
  padfs prune --all --before 2026-11-01T00:00:00Z --compact
  padfs prune --before 30d --keep-last 10
  padfs prune --session refactor --before before-refactor --json`,
		Args: cobra.NoArgs,
		RunE: runPrune,
	}
	c.Flags().String("session", "", "session id or name (default: the session of the mount you are in)")
	c.Flags().Bool("all", false, "prune every session (soft-forgotten ones too)")
	c.Flags().String("before", "", "T: an HLC, RFC 3339 time, checkpoint name or duration ago (7d)")
	c.Flags().Bool("policy", false, "prune as the data directory's policy says (every session unless --session)")
	c.Flags().Bool("help-policy", false, "describe DATA/policy.json")
	c.Flags().Bool("keep-checkpoints", true, "keep the state of named checkpoints before T")
	c.Flags().Int("keep-last", 0, "also keep the last N saves of each file, however old")
	c.Flags().Bool("dry-run", false, "change nothing; print what would be freed")
	c.Flags().Bool("compact", false, "then compact the store to give the space back to the filesystem")
	c.Flags().Bool("json", false, "machine-readable output")
	return c
}

// pruneOpts are prune's flags.
type pruneOpts struct {
	sess, before                         string
	all, policy, keepCP, dry, compact, j bool
	keepLast                             int
}

func runPrune(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	var o pruneOpts
	o.sess, _ = f.GetString("session")
	o.all, _ = f.GetBool("all")
	o.before, _ = f.GetString("before")
	o.policy, _ = f.GetBool("policy")
	o.keepCP, _ = f.GetBool("keep-checkpoints")
	o.dry, _ = f.GetBool("dry-run")
	o.compact, _ = f.GetBool("compact")
	o.j, _ = f.GetBool("json")
	o.keepLast, _ = f.GetInt("keep-last")
	if o.keepLast < 0 {
		return fmt.Errorf("--keep-last %d: must be 0 or more", o.keepLast)
	}
	if helpPolicy, _ := f.GetBool("help-policy"); helpPolicy {
		_, err := fmt.Fprint(cmd.OutOrStdout(), policyHelp)
		return err
	}
	if o.all && o.sess != "" {
		return errors.New("give --session or --all, not both")
	}
	if (o.before == "") == !o.policy {
		return errors.New("give --before T, or --policy")
	}
	return withApp(cmd, func(a *App) error {
		if o.policy {
			if err := o.applyPolicy(a, f.Changed("keep-last")); err != nil {
				return err
			}
		}
		return o.run(a)
	})
}

// applyPolicy takes T, the checkpoint rule and (unless the flag was
// given) --keep-last from the data directory's policy.
func (o *pruneOpts) applyPolicy(a *App, keepLastGiven bool) error {
	pol, err := loadPolicy(a.Dir)
	if err != nil {
		return err
	}
	if pol == nil {
		return fmt.Errorf("no policy in %s", policyPath(a.Dir))
	}
	o.before = pol.Keep
	o.keepCP = pol.keepCheckpoints()
	if !keepLastGiven {
		o.keepLast = pol.KeepLast
	}
	o.all = o.sess == ""
	return nil
}

// sessions are the sessions the prune covers.
func (o *pruneOpts) sessions(a *App) ([]mvcc.SessionID, error) {
	if !o.all {
		sid, err := pickSession(a, o.sess)
		return []mvcc.SessionID{sid}, err
	}
	infos, err := a.Store.Sessions()
	if err != nil {
		return nil, err
	}
	var sids []mvcc.SessionID
	for _, si := range infos {
		sids = append(sids, si.ID)
	}
	return sids, nil
}

func (o *pruneOpts) run(a *App) error {
	sids, err := o.sessions(a)
	if err != nil {
		return err
	}
	flushBeforeFreeing(a)
	if !o.dry {
		// A full disk must not stop a prune: it writes before it frees.
		releaseReserve(a.Dir)
		defer restoreReserve(a.Dir)
	}
	rows := []pruneRow{} // --all of no session prints [], not null
	for _, sid := range sids {
		row, err := o.pruneOne(a, sid)
		if err != nil {
			return err
		}
		rows = append(rows, row)
	}
	if o.compact && !o.dry {
		if err := compactStore(a); err != nil {
			return err
		}
	}
	if !o.j {
		return nil
	}
	if o.all {
		return writeJSON(a.Out, rows)
	}
	return writeJSON(a.Out, rows[0])
}

// pruneOne prunes session sid and, without --json, prints its receipt.
func (o *pruneOpts) pruneOne(a *App, sid mvcc.SessionID) (pruneRow, error) {
	at, err := resolveBefore(a.Store, sid, o.before)
	if err != nil {
		return pruneRow{}, err
	}
	prog := newProgress(a.Err)
	r, err := a.Store.Prune(sid, mvcc.PruneOptions{Before: at, DropCheckpoints: !o.keepCP, DryRun: o.dry, KeepLast: o.keepLast})
	prog.done()
	if err != nil {
		return pruneRow{}, fmt.Errorf("prune session %s: %w", sid, err)
	}
	if !o.dry {
		a.Notify(sid)
	}
	row := pruneRow{Session: sid.String(), Before: r.Before.String(), Versions: r.Versions, Chunks: r.Chunks,
		Bytes: r.Bytes, Records: r.Records, Scanned: r.Scanned, KeptLast: r.KeptLast, DryRun: o.dry, Recounted: r.Recounted}
	for _, k := range r.Kept {
		row.Kept = append(row.Kept, k.String())
	}
	if o.j {
		return row, nil
	}
	verb := "freed"
	if o.dry {
		verb = "would free"
	}
	how := fmt.Sprintf("%d records read", r.Records)
	if o.keepLast > 0 {
		how += fmt.Sprintf(", %d versions kept by --keep-last %d", r.KeptLast, o.keepLast)
	}
	if r.Scanned > 0 {
		how += fmt.Sprintf(", %d keys scanned (history without records)", r.Scanned)
	}
	_, err = fmt.Fprintf(a.Out, "session %s before %s: %s %d versions, %d chunks, %d bytes (%s; %d checkpoints kept)\n",
		sid, r.Before, verb, r.Versions, r.Chunks, r.Bytes, how, len(r.Kept))
	return row, err
}

var agoRE = regexp.MustCompile(`^([0-9]+(?:\.[0-9]+)?)(ms|s|m|h|d|w)$`)

// parseAgo parses a duration with the units of time.ParseDuration plus d
// (24h) and w (7d).
func parseAgo(s string) (time.Duration, bool) {
	m := agoRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, false
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, false
	}
	unit := map[string]time.Duration{"ms": time.Millisecond, "s": time.Second, "m": time.Minute,
		"h": time.Hour, "d": 24 * time.Hour, "w": 7 * 24 * time.Hour}[m[2]]
	return time.Duration(v * float64(unit)), true
}

// resolveBefore turns T into an HLC: a checkpoint name, HLC or RFC 3339
// time (as .asof/ names), else a duration ago.
func resolveBefore(st *mvcc.Store, sid mvcc.SessionID, s string) (mvcc.HLC, error) {
	at, err := timetravel.Resolve(st, sid, s)
	if err == nil {
		return at, nil
	}
	if d, ok := parseAgo(s); ok {
		return mvcc.HLC(time.Now().Add(-d).UnixNano()), nil
	}
	return 0, fmt.Errorf("--before: %w (or a duration such as 7d)", err)
}
