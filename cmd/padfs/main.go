// Command padfs mounts a versioned coding scratchpad as a FUSE filesystem
// and manages its sessions.
//
// Every subcommand lives in its own file and registers a CONSTRUCTOR in an
// init function:
//
//	func init() { addCommand(newNowCmd) }            // padfs now
//	func init() { addSessionCommand(newForkCmd) }    // padfs session fork
//
// A constructor returns a fresh *cobra.Command each time it is called and
// keeps its flag values in the command (read them with cmd.Flags().GetX, or
// BoolVar into variables local to the constructor), never in package
// variables: a running mount executes forwarded commands concurrently, each
// on its own tree built by newRootCmd.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

var (
	commands        []func() *cobra.Command // padfs <cmd>
	sessionCommands []func() *cobra.Command // padfs session <cmd>
)

// addCommand registers a top-level subcommand constructor (call it from init).
func addCommand(newCmd func() *cobra.Command) { commands = append(commands, newCmd) }

// addSessionCommand registers a constructor for a subcommand of `padfs session`.
func addSessionCommand(newCmd func() *cobra.Command) {
	sessionCommands = append(sessionCommands, newCmd)
}

// newRootCmd builds a fresh command tree from the registered constructors.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "padfs",
		Short: "A versioned coding scratchpad, mounted as a FUSE filesystem",
		Long: `padfs mounts a versioned scratchpad: every save is kept as a version and
any past state of a session can be entered read-only under .asof/<hlc>/.

While a mount runs, the other commands on the same data directory go through
the mount's control socket (DATA/padfs.sock); otherwise they open the store.

With --store postgres://... (or $PADFS_STORE) the sessions live in that
PostgreSQL database and every host's padfs sees them all; the data directory
still holds this host's search index, spill files and control socket. A
session is mounted read-write by one process at a time (a lease, expiring
15 s after its holder stopped renewing it).

Exit status: 0 success, 1 nothing to report (no match, no change, no
event), 2 error, with one line "padfs: <what went wrong>" on stderr.
padfs --version prints the module version, VCS revision and Go version.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version(),
	}
	root.SetVersionTemplate("padfs {{.Version}}\n")
	root.PersistentFlags().String("store", "", "store URL: postgres://... shares one PostgreSQL store between hosts (default $PADFS_STORE; empty: the data directory's own store)")
	root.PersistentFlags().String("data", "", "data directory (default $PADFS_DATA; inside a padfs mount, its data directory; else $XDG_DATA_HOME/padfs or ~/.local/share/padfs)")
	for _, newCmd := range commands {
		root.AddCommand(newCmd())
	}
	return root
}

// exitError carries an exit code other than 2 (e.g. 1: nothing to report).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// execute runs one padfs command line on a fresh tree and returns its exit
// code: 0 ok, exitError's code, or 2 after printing "padfs: <msg>" to errw.
// The CLI's main and the control socket's server both run commands here.
func execute(ctx context.Context, args []string, in io.Reader, out, errw io.Writer) int {
	root := newRootCmd()
	ctx = context.WithValue(ctx, argvKey, args)
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errw)
	err := root.ExecuteContext(ctx)
	var ee exitError
	var fw forwarded
	switch {
	case err == nil:
		return 0
	case errors.As(err, &fw): // ran in a mount's process; output relayed
		return fw.code
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(errw, "padfs:", oneLine(err.Error()))
		return 2
	}
}

func main() {
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// version describes the build from its build info: the module version
// ("(devel)" for a build from a checkout), the VCS revision and time that
// go build stamps (with +dirty for uncommitted changes), and the Go
// version.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(no build info)"
	}
	return versionOf(bi)
}

// versionOf formats build info: "VERSION (revision REV[+dirty], TIME, GO)".
// Go stamps the revision only when it builds inside a git checkout (not a
// git worktree, nor with -buildvcs=false).
func versionOf(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	var extra []string
	if rev != "" {
		extra = append(extra, "revision "+rev+dirty)
	}
	if at != "" {
		extra = append(extra, at)
	}
	extra = append(extra, bi.GoVersion)
	return v + " (" + strings.Join(extra, ", ") + ")"
}
