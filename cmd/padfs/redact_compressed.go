package main

import (
	"fmt"
	"io"

	"github.com/padfs/padfs/mvcc"
)

// redactReceiptJSON is the receipt with the compressed files it cannot
// rewrite.
type redactReceiptJSON struct {
	*mvcc.RedactReceipt
	NotRedacted []mvcc.CompressedFile `json:"not_redacted,omitempty"`
	Retained    string                `json:"retained,omitempty"` // see retained
}

// printNotRedacted lists the files that hold the needle compressed, which a
// redaction leaves as they are, those it could not inspect, and what to do.
func printNotRedacted(w io.Writer, files []mvcc.CompressedFile) {
	var hold, unknown []mvcc.CompressedFile
	for _, f := range files {
		if f.Status == "contains" {
			hold = append(hold, f)
		} else {
			unknown = append(unknown, f)
		}
	}
	var advice []string
	seen := map[string]bool{}
	list := func(head string, files []mvcc.CompressedFile) {
		if len(files) == 0 {
			return
		}
		fmt.Fprintf(w, head, len(files))
		const show = 50
		for i, f := range files {
			if !seen[f.Advice] {
				seen[f.Advice] = true
				advice = append(advice, f.Advice)
			}
			if i == show {
				fmt.Fprintf(w, "  ... and %d more (--json lists them all)\n", len(files)-show)
			}
			if i >= show {
				continue
			}
			vs := "versions"
			if f.Versions == 1 {
				vs = "version"
			}
			status := ""
			if f.Status != "contains" {
				status = ", " + f.Status
			}
			fmt.Fprintf(w, "  %s  (%s, %d %s%s)\n", f.Path, f.Format, f.Versions, vs, status)
		}
	}
	list("NOT redacted: %d files hold the text inside compressed data, which padfs cannot rewrite:\n", hold)
	list("Not inspected: %d compressed files could not be read to their end; they may hold the text:\n", unknown)
	if len(advice) > 0 {
		fmt.Fprintln(w, "What to do:")
	}
	for _, a := range advice {
		fmt.Fprintf(w, "  - %s\n", a)
	}
}

// compressedHits counts the files that do hold the needle.
func compressedHits(files []mvcc.CompressedFile) int {
	n := 0
	for _, f := range files {
		if f.Status == "contains" {
			n++
		}
	}
	return n
}
