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
	p := cmdParser{context: -1, listMode: OutLines}
	p.a.Before, p.a.After = -1, -1
	if err := p.parse(args); err != nil {
		return p.a, err
	}
	return p.finish()
}

// cmdParser is ParseCommandLine's state: what the options said so far.
type cmdParser struct {
	a                    CommandLine
	context              int    // -C NUM, -NUM (-1: not given)
	digits               string // the -NUM being read, GNU's --context=NUM
	listMode             OutputMode
	count, quiet, silent bool
	matcherSet           bool // -E, -F, -G or -P was given
	patterns             []string
	havePattern          bool
	operands             []string
}

// parse reads the arguments: options (bundled or not, long ones with
// "=VAL" or the next argument) and operands, until "--".
func (p *cmdParser) parse(args []string) error {
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
			p.operands = append(p.operands, args[i+1:]...)
			return nil
		case strings.HasPrefix(arg, "--"):
			name, val, hasVal := strings.Cut(arg[2:], "=")
			if err := p.long(name, val, hasVal, next); err != nil {
				return err
			}
		case len(arg) > 1 && arg[0] == '-':
			if err := p.short(arg, next); err != nil {
				return err
			}
		default:
			p.operands = append(p.operands, arg)
		}
	}
	return nil
}

// short reads one argument of bundled short options ("-inC2", "-5").
func (p *cmdParser) short(arg string, next func() (string, bool)) error {
	for j := 1; j < len(arg); j++ {
		c := arg[j]
		if '0' <= c && c <= '9' {
			if j == 1 || arg[j-1] < '0' || arg[j-1] > '9' {
				p.digits = "" // a new -NUM replaces the last one
			}
			p.digits += string(c)
			p.context, _ = strconv.Atoi(p.digits)
			continue
		}
		if lname, ok := shortWithArg[c]; ok {
			// The argument is the rest of this one, or the next.
			v := arg[j+1:]
			if v == "" {
				var ok bool
				if v, ok = next(); !ok {
					return fmt.Errorf("option requires an argument -- '%c'", c)
				}
			}
			return p.long(lname, v, true, nil)
		}
		name, ok := shortOptions[c]
		if !ok {
			return fmt.Errorf("invalid option -- '%c'", c)
		}
		if err := p.long(name, "", false, nil); err != nil {
			return err
		}
	}
	return nil
}

// withArg lists the long options that take an argument ("=VAL" or the
// next argument).
var withArg = map[string]bool{
	"after-context": true, "before-context": true, "context": true, "max-count": true,
	"group-separator": true, "binary-files": true, "regexp": true, "include": true,
	"exclude": true, "exclude-dir": true, "data": true, "session": true, "asof": true,
}

// long applies one long option (short ones are applied by their long
// names).
func (p *cmdParser) long(name, val string, hasVal bool, next func() (string, bool)) error {
	if s, ok := matchers[name]; ok {
		return p.matcher(s)
	}
	switch {
	case withArg[name]:
		if !hasVal {
			var ok bool
			if next != nil {
				val, ok = next()
			}
			if !ok {
				return fmt.Errorf("option '--%s' requires an argument", name)
			}
		}
		return p.withArg(name, val)
	case name == "color" || name == "colour":
		return p.color(val, hasVal)
	case p.matchFlag(name), p.outputFlag(name):
		return nil
	}
	return fmt.Errorf("unrecognized option '--%s'", name)
}

// withArg applies an option that takes an argument.
func (p *cmdParser) withArg(name, v string) error {
	a := &p.a
	var err error
	switch name {
	case "after-context":
		a.After, err = parseCount(v, "context length")
	case "before-context":
		a.Before, err = parseCount(v, "context length")
	case "context":
		p.context, err = parseCount(v, "context length")
	case "max-count":
		var n int
		if n, err = parseCount(v, "max count"); err == nil {
			a.MaxCount, a.MaxSet = n, n >= 0 // GNU: a negative count is no limit
		}
	case "group-separator":
		a.GroupSep, a.NoGroupSep = &v, false
	case "binary-files":
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
	case "regexp":
		p.patterns, p.havePattern = append(p.patterns, strings.Split(v, "\n")...), true
	case "include":
		a.Include = append(a.Include, v)
	case "exclude":
		a.Exclude = append(a.Exclude, v)
	case "exclude-dir":
		a.ExcludeDir = append(a.ExcludeDir, strings.TrimRight(v, "/"))
	case "data":
		a.Data = v
	case "session":
		a.Session = v
	case "asof":
		a.AsOf = v
	}
	return err
}

// color applies --color[=WHEN].
func (p *cmdParser) color(val string, hasVal bool) error {
	p.a.ColorWhen = "auto"
	if !hasVal {
		return nil
	}
	switch strings.ToLower(val) {
	case "always", "yes", "force":
		p.a.ColorWhen = "always"
	case "never", "no", "none":
		p.a.ColorWhen = "never"
	case "auto", "tty", "if-tty":
	default:
		return fmt.Errorf("invalid argument '%s' for '--color'", val)
	}
	return nil
}

// matchers are the options that choose the pattern syntax.
var matchers = map[string]Syntax{"fixed-strings": Fixed, "extended-regexp": Extended,
	"basic-regexp": Basic, "perl-regexp": Perl}

// matcher applies -F, -E, -G or -P: as in GNU grep, two different ones
// are an error.
func (p *cmdParser) matcher(s Syntax) error {
	if p.matcherSet && p.a.Match.Syntax != s {
		return errors.New("conflicting matchers specified")
	}
	p.matcherSet, p.a.Match.Syntax = true, s
	return nil
}

// matchFlag applies an option without argument that decides which
// lines match; false: it is not one.
func (p *cmdParser) matchFlag(name string) bool {
	mo := &p.a.Match
	switch name {
	case "ignore-case":
		mo.IgnoreCase = true
	case "no-ignore-case":
		mo.IgnoreCase = false
	case "word-regexp":
		mo.Word = true
	case "line-regexp":
		mo.Line = true
	case "invert-match":
		mo.Invert = true
	default:
		return false
	}
	return true
}

// outputFlag applies an option without argument that decides what is
// read and printed; false: it is not one.
func (p *cmdParser) outputFlag(name string) bool {
	a := &p.a
	switch name {
	case "no-group-separator":
		a.GroupSep, a.NoGroupSep = nil, true
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
	case "recursive", "dereference-recursive":
		a.Dereference = name == "dereference-recursive"
	case "files-with-matches":
		p.listMode = OutFilesWith
	case "files-without-match":
		p.listMode = OutFilesWithout
	case "count":
		p.count = true
	case "line-number":
		a.LineNumbers = true
	case "no-filename":
		a.Filename = -1
	case "with-filename":
		a.Filename = 1
	case "quiet", "silent":
		p.quiet = true
	case "no-messages":
		p.silent = true
	case "binary": // -U: no CR stripping on Unix anyway
	case "help":
		a.Help = true
	default:
		return false
	}
	return true
}

// finish settles what depends on several options (the output mode, the
// context lengths) and takes the pattern from the operands if no -e
// gave one.
func (p *cmdParser) finish() (CommandLine, error) {
	a := p.a
	a.Silent = p.silent
	switch {
	case p.quiet:
		a.Mode = OutQuiet
	case p.listMode != OutLines: // -l and -L win over -c, as in GNU grep
		a.Mode = p.listMode
	case p.count:
		a.Mode = OutCount
	}
	a.Color = a.ColorWhen == "always"
	if a.Before < 0 {
		a.Before = p.context
	}
	if a.After < 0 {
		a.After = p.context
	}
	a.Context = a.Before >= 0 || a.After >= 0
	a.Before, a.After = max(a.Before, 0), max(a.After, 0)
	patterns, operands := p.patterns, p.operands
	if !p.havePattern {
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
