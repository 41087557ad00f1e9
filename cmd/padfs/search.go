package main

import (
	"encoding/json"
	"fmt"
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
		Use:   "search [--session ID] [-k N] [--json] QUERY...",
		Short: "Rank a session's files by BM25 relevance to QUERY, with a snippet each",
		Long: `Rank the files of a session by BM25 relevance to the words of QUERY and
print the best K with the line that matches best:

  SCORE  PATH:LINE: SNIPPET

With --json, one object per line: {"path", "score", "line", "snippet",
"degraded"}. "degraded" is true for a file that changed after the index last
saw it (the index is catching up); a path or snippet that is not valid UTF-8
also gets path_b64 (snippet_b64) with its bytes in base64: it is still found, from its current
content, but its score is approximate. Exit 1 when nothing matches.`,
		Example: "  padfs search --session $S retry backoff\n  padfs search -k 3 --json 'parse config' | jq .path",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			sessionFlag, _ := cmd.Flags().GetString("session")
			k, _ := cmd.Flags().GetInt("k")
			asJSON, _ := cmd.Flags().GetBool("json")
			if k < 1 || k > maxHits {
				return fmt.Errorf("-k %d: number of results out of range (1..%d)", k, maxHits)
			}
			return withApp(cmd, func(a *App) error {
				sid, err := pickSession(a, sessionFlag)
				if err != nil {
					return fmt.Errorf("search: %w", err)
				}
				ix, release, err := a.Index()
				if err != nil {
					return fmt.Errorf("search: %w", err)
				}
				defer release()
				hits, err := ix.Search(sid, strings.Join(args, " "), k)
				if err != nil {
					return fmt.Errorf("search: %w", err)
				}
				for _, h := range hits {
					if asJSON {
						b, err := json.Marshal(hitJSON{Hit: h, PathB64: jsonbytes.B64(h.Path), SnippetB64: jsonbytes.B64(h.Snippet)})
						if err != nil {
							return err
						}
						fmt.Fprintf(a.Out, "%s\n", b)
						continue
					}
					fmt.Fprintf(a.Out, "%7.3f  %s:%d: %s\n", h.Score, h.Path, h.Line, h.Snippet)
				}
				if len(hits) == 0 {
					return exitError{1}
				}
				return nil
			})
		},
	}
	c.Flags().String("session", "", "session id or name (default: the mounted session you are in)")
	c.Flags().IntP("k", "k", 10, "number of results")
	c.Flags().Bool("json", false, "one JSON object per hit")
	return c
}
