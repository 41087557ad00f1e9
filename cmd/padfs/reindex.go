package main

import (
	"fmt"

	"github.com/padfs/padfs/mvcc"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func init() { addCommand(newReindexCmd) }

func newReindexCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "reindex [--session ID | --all]",
		Short: "Rebuild the search index from scratch, with a progress bar",
		Long: `Delete a session's search index (DATA/index/<session>/) and build it again
from the session's current tree, showing progress on stderr (files
indexed). The index
normally follows the store by itself (a running mount catches up in the
background, also after a crash); reindex is for a damaged index, or to build
one without a mount. Without --session it rebuilds the mounted session you
are in, or with --all (or outside any mount) every live session.`,
		Example: "  padfs reindex --session $S\n  padfs reindex --all",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sessionFlag, _ := cmd.Flags().GetString("session")
			all, _ := cmd.Flags().GetBool("all")
			return withApp(cmd, func(a *App) error {
				var sids []mvcc.SessionID
				if sid, err := pickSession(a, sessionFlag); err == nil && !all {
					sids = append(sids, sid)
				} else if sessionFlag != "" {
					return fmt.Errorf("reindex: %w", err)
				} else {
					infos, err := a.Store.Sessions()
					if err != nil {
						return fmt.Errorf("reindex: %w", err)
					}
					for _, si := range infos {
						if !si.Forgotten {
							sids = append(sids, si.ID)
						}
					}
				}
				ix, release, err := a.Index()
				if err != nil {
					return fmt.Errorf("reindex: %w", err)
				}
				defer release()
				for _, sid := range sids {
					// Counts documents committed to the index (not bytes
					// handed to it, which run ahead of the work).
					bar := progressbar.NewOptions64(-1,
						progressbar.OptionSetWriter(a.Err),
						progressbar.OptionSetDescription("indexing "+sid.String()),
						progressbar.OptionShowCount(),
						progressbar.OptionSetItsString("files"),
						progressbar.OptionShowIts(),
						progressbar.OptionThrottle(100e6),
						progressbar.OptionClearOnFinish())
					err := ix.Rebuild(cmd.Context(), sid, func(done, total int64) {
						if bar.GetMax64() != total {
							bar.ChangeMax64(max(total, 1))
						}
						_ = bar.Set64(done)
					})
					_ = bar.Finish()
					if err != nil {
						return fmt.Errorf("reindex %s: %w", sid, err)
					}
					size, _ := ix.Size(sid)
					fmt.Fprintf(a.Out, "reindexed session %s (index %d bytes)\n", sid, size)
				}
				return nil
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the mounted session you are in)")
	c.Flags().Bool("all", false, "every live session")
	return c
}
