package search

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/padfs/padfs/mvcc"
)

// rankCorpus is a small code tree where the right answer to each query
// is plain to a person and hard for BM25 over words alone.
var rankCorpus = map[string][]byte{
	// A path hit against files that only mention the word, more often.
	"retry/backoff.go":   []byte("package retry\n\n// Delay grows exponentially between attempts.\nfunc Delay(n int) int { return 1 << n }\n\nconst backoffCap = 64\n"),
	"notes/meeting.txt":  []byte("we talked about backoff.\nbackoff is fine, backoff, backoff again\n"),
	"docs/changelog.txt": []byte("v2: backoff tuned\n"),
	// A declaration against call sites.
	"app/settings.go": []byte("package app\n\n// loadSettings reads the settings file.\nfunc loadSettings(path string) (*Settings, error) {\n\treturn nil, nil\n}\n"),
	"app/main.go":     []byte("package app\n\nfunc main() {\n\ts, _ := loadSettings(\"a\")\n\tt, _ := loadSettings(\"b\")\n\tu, _ := loadSettings(\"c\")\n\t_, _, _ = s, t, u\n}\n"),
	// A compound file name (reg + alloc) against a file that says
	// "register" all the time.
	"compile/ssa/regalloc.go": []byte("package ssa\n\n// Register allocation: a linear scan over the values of a function,\n// spilling when no register is free.\nfunc regalloc(f *Func) {\n\tallocate(f)\n}\n"),
	"runtime/preempt_xreg.go": []byte("package runtime\n\n// Saving extended registers on preemption: register state, register\n// files, every register of the register set.\nfunc saveXRegs() {}\n"),
	// Identifiers split: readTimeout is read + timeout.
	"net/http/client.go":             []byte("package http\n\n// A Client is an HTTP client.\ntype Client struct {\n\treadTimeout int\n}\n\nfunc (c *Client) Do() {}\n"),
	"net/http/transport.go":          []byte("package http\n\n// Transport: connections for HTTP requests; no client timeout here.\nfunc roundTrip() {}\n"),
	"crypto/tls/handshake_client.go": []byte("package tls\n\n// The client side of the handshake.\nfunc clientHandshake() {}\n"),
}

func rankIndex(t *testing.T, files map[string][]byte) (*Index, *mvcc.Store, mvcc.SessionID) {
	t.Helper()
	st, data := openStore(t)
	sid := loadSession(t, st, files)
	ix, err := OpenWith(data, st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	if err := ix.Rebuild(context.Background(), sid, nil); err != nil {
		t.Fatal(err)
	}
	return ix, st, sid
}

func paths(hits []Hit) []string {
	var out []string
	for _, h := range hits {
		out = append(out, h.Path)
	}
	return out
}

func TestRankOrderings(t *testing.T) {
	ix, _, sid := rankIndex(t, rankCorpus)
	for _, c := range []struct{ q, first, why string }{
		{"backoff", "retry/backoff.go", "a path hit beats body-only mentions"},
		{"loadSettings", "app/settings.go", "the declaration beats the call sites"},
		{"load settings", "app/settings.go", "identifiers split on camelCase"},
		{"register allocation", "compile/ssa/regalloc.go", "reg + alloc in a compound file name, allocation ~ allocate"},
		{"http client timeout", "net/http/client.go", "path words and split identifiers together"},
	} {
		hits, err := ix.Search(context.Background(), sid, c.q, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Path != c.first {
			t.Errorf("%q: got %q, want %s first (%s)", c.q, paths(hits), c.first, c.why)
			continue
		}
		for _, h := range hits {
			if h.Degraded {
				t.Errorf("%q: %s degraded with the index caught up", c.q, h.Path)
			}
		}
	}
}

// TestRankExplain: every hit says what each ranker gave it, and the parts
// add up to its score.
func TestRankExplain(t *testing.T) {
	ix, _, sid := rankIndex(t, rankCorpus)
	hits, err := ix.Search(context.Background(), sid, "loadSettings", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) < 2 {
		t.Fatalf("hits %q, want the declaration and the call site", paths(hits))
	}
	for _, h := range hits {
		if len(h.Explain) != numRankers {
			t.Fatalf("%s: %d contributions, want %d", h.Path, len(h.Explain), numRankers)
		}
		var sum float64
		for i, c := range h.Explain {
			if c.Ranker != rankerNames[i] || c.Weight != rankerWeights[i] {
				t.Errorf("%s: contribution %d is %+v", h.Path, i, c)
			}
			if c.Score < 0 || c.Score > c.Weight+1e-9 || (c.Raw == 0) != (c.Rank == 0) {
				t.Errorf("%s: contribution %+v out of range", h.Path, c)
			}
			sum += c.Score
		}
		if math.Abs(sum-h.Score) > 1e-9 {
			t.Errorf("%s: parts add up to %v, score %v", h.Path, sum, h.Score)
		}
	}
	byPath := map[string]Hit{}
	for _, h := range hits {
		byPath[h.Path] = h
	}
	if d := byPath["app/settings.go"].Explain[rDecl]; d.Rank != 1 || d.Score <= 0 {
		t.Errorf("the declaring file's decl contribution: %+v", d)
	}
	if d := byPath["app/main.go"].Explain[rDecl]; d.Raw != 0 {
		t.Errorf("the calling file's decl contribution: %+v, want none", d)
	}
}

// TestRankDegradedNeverAboveSettled: files the index has not seen yet
// are found, marked degraded and listed after every settled hit, however
// well they match.
func TestRankDegradedNeverAboveSettled(t *testing.T) {
	ix, st, sid := rankIndex(t, rankCorpus)
	// Not caught up (no background indexer): a new file that matches far
	// better than anything indexed, and a change to an indexed one.
	putFile(t, st, sid, "backoff/backoff_backoff.go", []byte("package backoff\n\nfunc Backoff() {}\n"+strings.Repeat("// backoff backoff\n", 50)))
	putFile(t, st, sid, "notes/meeting.txt", []byte("backoff backoff backoff backoff backoff\n"))
	hits, err := ix.Search(context.Background(), sid, "backoff", 10)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	degradedSeen := false
	for _, h := range hits {
		found[h.Path] = h.Degraded
		if h.Degraded {
			degradedSeen = true
		} else if degradedSeen {
			t.Errorf("settled %s listed after a degraded hit: %q", h.Path, paths(hits))
		}
	}
	if d, ok := found["backoff/backoff_backoff.go"]; !ok || !d {
		t.Errorf("the new file: found %v degraded %v, want found, degraded (%q)", ok, d, paths(hits))
	}
	if d, ok := found["notes/meeting.txt"]; !ok || !d {
		t.Errorf("the changed file: found %v degraded %v, want found, degraded (%q)", ok, d, paths(hits))
	}
	if len(hits) == 0 || hits[0].Path != "retry/backoff.go" || hits[0].Degraded {
		t.Errorf("first hit %q, want the settled retry/backoff.go", paths(hits))
	}
	// Caught up, the new file is settled and ranks on its merits.
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	hits, err = ix.Search(context.Background(), sid, "backoff", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hits {
		if h.Degraded {
			t.Errorf("%s degraded after catching up", h.Path)
		}
	}
	if len(hits) == 0 || hits[0].Path != "backoff/backoff_backoff.go" {
		t.Errorf("after catching up: %q, want the new file first", paths(hits))
	}
}

// TestRankPathRestriction: SearchOptions.Path keeps the hits to one
// directory (or file), from the index and from reading files alike.
func TestRankPathRestriction(t *testing.T) {
	ix, st, sid := rankIndex(t, rankCorpus)
	check := func(what string, want []string) {
		t.Helper()
		hits, err := ix.SearchWith(context.Background(), sid, "client handshake http", 10, SearchOptions{Path: "net/http/"})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, h := range hits {
			if !strings.HasPrefix(h.Path, "net/http/") {
				t.Errorf("%s: %s outside net/http", what, h.Path)
			}
			got[h.Path] = true
		}
		for _, p := range want {
			if !got[p] {
				t.Errorf("%s: %s missing from %q", what, p, paths(hits))
			}
		}
	}
	check("indexed", []string{"net/http/client.go", "net/http/transport.go"})
	// net/httpx is not inside net/http.
	putFile(t, st, sid, "net/httpx/client_handshake.go", []byte("client handshake http\n"))
	putFile(t, st, sid, "net/http/cookie.go", []byte("client handshake http\n"))
	check("degraded", []string{"net/http/client.go", "net/http/cookie.go"})
	hits, err := ix.SearchWith(context.Background(), sid, "client", 10, SearchOptions{Path: "net/http/client.go"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Path != "net/http/client.go" {
		t.Errorf("restricted to one file: %q", paths(hits))
	}
	if hits, err := ix.SearchWith(context.Background(), sid, "client", 10, SearchOptions{Path: "no/such/dir"}); err != nil || len(hits) != 0 {
		t.Errorf("restricted to a missing directory: %q, %v", paths(hits), err)
	}
}

// TestRankAsOf: a past state is ranked by reading it, whatever the index
// holds now.
func TestRankAsOf(t *testing.T) {
	ix, st, sid := rankIndex(t, rankCorpus)
	before, err := st.Now()
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, st, sid, "retry/backoff.go", []byte("package retry\n\n// gone\n"))
	putFile(t, st, sid, "retry/jitter.go", []byte("package retry\n\n// backoff with jitter\nfunc jitterBackoff() {}\n"))
	if err := ix.CatchUp(sid); err != nil {
		t.Fatal(err)
	}
	hits, err := ix.SearchWith(context.Background(), sid, "exponential backoff", 10, SearchOptions{AsOf: before})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || hits[0].Path != "retry/backoff.go" || hits[0].Degraded || !strings.Contains(hits[0].Snippet, "exponentially") {
		t.Fatalf("as of before the change: %+v, want retry/backoff.go with its old content", hits)
	}
	for _, h := range hits {
		if h.Path == "retry/jitter.go" {
			t.Errorf("as of before it existed: %s found", h.Path)
		}
		if len(h.Explain) != numRankers {
			t.Errorf("%s: no explanation", h.Path)
		}
	}
	hits, err = ix.SearchWith(context.Background(), sid, "exponential", 10, SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 0 {
		t.Errorf("now: %q, want nothing (the word is gone)", paths(hits))
	}
	hits, err = ix.SearchWith(context.Background(), sid, "backoff", 10, SearchOptions{AsOf: before, Path: "notes"})
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].Path != "notes/meeting.txt" {
		t.Errorf("as of before, within notes: %q", paths(hits))
	}
}

func TestRankStopWordsOnly(t *testing.T) {
	ix, _, sid := rankIndex(t, rankCorpus)
	if _, err := ix.Search(context.Background(), sid, "the of and", 5); err == nil {
		t.Error("a query of stop words only: no error")
	}
}

// signalCorpus: each query's file is the one a person means, and another
// file wins on the words alone.
var signalCorpus = map[string][]byte{
	// A doc comment that says what the code does, against a file full of
	// the query's words in code.
	"sync/waitgroup.go":   []byte("package sync\n\n// A WaitGroup waits for a collection of goroutines to finish.\n// The main goroutine calls Add to set the number of goroutines to wait for.\ntype WaitGroup struct {\n\tn int\n}\n\nfunc (wg *WaitGroup) Wait() {}\n"),
	"trace/goroutines.go": []byte("package trace\n\nfunc goroutines() {\n\tcollection := finish(goroutines)\n\twait(collection)\n\tgoroutines := collection.goroutines\n\tfinish(goroutines, wait)\n}\n"),
	// An identifier as typed, declared, against a path that holds its
	// parts and a declaration spelled otherwise.
	"strconv/number.go": []byte("package strconv\n\n// ParseInt interprets a string s in the given base.\nfunc ParseInt(s string, base int, bitSize int) (int64, error) {\n\treturn 0, nil\n}\n"),
	"net/parse.go":      []byte("package net\n\n// parseInt parses an int.\nfunc parseInt(s string) int {\n\treturn 0\n}\n"),
	// The code against its test, which says the words more often.
	"rate/limiter.go":      []byte("package rate\n\n// A Limiter controls how frequently events happen: a token bucket.\ntype Limiter struct {\n\ttokens float64\n}\n"),
	"rate/limiter_test.go": []byte("package rate\n\n// token bucket limiter tests: the token bucket limiter refills.\nfunc TestRefill(t *testing.T) {\n\t// token bucket limiter\n\tlimiter := bucket(token)\n}\n"),
	// A name made of the query's words abbreviated, against a path that
	// holds one of them whole.
	"runtime/netpoll.go": []byte("package runtime\n\n// Integrated network poller (platform-independent part).\nfunc netpoll() {}\n"),
	"net/network.go":     []byte("package net\n\nfunc network() {\n\tpoller := newPoller(network)\n}\n"),
	// The query names the kind of file.
	"tools/install.sh": []byte("#!/bin/sh\n# Install the tools.\ncp bin/* /usr/local/bin\n"),
	"tools/install.go": []byte("package tools\n\n// Install installs the tools.\nfunc Install() error { return nil }\n"),
	// The API against the deprecated one that wraps it.
	"io/ioutil/tempfile.go": []byte("package ioutil\n\n// TempDir creates a new temporary directory.\n//\n// Deprecated: As of Go 1.17, this function simply calls [os.MkdirTemp].\nfunc TempDir(dir, pattern string) (string, error) {\n\treturn os.MkdirTemp(dir, pattern)\n}\n"),
	"os/tempfile.go":        []byte("package os\n\n// MkdirTemp creates a new temporary directory in the directory dir.\nfunc MkdirTemp(dir, pattern string) (string, error) {\n\treturn mkdirTemp(dir, pattern)\n}\n"),
	// Hand-written code against generated tables.
	"unicode/tables.go": []byte("// Code generated by maketables; DO NOT EDIT.\n\npackage unicode\n\n// Letter case mapping tables: upper, lower, title case mapping.\nvar _CaseRanges = []CaseRange{}\nvar CaseRanges = _CaseRanges\n"),
	"unicode/letter.go": []byte("package unicode\n\n// Letter case mapping: ToUpper maps a letter to upper case.\nfunc ToUpper(r rune) rune { return r }\n"),
}

// TestRankCodeSignals: doc comments, identifiers as typed, tests and
// generated code each decide a ranking the words alone get wrong.
func TestRankCodeSignals(t *testing.T) {
	ix, _, sid := rankIndex(t, signalCorpus)
	for _, c := range []struct{ q, first, why string }{
		{"wait for a collection of goroutines to finish", "sync/waitgroup.go", "a doc comment holds the query"},
		{"ParseInt", "strconv/number.go", "the declaration as typed beats parseInt in a file named after a part"},
		{"token bucket limiter", "rate/limiter.go", "the code beats its test"},
		{"letter case mapping", "unicode/letter.go", "hand-written code beats generated tables"},
		{"network poller", "runtime/netpoll.go", "net + poll in a compound name"},
		{"install tools shell script", "tools/install.sh", "the extension's kind"},
		{"create a temporary directory", "os/tempfile.go", "the API beats its deprecated wrapper"},
	} {
		hits, err := ix.Search(context.Background(), sid, c.q, 5)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Path != c.first {
			t.Errorf("%q: got %q, want %s first (%s)\n%s", c.q, paths(hits), c.first, c.why, explainText(hits))
		}
	}
}

// explainText is the hits' explanations, for a failure's message.
func explainText(hits []Hit) string {
	var b strings.Builder
	for _, h := range hits {
		fmt.Fprintf(&b, "%s %.3f:", h.Path, h.Score)
		for _, c := range h.Explain {
			fmt.Fprintf(&b, " %s=%.2f(raw %.2f #%d)", c.Ranker, c.Score, c.Raw, c.Rank)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func TestCommentBlocks(t *testing.T) {
	for _, c := range []struct {
		path, data string
		want       []string
	}{
		{"a.go", "// Package a does\n// things.\npackage a\n\n/* one */ x := 1\n/*\n  two\n  lines */\nfunc f() {} // trailing is code\n\t// indented\n\t// block\n",
			[]string{"// Package a does\n// things.", " one ", "/*\n  two\n  lines ", "// indented\n\t// block"}},
		{"run.sh", "#!/bin/sh\n# Runs the tests\n# of the tree.\necho hi\n  # more\n", []string{"# Runs the tests\n# of the tree.", "# more"}},
		{"README.md", "# Title\n\nA paragraph\nof two lines.\n\n\nAnother.\n", []string{"# Title", "A paragraph\nof two lines.", "Another."}},
		{"data.bin", "// not a language\n", nil},
		// A kind codetok has no rules for: // and # line comments both.
		{"AMD64.rules", "// Lowering arithmetic\n(Add64 ...) => (ADDQ ...)\n# one more\n", []string{"// Lowering arithmetic", "# one more"}},
		{"tidy.go", "package modcmd\n\nvar cmdTidy = &Command{\n\tShort: \"tidy\",\n\tLong: `\nTidy makes sure go.mod\nmatches the source.\n\nIt removes unused modules.\n\t`,\n}\nvar s = `one line`\n",
			[]string{"Tidy makes sure go.mod\nmatches the source.", "It removes unused modules.\n\t"}},
		{"lib.py", "def f():\n    \"\"\"Parse the file.\"\"\"\n    x = 1\n    '''\n    Longer docs\n    here.\n    '''\n",
			[]string{"Parse the file.", "    Longer docs\n    here.\n    "}},
	} {
		var got []string
		commentBlocks(c.path, []byte(c.data), func(s, e int) { got = append(got, c.data[s:e]) })
		if strings.Join(got, "|") != strings.Join(c.want, "|") {
			t.Errorf("%s: blocks %q, want %q", c.path, got, c.want)
		}
	}
}

func TestIsDeprecated(t *testing.T) {
	for _, c := range []struct {
		s     string
		decls int
		want  bool
	}{
		{"// f does.\n//\n// Deprecated: use g.\nfunc f() {}\nfunc g() {}\n", 2, true},
		{"// Deprecated: use g.\nfunc f() {}\nfunc g() {}\nfunc h() {}\n", 3, false},
		{"/** @deprecated use g */\nfunction f() {}\n", 1, true},
		{"// f handles deprecated: fields\nfunc f() {}\n", 1, false},
		{"// Deprecated: nothing declared\n", 0, false},
	} {
		if got := isDeprecated(bytes.ToLower([]byte(c.s)), c.decls); got != c.want {
			t.Errorf("isDeprecated(%q, %d) = %v, want %v", c.s, c.decls, got, c.want)
		}
	}
}

func TestIsGenerated(t *testing.T) {
	for s, want := range map[string]bool{
		"// Code generated by mkall.sh; DO NOT EDIT.\n\npackage x\n": true,
		"// Copyright 2025\n\n// Code generated - DO NOT EDIT.\n":    true,
		"package x\n\n// DO NOT EDIT this by hand: see gen.go\n":     false,
		"package x\n": false,
	} {
		if got := isGenerated([]byte(s)); got != want {
			t.Errorf("isGenerated(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestSegment: a name made of pieces of the query's words (prefixes,
// acronyms, abbreviations) matches them; one word's prefix, or letters
// left over, do not.
func TestSegment(t *testing.T) {
	for _, c := range []struct {
		q, word string
		want    []string // the units matched, in query order
	}{
		{"network poller", "netpoll", []string{"network", "poller"}},
		{"register allocation", "regalloc", []string{"register", "allocation"}},
		{"memory allocator small object", "malloc", []string{"memory", "allocator"}},
		{"garbage collector mark phase", "mgcmark", []string{"garbage", "collector", "mark"}},
		{"minimal version selection", "mvs", []string{"minimal", "version", "selection"}},
		{"minimal version selection", "versions", nil},
		{"command line flags", "cmdflag", []string{"command", "flags"}},
		{"type Node interface Pos End", "node", nil}, // one word's own prefix
		{"minimal version selection", "vers", nil},   // a trailing letter is no piece
		{"parse source", "parse", nil},
		{"assignability rules", "reassign", nil}, // r (rules), e left over
		{"calling C code from the Go runtime", "cgocall", []string{"calling", "code", "go"}},
	} {
		r, err := parseQuery(c.q, "")
		if err != nil {
			t.Fatal(err)
		}
		bits := segment(c.word, r.pieces)
		var got []string
		for i, u := range r.units {
			if bits&(1<<i) != 0 {
				got = append(got, u.whole)
			}
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%q in %q: units %q, want %q", c.word, c.q, got, c.want)
		}
	}
}

// TestDocScoreNonASCII: content whose lowercase is shorter (İ -> i) is
// scored by its comment blocks, not past them.
func TestDocScoreNonASCII(t *testing.T) {
	r, err := parseQuery("istanbul time zone", "")
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("package tz\n\n" + strings.Repeat("// İİİİ\nvar _ = 0\n", 50) + "// Istanbul time zone rules.\nvar x = 1\n")
	if s := docScore("tz/zone.go", data, bytes.ToLower(data), r); math.Abs(s-0.84) > 1e-9 {
		t.Errorf("docScore = %v, want 0.84 (every word in the last comment, one such block)", s)
	}
	if _, s := snippet(data, bytes.ToLower(data), r.needles); !strings.Contains(s, "Istanbul time zone") {
		t.Errorf("snippet %q, want the comment naming the query", s)
	}
}

// TestQueryUnits: identifiers as typed are units (a compound keeps its
// stop words); declaration keywords are dropped from code, not prose.
func TestQueryUnits(t *testing.T) {
	for q, want := range map[string]string{
		"AfterFunc":                   "afterfunc[after func]*",
		"function inlining budget":    "function[function] inlining[inlining] budget[budget]",
		"func Stable(data Interface)": "stable[stable]* data[data] interface[interface]*",
		"type g struct stackguard0":   "stackguard0[stackguard]*",
		"wait for the goroutines":     "wait[wait] goroutines[goroutines]",
		"type checker":                "type[type] checker[checker]",
	} {
		var got []string
		for _, u := range queryUnits(q) {
			s := u.whole + "[" + strings.Join(u.parts, " ") + "]"
			if u.cased {
				s += "*"
			}
			got = append(got, s)
		}
		if strings.Join(got, " ") != want {
			t.Errorf("%q: units %q, want %q", q, strings.Join(got, " "), want)
		}
	}
}

// TestDocScoreManyBlocks: a file that discusses the query in many
// comments scores above one that says it once, as well.
func TestDocScoreManyBlocks(t *testing.T) {
	r, err := parseQuery("goroutine stack growth", "")
	if err != nil {
		t.Fatal(err)
	}
	once := []byte("package a\n\n// Goroutine stack growth.\nfunc f() {}\n")
	many := []byte("package a\n\n// Goroutine stack growth.\nfunc f() {}\n" + strings.Repeat("// The goroutine's stack.\nvar _ = 0\n", 5))
	s1, s5 := docScore("a/once.go", once, bytes.ToLower(once), r), docScore("a/many.go", many, bytes.ToLower(many), r)
	if math.Abs(s1-0.84) > 1e-9 || math.Abs(s5-1) > 1e-9 {
		t.Errorf("docScore once %v, many %v; want 0.84 (0.8 + 0.2/5) and 1", s1, s5)
	}
}

// TestRankFileKinds: a short file of another kind than the tree's code
// (a shell script, Markdown notes) that holds few of the query's words
// is not among the text ranker's best hundred, all Go files that say
// them more often; the kind ranker makes it a candidate, and the query's
// words for its kind rank it. It failed before the kind ranker: neither
// file was among the hits.
func TestRankFileKinds(t *testing.T) {
	files := map[string][]byte{
		"run.bash":             []byte("#!/usr/bin/env bash\nset -e\n# Run all the tests of the tree.\ngo test std cmd\n"),
		"compiler/DESIGN.md":   []byte("# Phases\n\nThe compiler parses, type checks, then lowers to SSA.\n"),
		"compiler/phases/x.go": []byte("package phases\n"),
	}
	for i := range 150 {
		files[fmt.Sprintf("pkg%d/runner.go", i)] = []byte(fmt.Sprintf("package pkg%d\n\n// runTests runs the tests; the tests run in order, tests after tests.\n// The compiler phases: parse, type check, lower.\nfunc runTests%d() {}\n", i, i))
	}
	ix, _, sid := rankIndex(t, files)
	for _, c := range []struct{ q, want string }{
		{"shell script that runs the tests", "run.bash"},
		{"compiler phases design notes markdown", "compiler/DESIGN.md"},
	} {
		hits, err := ix.Search(context.Background(), sid, c.q, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(hits) == 0 || hits[0].Path != c.want {
			t.Errorf("%q: got %q, want %s first\n%s", c.q, paths(hits), c.want, explainText(hits[:2]))
		}
	}
}

// TestRankGeneratedOfNamedKind: generated code counts less, but not when
// the query names its kind: "assembly" means the .s a generator wrote,
// not the Go beside it. It failed before (the .go file came first).
func TestRankGeneratedOfNamedKind(t *testing.T) {
	ix, _, sid := rankIndex(t, map[string][]byte{
		"sum/block_amd64.s":    []byte("// Code generated by command: go run block_amd64_asm.go. DO NOT EDIT.\n\n#include \"textflag.h\"\n\n// func block(p []byte)\nTEXT ·block(SB), NOSPLIT, $0-24\n\tMOVQ p_base+0(FP), SI\n\tRET\n"),
		"sum/block_generic.go": []byte("package sum\n\n// block sums a block of p; on amd64 the assembly version is used.\nfunc blockGeneric(p []byte) {}\n"),
		"sum/block_amd64.go":   []byte("package sum\n\n// block sums a block of p, on amd64.\n//\n//go:noescape\nfunc block(p []byte)\n"),
	})
	hits, err := ix.Search(context.Background(), sid, "sum block amd64 assembly", 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) == 0 || hits[0].Path != "sum/block_amd64.s" {
		t.Errorf("got %q, want sum/block_amd64.s first\n%s", paths(hits), explainText(hits))
	}
}

func TestQueryKinds(t *testing.T) {
	for _, c := range []struct {
		q    string
		want []string
	}{
		{"amd64 assembly IndexByte", []string{".asm", ".s"}},
		{"C header", []string{".c", ".h", ".hpp"}},
		{"design notes", []string{".md", ".rst", "readme"}},
		{"how the scheduler works", defaultKinds},
	} {
		if got := queryKinds(c.q); strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("queryKinds(%q) = %q, want %q", c.q, got, c.want)
		}
	}
	named := namedKinds("the readme and the rules")
	for p, want := range map[string]bool{"README.vendor": true, "x/HACKING.md": true, "ssa/_gen/AMD64.rules": true, "ssa/rewrite.go": false} {
		if got := namesKind(named, p); got != want {
			t.Errorf("namesKind(%s) = %v, want %v", p, got, want)
		}
	}
}
