package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/padfs/padfs/internal/jsonbytes"
	"github.com/padfs/padfs/search"
	"github.com/spf13/cobra"
)

func init() { addCommand(newSearchCmd) }

// maxHits bounds -k: each hit is read and snippeted from the store.
const maxHits = 10000

// hitJSON is a hit of --json; paths and snippets are bytes (internal/jsonbytes).
type hitJSON struct {
	search.Hit
	PathB64    string `json:"path_b64,omitempty"`
	SnippetB64 string `json:"snippet_b64,omitempty"`
}

func newSearchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "search [--session ID] [-k N] [--path P] [--asof T] [--explain] [--json] QUERY...",
		Short: "Rank a session's files by relevance to QUERY (code-aware, hybrid), with a snippet each",
		Long: `Rank the files of a session by relevance to the words of QUERY and print the
best K with the line that matches best:

  SCORE  PATH:LINE: SNIPPET

Several rankers score each file and their scores are added by weight, each
normalized to the best candidate's: text (BM25 of the content's words, with
identifiers split on camelCase, snake_case and digits, and stemmed), decl
(BM25 of the names the file declares: functions, types, classes, headings),
path (the query's words in the file name and its directories, including
abbreviations and parts of compound names), and, re-ranking the best
candidates by reading them, prox (the query's words close together, or as a
phrase), def (the share of the query one declared name holds; an identifier
as typed counts most) and doc (the share of the query's words one comment
block, or a paragraph of prose, holds). Tests, test data and generated code
count 0.7.

--explain prints under each hit every ranker's raw score, the hit's place by
that ranker alone, its weight and its part of SCORE. --path P keeps to the
file or directory P. --asof T ranks the files as they were at T (an HLC, RFC
3339 time, checkpoint, sequence number): every file of then is read, without
the index, exact but slower.

With --json, one object per line: {"path", "score", "line", "snippet",
"degraded", "explain": [{"ranker", "raw", "rank", "weight", "score"}...]}.
"degraded" is true for a file that changed after the index last saw it (the
index is catching up): it is still found, scored by reading it, and listed
after every settled hit. A path or snippet that is not valid UTF-8 also gets
path_b64 (snippet_b64) with its bytes in base64. Exit 1 when nothing matches.`,
		Example: "  padfs search --session $S retry backoff\n  padfs search --explain --path src/net register allocation\n  padfs search --asof before-refactor parse config\n  padfs search -k 3 --json 'parse config' | jq .path",
		Args:    cobra.MinimumNArgs(1),
		RunE:    runSearch,
	}
	c.Flags().String("session", "", "session id or name (default: the mounted session you are in)")
	c.Flags().IntP("k", "k", 10, "number of results")
	c.Flags().Bool("json", false, "one JSON object per hit, with each ranker's contribution")
	c.Flags().Bool("explain", false, "print each ranker's contribution under every hit")
	c.Flags().String("asof", "", "rank the files as they were at this point in time (HLC, RFC 3339 time, checkpoint, sequence number); reads every file, no index")
	c.Flags().String("path", "", "only files at or below this path")
	return c
}

func runSearch(cmd *cobra.Command, args []string) error {
	sessionFlag, _ := cmd.Flags().GetString("session")
	k, _ := cmd.Flags().GetInt("k")
	asJSON, _ := cmd.Flags().GetBool("json")
	explain, _ := cmd.Flags().GetBool("explain")
	asof, _ := cmd.Flags().GetString("asof")
	within, _ := cmd.Flags().GetString("path")
	if k < 1 || k > maxHits {
		return fmt.Errorf("-k %d: number of results out of range (1..%d)", k, maxHits)
	}
	return withApp(cmd, func(a *App) error {
		sid, err := pickSession(a, sessionFlag)
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		var o search.SearchOptions
		if within != "" {
			o.Path = sessionPath(a, sid, within)
		}
		if asof != "" {
			if o.AsOf, err = resolveAt(a, sid, "--asof", asof); err != nil {
				return fmt.Errorf("search: %w", err)
			}
		}
		ix, release, err := a.Index()
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		defer release()
		hits, err := ix.SearchWith(a.Context(), sid, strings.Join(args, " "), k, o)
		if err != nil {
			return fmt.Errorf("search: %w", err)
		}
		if err := printHits(a.Out, hits, asJSON, explain); err != nil {
			return err
		}
		if len(hits) == 0 {
			return exitError{1}
		}
		return nil
	})
}

// printHits prints one line per hit (and with explain each ranker's
// part under it), or one JSON object per line.
func printHits(w io.Writer, hits []search.Hit, asJSON, explain bool) error {
	for _, h := range hits {
		if asJSON {
			b, err := json.Marshal(hitJSON{Hit: h, PathB64: jsonbytes.B64(h.Path), SnippetB64: jsonbytes.B64(h.Snippet)})
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
				return err
			}
			continue
		}
		mark := ""
		if h.Degraded {
			mark = " (degraded)"
		}
		if _, err := fmt.Fprintf(w, "%7.3f  %s:%d: %s%s\n", h.Score, h.Path, h.Line, h.Snippet, mark); err != nil {
			return err
		}
		if explain {
			if _, err := fmt.Fprintf(w, "%s\n", explainLine(h)); err != nil {
				return err
			}
		}
	}
	return nil
}

// explainLine is --explain's line under a hit: per ranker, its part of the
// score = weight x raw normalized, with the raw score and the hit's place
// by that ranker alone.
func explainLine(h search.Hit) string {
	var b strings.Builder
	b.WriteString("         ")
	for i, c := range h.Explain {
		if i > 0 {
			b.WriteString("  ")
		}
		rank := "-"
		if c.Rank > 0 {
			rank = fmt.Sprintf("#%d", c.Rank)
		}
		fmt.Fprintf(&b, "%s %.3f (raw %.3f %s, w %.1f)", c.Ranker, c.Score, c.Raw, rank, c.Weight)
	}
	return b.String()
}
