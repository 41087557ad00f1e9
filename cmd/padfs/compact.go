package main

import (
	"fmt"
	"os"
	"path/filepath"

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

Every writer waits while the copy runs (about as long as reading the live
data once); beside a running mount, the mount's writes block for that time.
It needs free space for the copy: on a full disk, prune first (that frees
pages inside the file), then compact once there is room for the live data.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			return withApp(cmd, func(a *App) error {
				before := fileSize(filepath.Join(a.Dir, "padfs.db"))
				if err := compactStore(a); err != nil {
					return err
				}
				after := fileSize(filepath.Join(a.Dir, "padfs.db"))
				if asJSON {
					return writeJSON(a.Out, map[string]int64{"before": before, "after": after})
				}
				_, err := fmt.Fprintf(a.Out, "compacted %s: %d -> %d bytes\n", filepath.Join(a.Dir, "padfs.db"), before, after)
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

func fileSize(p string) int64 {
	fi, err := os.Stat(p)
	if err != nil {
		return 0
	}
	return fi.Size()
}
