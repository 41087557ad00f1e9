package search

import (
	"path"
	"sort"
	"strings"

	"github.com/blevesearch/bleve/v2/search/query"
)

// Files of a kind other than the corpus's main language (assembly, shell
// scripts, C headers, Markdown, rewrite rules) are few and often short
// of the query's words next to its big source files: the text ranker's
// best hundred are all Go, and the re-rankers never see them. The kind
// ranker is a candidate source of their own: BM25 of the text field
// restricted to files of the kinds the query names ("amd64 assembly",
// "shell script"), or, when it names none, to prose and scripts (READMEs,
// Markdown, shell). Its best kindPool candidates are re-ranked, wherever
// the fusion put them; it adds no score of its own (the path ranker
// scores the kind's words against the extension).
const (
	// kindCandidates is how many documents the kind ranker returns,
	// kindPool how many of them are re-ranked.
	kindCandidates = 10
	kindPool       = 4
)

// kindWords are the words that name a kind of file, by extension (Go's
// own is left out: "go" in a query names the project more often than
// the language). kindWeight is their weight in the path ranker: that of
// the file name, since the extension is part of the name ("run.bash" is
// a shell script as much as it is "run").
var kindWords = map[string][]string{
	".s": {"assembly", "asm"}, ".asm": {"assembly", "asm"},
	".sh": {"shell", "script", "sh"}, ".bash": {"shell", "script", "bash"}, ".zsh": {"shell", "script", "zsh"}, ".rc": {"shell", "script", "rc"},
	".py": {"python", "script", "py"}, ".pl": {"perl", "script"}, ".rb": {"ruby", "script"},
	".js": {"javascript", "js"}, ".mjs": {"javascript", "js"}, ".ts": {"typescript", "ts"}, ".tsx": {"typescript", "tsx"}, ".jsx": {"javascript", "jsx"},
	".c": {"c"}, ".h": {"header", "c"}, ".hpp": {"header", "cpp"}, ".cc": {"cpp"}, ".cpp": {"cpp"},
	".rs": {"rust"}, ".java": {"java"}, ".kt": {"kotlin"}, ".swift": {"swift"},
	".md": {"markdown", "md", "documentation", "doc", "notes"}, ".rst": {"restructuredtext", "documentation", "doc", "notes"},
	".html": {"html"}, ".css": {"css", "stylesheet"}, ".json": {"json"}, ".yaml": {"yaml"}, ".yml": {"yaml"},
	".toml": {"toml"}, ".xml": {"xml"}, ".sql": {"sql"}, ".proto": {"protobuf", "proto"},
	".mk": {"makefile"}, ".bat": {"batch", "script"}, ".ps1": {"powershell", "script"},
	".rules": {"rules", "rule"},
}

// proseNames are file names (before the first dot, lowercased) that hold
// prose whatever their extension (README.vendor): they are documentation.
var proseNames = map[string]bool{"readme": true, "hacking": true, "contributing": true, "design": true, "notes": true}

// proseWords are the kind words of a prose file named by proseNames.
var proseWords = []string{"documentation", "doc", "notes", "readme"}

const kindWeight = 1

// fileKindWords are the words that name the kind of the file p.
func fileKindWords(p string) []string {
	base := path.Base(p)
	if kw := kindWords[strings.ToLower(path.Ext(base))]; kw != nil {
		return kw
	}
	stem, _, _ := strings.Cut(base, ".")
	if proseNames[strings.ToLower(stem)] {
		return proseWords
	}
	return nil
}

// defaultKinds are the extensions (and prose names) the kind ranker
// keeps to when the query names no kind: prose and shell scripts, what
// a question in words most often means outside the code.
var defaultKinds = []string{".md", ".rst", ".sh", ".bash", ".rc", "readme"}

// namedKinds are the extensions (and "readme" for prose names) of the
// kinds the query's words name.
func namedKinds(q string) map[string]bool {
	named := map[string]bool{}
	for _, w := range strings.FieldsFunc(strings.ToLower(q), func(c rune) bool { return !isWordRune(c) }) {
		for ext, kw := range kindWords {
			for _, k := range kw {
				if w == k || len(k) >= 4 && w == k+"s" {
					named[ext] = true
				}
			}
		}
		for _, k := range proseWords {
			if w == k || w == k+"s" {
				named["readme"] = true
			}
		}
	}
	return named
}

// namesKind reports whether the query's named kinds include p's.
func namesKind(named map[string]bool, p string) bool {
	if len(named) == 0 {
		return false
	}
	base := path.Base(p)
	if e := strings.ToLower(path.Ext(base)); e != "" && named[e] {
		return true
	}
	stem, _, _ := strings.Cut(base, ".")
	return named["readme"] && proseNames[strings.ToLower(stem)]
}

// queryKinds are the extensions of the kinds the query's words name
// (sorted), or defaultKinds.
func queryKinds(q string) []string {
	named := namedKinds(q)
	if len(named) == 0 {
		return defaultKinds
	}
	out := make([]string, 0, len(named))
	for e := range named {
		out = append(out, e)
	}
	sort.Strings(out)
	return out
}

// kindQuery is the kind ranker's query: mq (the text ranker's) within
// the files of the query's kinds, by the index's kind field (fileKinds):
// a few terms, where the paths' words found a directory named like a
// kind too and a one-letter extension (.s, .h) took a regular expression
// over every path (13 ms of the worker's CPU on Go's src, the slowest
// ranker of the queries that named assembly, C or headers).
func kindQuery(q string, mq query.Query) query.Query {
	var fs []query.Query
	for _, k := range queryKinds(q) {
		fs = append(fs, termQ("kind", k))
	}
	f := query.NewDisjunctionQuery(fs)
	f.SetBoost(0)
	return query.NewConjunctionQuery([]query.Query{f, mq})
}

// fileKinds are the kind field's terms of the file p: its extension,
// lowercased, and "readme" for a prose name (README.vendor), what
// namesKind matches a query's kinds against.
func fileKinds(p string) []string {
	base := path.Base(p)
	var ks []string
	if e := strings.ToLower(path.Ext(base)); e != "" {
		ks = append(ks, e)
	}
	stem, _, _ := strings.Cut(base, ".")
	if proseNames[strings.ToLower(stem)] {
		ks = append(ks, "readme")
	}
	return ks
}

// strongKindWords name a kind of file and nothing else a query means
// in code: "assembly" is never a Go file's topic the way "json", "html",
// "header" (HTTP's, tar's), "rules" or "C" (cgo) are.
var strongKindWords = map[string]bool{"assembly": true, "asm": true, "shell": true, "bash": true, "zsh": true, "markdown": true, "powershell": true}

// otherKindPrior scales a file that is not of a kind a query names by a
// strong kind word: "amd64 assembly" means the .s, not the Go beside it
// that declares the same function.
const otherKindPrior = 0.85

// kindPrior is the prior of the file p for the query r.
func kindPrior(r *rq, p string) float64 {
	if !r.strongKind || namesKind(r.kinds, p) {
		return 1
	}
	return otherKindPrior
}
