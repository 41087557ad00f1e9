package grep

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// CommandLine is a parsed `padfs grep` command line: GNU grep's options
// and operands, and the padfs options the caller resolves (data
// directory, session, as-of time).
type CommandLine struct {
	Options
	// Operands are the PATHs, with Display and Path both the text given;
	// the caller maps Path onto the tree it searches.
	Operands            []Operand
	Data, Session, AsOf string
	Help                bool
	// ColorWhen is --color's WHEN ("always", "never", "auto"; "" not
	// given): the caller turns "auto" into Color when its output is a
	// terminal.
	ColorWhen string
}

// ParseCommandLine parses a GNU grep style command line (short options
// may be bundled, options and operands may be mixed, "--" ends options):
// GNU grep's options (see `padfs grep --help`) and --data=DIR,
// --session=ID, --asof=T.
func ParseCommandLine(args []string) (CommandLine, error) {
	var a CommandLine
	a.Before, a.After = -1, -1
	context := -1
	digits := "" // -NUM, GNU's --context=NUM
	listMode, count, quiet := OutLines, false, false
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
		num := func(dst *int, what string) {
			if v, err = need(); err == nil {
				*dst, err = parseCount(v, what)
			}
		}
		switch name {
		case "after-context":
			num(&a.After, "context length")
		case "before-context":
			num(&a.Before, "context length")
		case "context":
			num(&context, "context length")
		case "max-count":
			var n int
			if num(&n, "max count"); err == nil {
				a.MaxCount, a.MaxSet = n, n >= 0 // GNU: a negative count is no limit
			}
		case "group-separator":
			if v, err = need(); err == nil {
				a.GroupSep, a.NoGroupSep = &v, false
			}
		case "no-group-separator":
			a.GroupSep, a.NoGroupSep = nil, true
		case "color", "colour":
			a.ColorWhen = "auto"
			if hasVal {
				switch strings.ToLower(val) {
				case "always", "yes", "force":
					a.ColorWhen = "always"
				case "never", "no", "none":
					a.ColorWhen = "never"
				case "auto", "tty", "if-tty":
				default:
					err = fmt.Errorf("invalid argument '%s' for '--color'", val)
				}
			}
		case "binary-files":
			if v, err = need(); err == nil {
				switch v {
				case "text":
					a.Text = true
				case "binary":
					a.Text, a.SkipBinary = false, false
				case "without-match":
					a.Text, a.SkipBinary = false, true
				default:
					err = fmt.Errorf("invalid argument '%s' for '--binary-files'", v)
				}
			}
		case "text":
			a.Text, a.SkipBinary = true, false
		case "I":
			a.Text, a.SkipBinary = false, true
		case "only-matching":
			a.OnlyMatching = true
		case "byte-offset":
			a.ByteOffset = true
		case "initial-tab":
			a.InitialTab = true
		case "null":
			a.Null = true
		case "null-data":
			a.NullData = true
		case "line-buffered":
			a.LineBuffered = true
		case "perl-regexp":
			a.Match.Syntax = Perl
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
			listMode = OutFilesWith
		case "files-without-match":
			listMode = OutFilesWithout
		case "count":
			count = true
		case "line-number":
			a.LineNumbers = true
		case "no-filename":
			a.Filename = -1
		case "with-filename":
			a.Filename = 1
		case "quiet", "silent":
			quiet = true
		case "no-messages":
			silent = true
		case "binary": // -U: no CR stripping on Unix anyway
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
				if '0' <= c && c <= '9' {
					if j == 1 || arg[j-1] < '0' || arg[j-1] > '9' {
						digits = "" // a new -NUM replaces the last one
					}
					digits += string(c)
					context, _ = strconv.Atoi(digits)
					continue
				}
				if lname, ok := shortWithArg[c]; ok {
					v := arg[j+1:]
					if v == "" {
						var ok bool
						if v, ok = next(); !ok {
							return a, fmt.Errorf("option requires an argument -- '%c'", c)
						}
					}
					if c == 'e' {
						patterns, havePattern = append(patterns, strings.Split(v, "\n")...), true
					} else if err := long(lname, v, true, nil); err != nil {
						return a, err
					}
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
	switch {
	case quiet:
		a.Mode = OutQuiet
	case listMode != OutLines: // -l and -L win over -c, as in GNU grep
		a.Mode = listMode
	case count:
		a.Mode = OutCount
	}
	a.Color = a.ColorWhen == "always"
	if a.Before < 0 {
		a.Before = context
	}
	if a.After < 0 {
		a.After = context
	}
	a.Context = a.Before >= 0 || a.After >= 0
	a.Before, a.After = max(a.Before, 0), max(a.After, 0)
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
	if a.Match.Syntax == Perl && len(patterns) > 1 {
		return a, fmt.Errorf("the -P option only supports a single pattern")
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
	'H': "with-filename", 'q': "quiet", 's': "no-messages", 'o': "only-matching",
	'a': "text", 'b': "byte-offset", 'T': "initial-tab", 'Z': "null", 'z': "null-data",
	'P': "perl-regexp", 'U': "binary", 'I': "I",
}

// shortWithArg names the long option of each short option that takes an
// argument (attached, -A2, or the next argument, -A 2).
var shortWithArg = map[byte]string{
	'e': "regexp", 'A': "after-context", 'B': "before-context", 'C': "context", 'm': "max-count",
}

// parseCount parses a context length or max count as GNU grep does.
func parseCount(v, what string) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil && errors.Is(err, strconv.ErrRange) && !strings.HasPrefix(v, "-") {
		return math.MaxInt32, nil // GNU clamps huge values
	}
	if err != nil || (n < 0 && what == "context length") {
		if what == "max count" {
			return 0, fmt.Errorf("invalid max count")
		}
		return 0, fmt.Errorf("%s: invalid context length argument", v)
	}
	return int(min(n, math.MaxInt32)), nil
}

// ParseFileName parses the name of a file in a mount's .grep/
// directory into the request it reads as, `padfs grep -rn ...` at the
// session root:
//
//	.grep/PATTERN                  grep -rn PATTERN
//	.grep/-i -C2 -- PATTERN        grep -rn -i -C2 -- PATTERN
//	.grep/-l -w PATTERN            grep -rn -l -w PATTERN (options end at the first word without a dash)
//
// A name that starts with "-" is options, separated by single spaces, up
// to "--" or the first word that does not start with "-"; the rest of the
// name, spaces and all, is the pattern (so a pattern that starts with "-"
// is written after "--"). An option's argument is attached (-C2,
// --include=*.go) or the next word (-m 5). A file name cannot hold "/":
// write it as %2F. PATH operands and the padfs options (--data,
// --session, --asof) are refused.
func ParseFileName(name string) (Options, error) {
	for _, s := range []string{"%2F", "%2f"} {
		name = strings.ReplaceAll(name, s, "/")
	}
	args := []string{"-rn"}
	rest := name
	if strings.HasPrefix(name, "-") {
		for rest != "" {
			word, tail, _ := strings.Cut(rest, " ")
			if word == "--" {
				rest = tail
				break
			}
			if !strings.HasPrefix(word, "-") || word == "-" {
				break
			}
			args, rest = append(args, word), tail
			// An option whose argument is the next word.
			_, short := shortWithArg[word[len(word)-1]]
			if short && len(word) >= 2 && word[1] != '-' && !strings.ContainsAny(word[1:len(word)-1], "eABCm") ||
				slices.Contains([]string{"--regexp", "--after-context", "--before-context", "--context", "--max-count",
					"--group-separator", "--include", "--exclude", "--exclude-dir", "--binary-files"}, word) {
				arg, tail, _ := strings.Cut(rest, " ")
				args, rest = append(args, arg), tail
			}
		}
	}
	a, err := ParseCommandLine(args) // "-e PAT" and nothing after the options
	if rest != "" || err != nil {
		a, err = ParseCommandLine(append(args, "--", rest))
	}
	switch {
	case err != nil:
		return a.Options, err
	case a.Data != "" || a.Session != "" || a.AsOf != "":
		return a.Options, fmt.Errorf("--data, --session and --asof are not options of a .grep/ name")
	case len(a.Operands) > 0:
		return a.Options, fmt.Errorf("a .grep/ name holds no PATH (with -e, end the name with the options)")
	}
	return a.Options, nil
}
