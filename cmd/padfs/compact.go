package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

func init() { addCommand(newCompactCmd) }

func newCompactCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "compact [--json]",
		Short: "Rewrite the store so that freed space goes back to the filesystem",
		Long: `Copy the live keys of the store into a fresh file and put it in place of
padfs.db, so that pages freed by padfs prune (and any deletion) are given back
to the filesystem and no freed page still holds deleted bytes. Without it,
freed pages stay in the file and are reused by new writes.

Reads go on while the copy runs (about as long as reading the live data
once), and commits wait in the write-ahead log, durable, and fold into the
new file after the swap; only the swap holds the store's lock. It needs free
space for the copy: on a full disk, prune first (that frees pages inside the
file), then compact once there is room for the live data. It prints the
file's size and, since bbolt grows it ahead of its data (sparse), the disk
space it takes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			return withApp(cmd, func(a *App) error {
				db := filepath.Join(a.Dir, "padfs.db")
				before, usedBefore := fileUsage(db)
				if err := compactStore(a); err != nil {
					return err
				}
				after, usedAfter := fileUsage(db)
				if asJSON {
					return writeJSON(a.Out, map[string]int64{"before": before, "after": after,
						"before_on_disk": usedBefore, "after_on_disk": usedAfter})
				}
				_, err := fmt.Fprintf(a.Out, "compacted %s: %d -> %d bytes (on disk %d -> %d)\n", db, before, after, usedBefore, usedAfter)
				return err
			})
		},
	}
	c.Flags().Bool("json", false, "machine-readable output")
	return c
}

// compactStore compacts a's store with a progress bar on stderr, first
// giving back the disk-full reserve (compaction needs room for the copy)
// and restoring it after.
func compactStore(a *App) error {
	defer restoreReserve(a.Dir)
	releaseReserve(a.Dir)
	prog := newProgress(a.Err)
	err := a.Store.Compact(prog.report)
	prog.done()
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	return nil
}

// fileUsage returns a file's size and the disk space it takes (its
// blocks: less than its size where it is sparse); 0, 0 if it is missing.
func fileUsage(p string) (size, onDisk int64) {
	fi, err := os.Stat(p)
	if err != nil {
		return 0, 0
	}
	return fi.Size(), blocksOf(fi)
}

func blocksOf(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
