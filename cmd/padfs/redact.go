package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/session"
	"github.com/spf13/cobra"
)

func init() { addCommand(newRedactCmd) }

func newRedactCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "redact [--session ID] --text NEEDLE [--replace WITH] [--confirm TOKEN]",
		Short: "Erase a string from every version of every file of a session",
		Long: `Rewrite every version of every file of the session that contains NEEDLE,
replacing it with WITH (default "[REDACTED]"), in two steps like a hard
forget: without --confirm it changes nothing and prints a receipt (files,
versions, occurrences, log entries and chunks affected) with a confirmation
token bound to it, the needle and the replacement; with --confirm TOKEN it
carries the redaction out. A wrong or stale token is refused and nothing
changes.

The history keeps its structure: the same versions, HLCs and paths, so
.asof/ views, checkpoints and the log still line up; only the bytes change
(this is padfs's one deliberate rewrite in place). Content (inline and
chunked), symlink targets and xattr values are rewritten; the log's sizes and
hashes of that content are updated; chunks no version uses any more are
deleted; the search index is rebuilt for the session; then the store and the
index are compacted, so the needle is nowhere in the data directory's bytes.
It runs in short batches (at most 512 versions, keys or chunks each), so
writers of other sessions wait at most a few milliseconds at a time; the
session is marked first and cannot be read or mounted until the end.
Progress goes to stderr. A redaction cut short (the client went away, kill
-9) resumes where it stopped when padfs next opens the store, or when the
command is run again (--session ID).
The log records that a redaction happened and how many versions changed,
never the needle.

Refused: a NEEDLE shorter than 4 bytes (such strings occur by chance in
binary records), a replacement that contains it, and a NEEDLE that occurs in
a name (file names, paths in the log, xattr names, checkpoint or session
names): names are the keys of the history; purge the session instead. Content
shared with other sessions (forks) stays until they are redacted as well; the
receipt names them.

It cannot rewrite the needle inside compressed data: git's objects and
packs, gzip, bzip2, zstd and zip files. The receipt and the redaction list
such files as NOT redacted, with what to do (for git: rewrite the commits,
then git gc --prune=now), and name compressed files that could not be read
to their end (corrupt, or over 256 MiB decompressed).

--text - reads the needle from stdin (one line, without its newline), so it
stays out of shell history and process listings.`,
		Example: `  padfs redact --session 01J9Z3... --text 'sk-live-4242'
  padfs redact --session 01J9Z3... --text 'sk-live-4242' --confirm redact-9e0c...
  printf %s "$SECRET" | padfs redact --text - --replace '***' --confirm redact-...`,
		Args: cobra.NoArgs,
		RunE: runRedact,
	}
	c.Flags().String("session", "", "session id or name (default: the session of the mount you are in)")
	c.Flags().String("text", "", "the string to erase (- reads it from stdin)")
	c.Flags().String("replace", mvcc.DefaultRedaction, "what replaces it")
	c.Flags().String("confirm", "", "the token of the receipt: carry out the redaction")
	c.Flags().Bool("json", false, "machine-readable output")
	return c
}

// redactOpts are redact's flags.
type redactOpts struct {
	sess, needle, repl, token string
	j                         bool
}

func runRedact(cmd *cobra.Command, _ []string) error {
	f := cmd.Flags()
	o := redactOpts{repl: mvcc.DefaultRedaction}
	o.sess, _ = f.GetString("session")
	o.needle, _ = f.GetString("text")
	o.token, _ = f.GetString("confirm")
	o.j, _ = f.GetBool("json")
	if f.Changed("replace") {
		o.repl, _ = f.GetString("replace")
	}
	if !f.Changed("text") {
		return errors.New("--text NEEDLE is required")
	}
	return withApp(cmd, o.run)
}

func (o redactOpts) run(a *App) error {
	if o.needle == "-" {
		b, err := io.ReadAll(io.LimitReader(a.In, 1<<20))
		if err != nil {
			return fmt.Errorf("read the needle from stdin: %w", err)
		}
		o.needle = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	if id, ok := finishedBefore(a, o.sess, mvcc.JobRedact); ok {
		_, err := fmt.Fprintf(a.Out, "redacted session %s (the redaction begun earlier is finished)\n", id)
		return err
	}
	sid, err := pickSession(a, o.sess)
	if id, perr := mvcc.ParseSessionID(o.sess); perr == nil {
		if j, ok := busyJob(a, id, err); ok && j.Kind == mvcc.JobRedact {
			// Cut short (client gone, kill -9): finish it; it was
			// confirmed when it began.
			fmt.Fprintf(a.Err, "padfs: finishing the redaction of session %s begun earlier (%d of %d keys done)\n", id, j.Done, j.Total)
			return finishJob(a.Context(), a, id)
		}
	}
	if err != nil {
		return err
	}
	if err := a.FlushMount(); err != nil {
		return fmt.Errorf("commit the mount's open writes: %w", err)
	}
	if o.token == "" {
		return redactReceipt(a, sid, o.needle, o.repl, o.j)
	}
	return o.carryOut(a, sid)
}

// carryOut redacts session sid with a confirmed token and reports what
// it changed and what it could not (compressed files).
func (o redactOpts) carryOut(a *App, sid mvcc.SessionID) error {
	r, err := lifecycle(a, sid, func(st *session.Store, progress mvcc.Progress) (*mvcc.RedactReceipt, error) {
		p, err := st.Lookup(sid.String())
		if err != nil {
			return nil, err
		}
		return p.Redact(a.Context(), o.needle, o.repl, o.token, progress)
	})
	if errors.Is(err, mvcc.ErrToken) {
		return fmt.Errorf("%w; nothing was changed: run the command without --confirm for a fresh receipt", err)
	}
	if err != nil {
		return err
	}
	nr, err := a.Store.FindCompressed(sid, o.needle)
	if err != nil {
		return fmt.Errorf("redacted, but could not look for the text in compressed files: %w", err)
	}
	if o.j {
		return writeJSON(a.Out, withRetained(a, map[string]any{"redacted": r, "not_redacted": nr}))
	}
	_, err = fmt.Fprintf(a.Out, "redacted session %s: %d occurrences in %d versions of %d files; %d chunks purged\n",
		sid, r.Occurrences, r.Versions, r.Files, r.Chunks)
	printNotRedacted(a.Out, nr)
	printRetained(a)
	return err
}

func redactReceipt(a *App, sid mvcc.SessionID, needle, repl string, asJSON bool) error {
	r, err := a.Store.PlanRedact(sid, needle, repl)
	if err != nil {
		return err
	}
	nr, err := a.Store.FindCompressed(sid, needle)
	if err != nil {
		return err
	}
	if asJSON {
		if err := writeJSON(a.Out, redactReceiptJSON{r, nr, retained(a)}); err != nil {
			return err
		}
	} else if r.Versions == 0 && compressedHits(nr) == 0 {
		fmt.Fprintf(a.Out, "session %s: the text occurs in no version; nothing to redact\n", sid)
		printNotRedacted(a.Out, nr)
	} else if r.Versions == 0 {
		fmt.Fprintf(a.Out, "session %s: the text is written out in no version; nothing to rewrite\n", sid)
		printNotRedacted(a.Out, nr)
	}
	if r.Versions == 0 {
		if compressedHits(nr) > 0 {
			return nil // not "nothing to report": the text is there
		}
		return exitError{1}
	}
	if asJSON {
		return nil
	}
	others := ""
	if len(r.Others) > 0 {
		var ids []string
		for _, o := range r.Others {
			ids = append(ids, o.String())
		}
		others = fmt.Sprintf("\n  (those shared chunks stay for sessions %s: redact them too)", strings.Join(ids, ", "))
	}
	_, err = fmt.Fprintf(a.Out, `Redaction in session %s would rewrite, keeping HLCs and paths:
  files:       %d
  versions:    %d
  occurrences: %d
  log entries: %d (content size and hash)
  chunks:      %d purged, %d shared with other sessions%s
Nothing has been changed. To redact, run the same command with
  --confirm %s
token: %s
`, sid, r.Files, r.Versions, r.Occurrences, r.Events, r.Chunks, r.SharedChunks, others, r.Token, r.Token)
	printNotRedacted(a.Out, nr)
	printRetained(a)
	return err
}
