package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/padfs/padfs/grep"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search"
	"github.com/padfs/padfs/timetravel"
	"github.com/spf13/cobra"
)

func init() { addCommand(newGrepCmd) }

const grepHelp = `Search a session's files like GNU grep -rn, through the search index.

Usage: padfs grep [OPTION]... PATTERN [PATH]...

It is a drop-in for 'grep -rn' over the session tree: the same lines in the
same order and format, the same exit codes (0 a line matched, 1 none, 2 an
error). -r/-R are implied. With no PATH it searches the whole session (or,
inside a mount, the working directory) and prints paths as 'grep -r' does
there. The index narrows the files to read; the pattern then runs over each
candidate's current content, so results are exact even while the index
catches up. Syntax GNU grep accepts but padfs cannot evaluate exactly
(back-references; with -P look-around, possessive quantifiers, atomic
groups, recursion, conditionals, \K and \G) is an error (exit 2) naming
the construct. Not supported: long-option abbreviations, -f FILE, --label.

Options (as GNU grep):
  -G, --basic-regexp     PATTERN is a basic regular expression (default)
  -E, --extended-regexp  PATTERN is an extended regular expression
  -F, --fixed-strings    PATTERN is a list of fixed strings
  -P, --perl-regexp      PATTERN is a Perl regular expression (what RE2 evaluates)
  -e, --regexp=PATTERN   use PATTERN (repeatable)
  -i, -y, --ignore-case  ignore case distinctions
  -w, --word-regexp      match whole words
  -x, --line-regexp      match whole lines
  -v, --invert-match     select non-matching lines
  -c, --count            print only a count of selected lines per file
  -l, --files-with-matches     print only names of files with a match
  -L, --files-without-match    print only names of files without one
  -n, --line-number      print line numbers
  -h, --no-filename      never print file names
  -H, --with-filename    always print file names
  -o, --only-matching    print only the matched parts of lines
  -m, --max-count=NUM    stop after NUM selected lines per file
  -A, --after-context=NUM   print NUM lines of trailing context
  -B, --before-context=NUM  print NUM lines of leading context
  -C, --context=NUM, -NUM   print NUM lines of context on both sides
      --group-separator=SEP, --no-group-separator   between context groups
  -b, --byte-offset      print byte offsets
  -T, --initial-tab      line up content after a tab
  -Z, --null             a NUL byte after file names
  -z, --null-data        lines end in NUL bytes
  -a, --text             read binary files as text (--binary-files=text)
  -I                     binary files match nothing (--binary-files=without-match)
      --binary-files=TYPE  binary, text or without-match
      --color[=WHEN]     mark matches (always, never, auto: on a terminal)
      --line-buffered    write every line at once
  -q, --quiet            print nothing; exit 0 on the first match
  -s, --no-messages      no messages about missing files
  -r, -R                 recurse (implied); -R also follows symlinks
      --include=GLOB     search only files whose base name matches GLOB
      --exclude=GLOB     skip files whose base name matches GLOB
      --exclude-dir=GLOB skip directories whose base name matches GLOB
padfs options:
      --data DIR         data directory
      --store URL        store URL (postgres://...; default $PADFS_STORE)
      --session ID       session id or name (default: the mounted session you are in)
      --asof T           search the state as of T (HLC, RFC 3339 time or checkpoint)

Examples:
  padfs grep -n 'func main' .
  padfs grep --session $S -i todo
  padfs grep --asof 2026-11-29T14:00:00Z -E 'err(or)?\b' src/`

func newGrepCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "grep [OPTION]... PATTERN [PATH]...",
		Short:              "grep -rn over a session, exact and fast (through the search index)",
		Long:               grepHelp,
		DisableFlagParsing: true,
		RunE:               runGrep,
	}
}

func runGrep(cmd *cobra.Command, args []string) error {
	args, store := cutStoreFlag(args)
	if store != "" {
		if err := cmd.Flags().Set("store", store); err != nil {
			return err
		}
	}
	ga, err := grep.ParseCommandLine(args)
	if err != nil {
		return fmt.Errorf("grep: %w", err)
	}
	if ga.Help {
		fmt.Fprintln(cmd.OutOrStdout(), grepHelp)
		return nil
	}
	if ga.Data != "" {
		cmd.InheritedFlags()
		if err := cmd.Flags().Set("data", ga.Data); err != nil {
			return err
		}
	}
	return withApp(cmd, func(a *App) error {
		sid, err := pickSession(a, ga.Session)
		if err != nil {
			return fmt.Errorf("grep: %w", err)
		}
		req := search.GrepRequest{Options: ga.Options, Session: sid, Operands: ga.Operands, Out: a.Out, Err: a.Err}
		req.ErrPrefix = "padfs grep"
		if ga.ColorWhen == "auto" && isTerminal(a.Out) { // a forwarded command's socket is not
			req.Color = true
		}
		if ga.AsOf != "" {
			if req.AsOf, err = timetravel.Resolve(a.Store, sid, ga.AsOf); err != nil {
				return fmt.Errorf("grep: --asof: %w", err)
			}
		}
		for i, op := range req.Operands {
			req.Operands[i].Path = sessionPath(a, sid, op.Path)
		}
		if len(req.Operands) == 0 {
			// Inside a mount, no PATH means the working directory, printed
			// as `grep -r PAT` prints it (no "./").
			if p := sessionPath(a, sid, "."); p != "." && p != "" && a.Mount != nil {
				if _, in := under(a.Mount.Mountpoint, a.Cwd); in {
					req.Operands = []grep.Operand{{Display: "", Path: p}}
				}
			}
		}
		ix, release, err := a.Index()
		if err != nil {
			return fmt.Errorf("grep: %w", err)
		}
		defer release()
		stats, err := ix.Grep(cmd.Context(), req)
		if err != nil {
			var ue *grep.UnsupportedError
			var se *grep.SyntaxError
			switch {
			case errors.As(err, &ue), errors.As(err, &se):
				return fmt.Errorf("grep: %w", err)
			case errors.Is(err, mvcc.ErrNoSession):
				return fmt.Errorf("grep: %w", err)
			}
			return fmt.Errorf("grep: %s", strings.TrimSpace(err.Error()))
		}
		if code := stats.ExitCode(req.Mode == grep.OutQuiet); code != 0 {
			return exitError{code}
		}
		return nil
	})
}

// cutStoreFlag removes --store URL (or --store=URL) from grep's own
// command line, which cobra does not parse, before the first "--".
func cutStoreFlag(args []string) (rest []string, store string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return append(rest, args[i:]...), store
		case a == "--store" && i+1 < len(args):
			store = args[i+1]
			i++
		case strings.HasPrefix(a, "--store="):
			store = strings.TrimPrefix(a, "--store=")
		default:
			rest = append(rest, a)
		}
	}
	return rest, store
}
