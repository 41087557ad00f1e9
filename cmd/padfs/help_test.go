package main

import (
	"os"
	"strings"
	"testing"
)

// TestHelpMatchesREADME: every option the README's command lines (its sh
// blocks) give a padfs command is one that command takes, so --help and
// the CLI reference cannot drift apart silently; and the points in time
// that log --since takes are spelled out in its help.
func TestHelpMatchesREADME(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	root := newRootCmd()
	checked := 0
	inSh := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
			continue
		case strings.HasPrefix(line, "```"):
			inSh = false
			continue
		}
		line = strings.TrimSpace(line)
		if !inSh || !strings.HasPrefix(line, "padfs ") {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = firstCommand(line)
		words := strings.Fields(line)[1:]
		var path []string
		for _, w := range words {
			if strings.HasPrefix(w, "-") || strings.ContainsAny(w, "[($'\"") {
				break
			}
			path = append(path, w)
		}
		cmd, _, err := root.Find(path)
		if err != nil || cmd == root && len(path) > 0 && path[0] != "completion" {
			t.Errorf("README: %q: no such command (%v)", line, err)
			continue
		}
		if cmd.DisableFlagParsing { // grep parses GNU grep's options itself
			continue
		}
		for _, w := range words {
			w = strings.TrimLeft(w, "[(")
			if !strings.HasPrefix(w, "--") || w == "--" {
				continue
			}
			name := strings.TrimPrefix(w, "--")
			name, _, _ = strings.Cut(name, "=")
			name = strings.TrimRight(name, "])|.")
			if name == "" {
				continue
			}
			if cmd.Flags().Lookup(name) == nil && cmd.InheritedFlags().Lookup(name) == nil && root.PersistentFlags().Lookup(name) == nil {
				t.Errorf("README: %q: %s has no --%s", line, cmd.CommandPath(), name)
			}
			checked++
		}
	}
	if checked < 40 {
		t.Fatalf("checked only %d options of the README's command lines", checked)
	}
	out, _, code := runPadfs(t, "log", "--help")
	for _, want := range []string{"CHECKPOINT", "checkpoint name or now"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("log --help lacks %q:\n%s", want, out)
		}
	}
}

// firstCommand cuts line at the first pipe, redirect, ; or & outside the
// [...] and (...) of a synopsis.
func firstCommand(line string) string {
	depth := 0
	for i, c := range line {
		switch c {
		case '[', '(':
			depth++
		case ']', ')':
			depth--
		case '|', '>', ';', '&':
			if depth <= 0 {
				return line[:i]
			}
		}
	}
	return line
}
