package grep

// OutputMode is what grep prints per file.
type OutputMode int

const (
	OutLines        OutputMode = iota // matching lines (default)
	OutCount                          // -c
	OutFilesWith                      // -l
	OutFilesWithout                   // -L
	OutQuiet                          // -q
)

// Operand is a PATH argument: Display is how GNU grep would print it (the
// argument as typed), Path the session-relative path it names ("" for
// the session root).
type Operand struct {
	Display string
	Path    string
}

// Options are GNU grep's options (what a command line gives besides
// its PATHs).
type Options struct {
	Patterns    []string // one pattern per element (GNU's newline-separated list, split)
	Match       MatchOptions
	Mode        OutputMode
	LineNumbers bool // -n
	// Filename: 1 always print file names (-H), -1 never (-h), 0 as GNU
	// grep decides (several operands, or a directory).
	Filename    int
	Include     []string // --include GLOB (file base names)
	Exclude     []string // --exclude GLOB (file base names)
	ExcludeDir  []string // --exclude-dir GLOB (directory base names)
	Dereference bool     // -R: follow symbolic links met while recursing
	Silent      bool     // -s: no messages about missing or unreadable files
	// ErrPrefix starts diagnostics ("padfs grep").
	ErrPrefix string

	// Output options, as GNU grep's.
	OnlyMatching  bool // -o: print each match, not its line
	MaxCount      int  // -m: stop after this many selected lines per file (with MaxSet)
	MaxSet        bool // -m given (-m 0 reads nothing)
	Before, After int  // -B, -A (and -C, -NUM): context lines
	Context       bool // a context option was given (even 0): groups are separated
	// GroupSep replaces "--" between context groups (--group-separator);
	// NoGroupSep leaves it out (--no-group-separator).
	GroupSep     *string
	NoGroupSep   bool
	Text         bool // -a: binary files are text
	SkipBinary   bool // -I: a binary file has no match (from where its NUL is read)
	ByteOffset   bool // -b: print byte offsets
	InitialTab   bool // -T: a tab before the line's content
	Color        bool // --color=always: GNU's SGR sequences (default GREP_COLORS)
	Null         bool // -Z: a NUL byte after file names
	NullData     bool // -z: lines end in NUL bytes, not newlines
	LineBuffered bool // --line-buffered: write out every line at once
}
