package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func init() { addCommand(newFsckCmd) }

func newFsckCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fsck [--repair] [--json]",
		Short: "Check the store (and with --repair, fix what can be fixed)",
		Long: `Verify the whole store: the write-ahead log, the bbolt file, every record's
checksum and decoding, every chunk's checksum and SHA-256, and every
reference (directory entries to inodes, file contents to chunks, the chunk
references of each session, the commit log's gap-free sequence and the
session counters). Each problem is printed with its key and, where known,
its path. Exit status: 0 clean, 1 problems found (also when repaired),
2 fsck itself failed.

--repair rebuilds what is derived (session counters, chunk references, the
search index of the sessions concerned) and moves what is not out of the
way: a damaged log from the first bad record on, and unreadable records
and entries naming missing inodes, into DATA/quarantine/; it says what was
lost. It accepts a store that went back in time (an older bbolt meta page)
as the new truth. Beside a running mount it runs in the mount's process.`,
		Example: "  padfs fsck\n  padfs fsck --repair --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			repair, _ := cmd.Flags().GetBool("repair")
			asJSON, _ := cmd.Flags().GetBool("json")
			var pre []mvcc.Problem // found (and fixed) before the store opened
			ran := false
			run := func() error {
				return withApp(cmd, func(a *App) error {
					ran = true
					return fsckStore(cmd.Context(), a, pre, repair, asJSON)
				})
			}
			err := run()
			if err == nil || ran || !errors.Is(err, mvcc.ErrCorrupt) {
				return err
			}
			// The store does not open because of damage.
			dir, derr := commandDataDir(cmd, mustGetwd())
			if derr != nil {
				return derr
			}
			if !repair {
				pre = append(pre, mvcc.Problem{Kind: openProblemKind(err), Detail: oneLine(err.Error())})
				printFsck(cmd.OutOrStdout(), &mvcc.FsckReport{Problems: pre}, asJSON)
				return exitError{1}
			}
			fixed, rerr := storeopen.RepairDir(dir)
			pre = append(pre, fixed...)
			if rerr != nil {
				return fmt.Errorf("fsck --repair %s: %w", dir, rerr)
			}
			if len(fixed) == 0 {
				return fmt.Errorf("fsck --repair: %w", err) // nothing we know how to fix
			}
			return run()
		},
	}
	c.Flags().Bool("repair", false, "rebuild derived state and quarantine what is unreadable")
	c.Flags().Bool("json", false, "print the report as JSON")
	return c
}

func mustGetwd() string {
	wd, _ := os.Getwd()
	return wd
}

func openProblemKind(err error) string {
	if errors.Is(err, storeopen.ErrCorruptWAL) {
		return mvcc.ProblemWAL
	}
	return mvcc.ProblemStore
}

// fsckStore checks a's open store and prints the report; problems (pre
// included) make it exit 1.
func fsckStore(ctx context.Context, a *App, pre []mvcc.Problem, repair, asJSON bool) error {
	opt := mvcc.FsckOptions{Repair: repair, QuarantineDir: filepath.Join(a.Dir, mvcc.QuarantineDir)}
	if isTerminal(a.Err) {
		bar := progressbar.NewOptions64(-1,
			progressbar.OptionSetWriter(a.Err),
			progressbar.OptionSetDescription("checking"),
			progressbar.OptionSetItsString("keys"),
			progressbar.OptionShowIts(),
			progressbar.OptionShowCount(),
			progressbar.OptionThrottle(100e6),
			progressbar.OptionClearOnFinish())
		opt.Progress = func(done int64) { _ = bar.Set64(done) }
		defer bar.Finish()
	}
	if repair {
		if err := a.FlushMount(); err != nil {
			return fmt.Errorf("fsck: %w", err)
		}
		// Other hosts commit to a shared store: a repair, which recounts
		// what they write, holds every session's lease while it runs.
		if a.Store.Shared() {
			release, err := storeopen.LeaseMount(a.Store, nil, 0)
			if err != nil {
				return fmt.Errorf("fsck --repair needs every session of the shared store unmounted read-write, on every host: %w", err)
			}
			defer release()
		}
	}
	r, err := a.Store.Fsck(opt)
	if err != nil {
		return err
	}
	r.Problems = append(pre, r.Problems...)
	// A session whose records changed gets a fresh search index.
	for _, sid := range r.Changed {
		if a.Mount != nil {
			ix, release, err := a.Index()
			if err == nil {
				err = ix.Rebuild(ctx, sid, nil)
				release()
			}
			if err != nil {
				fmt.Fprintf(a.Err, "padfs fsck: rebuilding the search index of %s: %v (run padfs reindex)\n", sid, err)
			}
			continue
		}
		if err := os.RemoveAll(filepath.Join(a.Dir, "index", sid.String())); err != nil {
			fmt.Fprintf(a.Err, "padfs fsck: removing the search index of %s: %v\n", sid, err)
		}
	}
	if len(r.Changed) > 0 {
		a.Notify(r.Changed[0])
		for _, sid := range r.Changed[1:] {
			a.Notify(sid)
		}
	}
	printFsck(a.Out, r, asJSON)
	if len(r.Problems) > 0 {
		return exitError{1}
	}
	return nil
}

func printFsck(w interface{ Write([]byte) (int, error) }, r *mvcc.FsckReport, asJSON bool) {
	if r.Problems == nil {
		r.Problems = []mvcc.Problem{}
	}
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	repaired := 0
	for _, p := range r.Problems {
		fmt.Fprintln(w, p.String())
		if p.Repaired != "" {
			repaired++
		}
	}
	if r.Keys == 0 && len(r.Problems) > 0 {
		fmt.Fprintf(w, "the store does not open, nothing else was checked: %d problems, %d repaired\n", len(r.Problems), repaired)
		return
	}
	fmt.Fprintf(w, "%d keys, %d chunks checked: %d problems, %d repaired\n", r.Keys, r.Chunks, len(r.Problems), repaired)
}

// isTerminal reports whether w is a terminal (progress bars only there).
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
