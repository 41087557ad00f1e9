package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/padfs/padfs/mvcc"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

func init() { addSessionCommand(newSessionImportCmd) }

// importTree is `padfs session new --from DIR`: a new session holding a
// copy of host directory dir, as one commit.
func importTree(a *App, dir, name string, tty bool) error {
	dir = a.Abs(dir)
	opt := mvcc.ImportOptions{Name: name}
	stop := func() {}
	if tty || isTerminal(a.Err) {
		opt.Progress, stop = importBar(a.Err)
	}
	start := time.Now()
	h, st, err := a.Store.ImportTree(a.Context(), dir, opt)
	stop()
	if err != nil {
		return fmt.Errorf("session new --from %s: %w", dir, err)
	}
	a.Notify(h.ID)
	fmt.Fprintf(a.Err, "imported %s: %d files, %d directories, %d symlinks, %d other, %d hard links, %d xattrs, %d bytes (%d new) in %.1fs\n",
		dir, st.Files, st.Dirs, st.Symlinks, st.Others, st.Links, st.Xattrs, st.Bytes, st.Stored, time.Since(start).Seconds())
	_, err = fmt.Fprintln(a.Out, h.ID)
	return err
}

// ttyFlag is a hidden flag the client adds to a command line it forwards
// to a running mount when its stderr is a terminal: the mount's process
// sees only the control socket, and draws a progress bar only when told.
const ttyFlag = "tty-progress"

// forwardTerminal marks the command line for a running mount with
// --tty-progress when the caller's stderr is a terminal.
func forwardTerminal(cmd *cobra.Command) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if _, served := ctx.Value(servedKey).(*served); served || !isTerminal(os.Stderr) {
		return
	}
	argv, ok := ctx.Value(argvKey).([]string)
	if !ok {
		argv = os.Args[1:]
	}
	cmd.SetContext(context.WithValue(ctx, argvKey, append(slices.Clone(argv), "--"+ttyFlag)))
}

// importBar shows an import's progress on a terminal.
func importBar(w io.Writer) (mvcc.Progress, func()) {
	var bar *progressbar.ProgressBar
	stage := ""
	p := func(s string, done, total int64) {
		if s != stage {
			if bar != nil {
				_ = bar.Finish()
			}
			stage = s
			opts := []progressbar.Option{progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(s),
				progressbar.OptionThrottle(100e6), progressbar.OptionClearOnFinish()}
			if s == "import" {
				opts = append(opts, progressbar.OptionShowBytes(true))
			} else {
				opts = append(opts, progressbar.OptionShowCount())
			}
			bar = progressbar.NewOptions64(total, opts...)
		}
		_ = bar.Set64(done)
	}
	return p, func() {
		if bar != nil {
			_ = bar.Finish()
		}
	}
}

func newSessionImportCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import FILE",
		Short: "Add a session exported by padfs session export (id, history, log, checkpoints)",
		Long: `Read a session archive (padfs session export; "-" reads stdin) and add the
session to this data directory with its id, name, every version, its log and
its checkpoints. The whole archive is checked (every record's CRC-32C, the
record count and the whole-file SHA-256) before anything of the session is
written, and the session appears in one transaction: a damaged or truncated
archive is refused and imports nothing. A session id that is already here
is refused (padfs forget --hard it first to replace it), as is a name a
live session has. Inode numbers are renumbered (they are unique per store);
HLCs, sequence numbers and the log are kept. A fork imports without its
parent: its tree is complete; its header still names the parent.`,
		Example: "  padfs session export $S -o s.padfs && padfs --data /other session import s.padfs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withApp(cmd, func(a *App) error {
				var r io.Reader = a.In
				if args[0] != "-" {
					f, err := os.Open(a.Abs(args[0]))
					if err != nil {
						return fmt.Errorf("session import: %w", err)
					}
					defer f.Close()
					r = f
				}
				h, err := a.Store.ImportSession(a.Context(), r)
				if err != nil {
					return fmt.Errorf("session import %s: %w", args[0], err)
				}
				a.Notify(h.ID)
				_, err = fmt.Fprintln(a.Out, h.ID)
				return err
			})
		},
	}
}
