package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/padfs/padfs/mvcc"
	"github.com/spf13/cobra"
)

func init() { addCommand(newIndexCmd) }

// newIndexCmd is `padfs index`, the search index's state.
func newIndexCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "index",
		Short: "Show how far the search index has caught up",
	}
	c.AddCommand(newIndexStatusCmd())
	return c
}

// indexStatusRow is one session's line of `padfs index status`.
type indexStatusRow struct {
	Session    string `json:"session"`
	Covered    uint64 `json:"covered"` // event sequence the index reflects
	CoveredHLC string `json:"covered_hlc,omitempty"`
	Last       uint64 `json:"last"` // the session's last event sequence
	LastHLC    string `json:"last_hlc,omitempty"`
	Behind     uint64 `json:"behind"` // events not yet indexed
	Bytes      int64  `json:"bytes"`  // DATA/index/<session>/ on disk
}

func newIndexStatusCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "status [--session ID] [--json]",
		Short: "Print, per session, the event the index covers and the session's last event",
		Long: `Print, per session, the event sequence number up to which the search index
reflects the store ("covered"), the session's last event ("last"), how many
events the index is behind, and the index's size on disk. Beside a running
mount it reports the mount's live index, which catches up in the background.
Without --session: the mounted session you are in, else every live session.`,
		Example: "  padfs index status --session $S --json | jq '.[0].behind'",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sessionFlag, _ := cmd.Flags().GetString("session")
			asJSON, _ := cmd.Flags().GetBool("json")
			return withApp(cmd, func(a *App) error {
				var sids []mvcc.SessionID
				if sid, err := pickSession(a, sessionFlag); err == nil {
					sids = append(sids, sid)
				} else if sessionFlag != "" {
					return fmt.Errorf("index status: %w", err)
				} else {
					infos, err := a.Store.Sessions()
					if err != nil {
						return fmt.Errorf("index status: %w", err)
					}
					for _, si := range infos {
						if !si.Forgotten {
							sids = append(sids, si.ID)
						}
					}
				}
				ix, release, err := a.Index()
				if err != nil {
					return fmt.Errorf("index status: %w", err)
				}
				defer release()
				rows := []indexStatusRow{}
				for _, sid := range sids {
					r := indexStatusRow{Session: sid.String()}
					var last, covered mvcc.HLC
					err := a.Store.View(func(t *mvcc.ReadTx) error {
						var err error
						r.Last, last, err = t.LastEvent(sid)
						return err
					})
					if err != nil {
						return fmt.Errorf("index status %s: %w", sid, err)
					}
					if r.Covered, covered, err = ix.Covered(sid); err != nil {
						return fmt.Errorf("index status %s: %w", sid, err)
					}
					if r.Covered < r.Last {
						r.Behind = r.Last - r.Covered
					}
					if r.Last > 0 {
						r.LastHLC = last.String()
					}
					if r.Covered > 0 {
						r.CoveredHLC = covered.String()
						r.Bytes, _ = ix.Size(sid)
					}
					rows = append(rows, r)
				}
				if asJSON {
					b, err := json.Marshal(rows)
					if err != nil {
						return err
					}
					_, err = fmt.Fprintf(a.Out, "%s\n", b)
					return err
				}
				tw := tabwriter.NewWriter(a.Out, 0, 8, 2, ' ', 0)
				fmt.Fprintln(tw, "SESSION\tCOVERED\tLAST\tBEHIND\tBYTES")
				for _, r := range rows {
					fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", r.Session, r.Covered, r.Last, r.Behind, r.Bytes)
				}
				return tw.Flush()
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the mounted session you are in)")
	c.Flags().Bool("json", false, "print a JSON array of objects")
	return c
}
