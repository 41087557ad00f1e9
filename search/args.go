package search

import (
	"fmt"
	"strings"

	"github.com/padfs/padfs/mvcc"
)

// GrepArgs is a parsed `padfs grep` command line: the request plus the
// padfs-specific options the caller resolves (data directory, session,
// as-of time).
type GrepArgs struct {
	GrepRequest
	Data, Session, AsOf string
	Help                bool
}

// ParseGrepArgs parses a GNU grep style command line (short options may be
// bundled, options and operands may be mixed, "--" ends options):
//
//	-r -R -i -y -w -x -v -F -E -G -l -L -c -n -h -H -q -s
//	-e PATTERN, --regexp=PATTERN, --include=GLOB, --exclude=GLOB,
//	--exclude-dir=GLOB, --data=DIR, --session=ID, --asof=HLC
//
// Operands are returned with Display and Path both set to the text given;
// the caller maps Path onto the session (relative to the working
// directory inside a mount).
func ParseGrepArgs(args []string) (GrepRequest, error) {
	a, err := ParseGrepCommandLine(args)
	return a.GrepRequest, err
}

// ParseGrepCommandLine is ParseGrepArgs keeping the padfs options.
func ParseGrepCommandLine(args []string) (GrepArgs, error) {
	var a GrepArgs
	var patterns []string
	havePattern := false
	var operands []string
	silent := false
	long := func(name, val string, hasVal bool, next func() (string, bool)) error {
		need := func() (string, error) {
			if hasVal {
				return val, nil
			}
			v, ok := next()
			if !ok {
				return "", fmt.Errorf("option '--%s' requires an argument", name)
			}
			return v, nil
		}
		var err error
		var v string
		switch name {
		case "regexp":
			if v, err = need(); err == nil {
				patterns, havePattern = append(patterns, strings.Split(v, "\n")...), true
			}
		case "include":
			if v, err = need(); err == nil {
				a.Include = append(a.Include, v)
			}
		case "exclude":
			if v, err = need(); err == nil {
				a.Exclude = append(a.Exclude, v)
			}
		case "exclude-dir":
			if v, err = need(); err == nil {
				a.ExcludeDir = append(a.ExcludeDir, strings.TrimRight(v, "/"))
			}
		case "data":
			a.Data, err = need()
		case "session":
			a.Session, err = need()
		case "asof":
			a.AsOf, err = need()
		case "recursive", "dereference-recursive":
			a.Dereference = name == "dereference-recursive"
		case "ignore-case":
			a.Match.IgnoreCase = true
		case "no-ignore-case":
			a.Match.IgnoreCase = false
		case "word-regexp":
			a.Match.Word = true
		case "line-regexp":
			a.Match.Line = true
		case "invert-match":
			a.Match.Invert = true
		case "fixed-strings":
			a.Match.Syntax = Fixed
		case "extended-regexp":
			a.Match.Syntax = Extended
		case "basic-regexp":
			a.Match.Syntax = Basic
		case "files-with-matches":
			a.Mode = OutFilesWith
		case "files-without-match":
			a.Mode = OutFilesWithout
		case "count":
			a.Mode = OutCount
		case "line-number":
			a.LineNumbers = true
		case "no-filename":
			a.Filename = -1
		case "with-filename":
			a.Filename = 1
		case "quiet", "silent":
			a.Mode = OutQuiet
		case "no-messages":
			silent = true
		case "help":
			a.Help = true
		default:
			return fmt.Errorf("unrecognized option '--%s'", name)
		}
		return err
	}
	for i := 0; i < len(args); i++ {
		arg := args[i]
		next := func() (string, bool) {
			if i+1 < len(args) {
				i++
				return args[i], true
			}
			return "", false
		}
		switch {
		case arg == "--":
			operands = append(operands, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(arg, "--"):
			name, val, hasVal := strings.Cut(arg[2:], "=")
			if err := long(name, val, hasVal, next); err != nil {
				return a, err
			}
		case len(arg) > 1 && arg[0] == '-':
			for j := 1; j < len(arg); j++ {
				c := arg[j]
				if c == 'e' {
					v := arg[j+1:]
					if v == "" {
						var ok bool
						if v, ok = next(); !ok {
							return a, fmt.Errorf("option requires an argument -- 'e'")
						}
					}
					patterns, havePattern = append(patterns, strings.Split(v, "\n")...), true
					break
				}
				name, ok := shortOptions[c]
				if !ok {
					return a, fmt.Errorf("invalid option -- '%c'", c)
				}
				if err := long(name, "", false, nil); err != nil {
					return a, err
				}
			}
		default:
			operands = append(operands, arg)
		}
	}
	a.Silent = silent
	if !havePattern {
		if len(operands) == 0 {
			if a.Help {
				return a, nil
			}
			return a, fmt.Errorf("no pattern given (usage: padfs grep [OPTION]... PATTERNS [PATH]...)")
		}
		patterns = strings.Split(operands[0], "\n")
		operands = operands[1:]
	}
	a.Patterns = patterns
	for _, o := range operands {
		a.Operands = append(a.Operands, Operand{Display: o, Path: o})
	}
	return a, nil
}

// shortOptions names the long option each argument-less short option is
// (-e, which takes a pattern, is parsed apart).
var shortOptions = map[byte]string{
	'r': "recursive", 'R': "dereference-recursive", 'i': "ignore-case", 'y': "ignore-case",
	'w': "word-regexp", 'x': "line-regexp", 'v': "invert-match", 'F': "fixed-strings",
	'E': "extended-regexp", 'G': "basic-regexp", 'l': "files-with-matches",
	'L': "files-without-match", 'c': "count", 'n': "line-number", 'h': "no-filename",
	'H': "with-filename", 'q': "quiet", 's': "no-messages",
}

// ResolveAsOf parses --asof text (an HLC or RFC 3339 time).
func ResolveAsOf(s string) (mvcc.HLC, error) { return mvcc.ParseHLC(s) }
