package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
)

func init() {
	addCommand(newIndexCmd)
	addCommand(newIndexWorkerCmd)
}

func newIndexCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "index",
		Short: "Inspect the search index",
	}
	c.AddCommand(newIndexStatusCmd())
	return c
}

func newIndexStatusCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "status [--json]",
		Short: "Print, per session, the last commit the index covers and the session's last commit",
		Long: `Print, for every live session, the sequence number of the last commit the
search index reflects (covered) and of the session's last commit (last), and
why catching up failed if it did. Inside a running mount it also shows the
index worker's pid, how many times it was restarted, how many documents
it indexed since it started, and the scheduling policy queries are answered
at. grep is exact whatever the lag: it reads the files named by the log past
the covered commit.`,
		Example: "  padfs index status\n  padfs index status --json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, _ := cmd.Flags().GetBool("json")
			return withApp(cmd, func(a *App) error {
				ix, release, err := a.Index()
				if err != nil {
					return fmt.Errorf("index status: %w", err)
				}
				defer release()
				st, err := ix.Status()
				if err != nil {
					return fmt.Errorf("index status: %w", err)
				}
				if asJSON {
					enc := json.NewEncoder(a.Out)
					enc.SetIndent("", "  ")
					return enc.Encode(st)
				}
				if st.Worker.Pid != 0 {
					fmt.Fprintf(a.Out, "worker pid %d, %d restarts, %d documents indexed\n", st.Worker.Pid, st.Worker.Restarts, st.Worker.Indexed)
				} else {
					fmt.Fprintf(a.Out, "no index worker running (%d restarts)\n", st.Worker.Restarts)
				}
				for _, s := range st.Sessions {
					line := fmt.Sprintf("%s covered %d last %d lag %d", s.Session, s.Covered, s.Last, s.Last-min(s.Covered, s.Last))
					if s.Error != "" {
						line += " (" + s.Error + ")"
					}
					fmt.Fprintln(a.Out, line)
				}
				return nil
			})
		},
	}
	c.Flags().Bool("json", false, "print JSON")
	return c
}

// newIndexWorkerCmd is the index worker's name in ps. A mount starts it
// (search.Open) with its environment and connections set; the search
// package takes over before any command runs, so this only explains.
func newIndexWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "index-worker",
		Short:  "The search index's worker process (started by padfs mount)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("index-worker is started by padfs mount, not by hand")
		},
	}
}
