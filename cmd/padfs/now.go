package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func init() { addCommand(newNowCmd) }

func newNowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "now",
		Short: "Print the current HLC: .asof/$(padfs now)/ shows every write completed before it",
		Long: `Print a fresh hybrid-logical-clock timestamp in canonical form
(RFC 3339, UTC, nine fractional digits). It is greater than every commit so
far, so .asof/<it>/ shows every write that completed before the command ran
and none that started after. While a mount runs, the command goes through the
mount's control socket and ticks its live clock.`,
		Example: "  t=$(padfs now); ...; diff -r ~/pad/.asof/$t/ ~/pad/",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withApp(cmd, func(a *App) error {
				// Writes still buffered in the mount (a file held open)
				// completed too: commit them first.
				if err := a.FlushMount(); err != nil {
					return fmt.Errorf("now: flush the mount: %w", err)
				}
				h, err := a.Store.Now()
				if err != nil {
					return fmt.Errorf("now: %w", err)
				}
				_, err = fmt.Fprintln(a.Out, h)
				return err
			})
		},
	}
}
