// Command padfs mounts a versioned coding scratchpad as a FUSE filesystem
// and manages its sessions. Every subcommand lives in its own file and
// registers itself on rootCmd in an init function.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "padfs",
	Short:         "A versioned coding scratchpad, mounted as a FUSE filesystem",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func init() {
	rootCmd.PersistentFlags().String("data", "", "data directory (default $PADFS_DATA, else $XDG_DATA_HOME/padfs or ~/.local/share/padfs)")
}

// exitError carries an exit code other than 2 (e.g. 1: nothing to report).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	err := rootCmd.Execute()
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	default:
		fmt.Fprintln(os.Stderr, "padfs:", err)
		os.Exit(2)
	}
}
