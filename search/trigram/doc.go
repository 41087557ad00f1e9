// Package trigram plans trigram index queries for regular expressions:
// Plan turns a Go regexp syntax tree into a boolean query over byte
// trigrams that every text holding a match satisfies, so an index of the
// trigrams of each file can narrow the files a grep reads without ever
// dropping one that matches. Fold and Canon define the case folding that
// the index applies to content and the planner to -i patterns; the two
// must agree.
package trigram
