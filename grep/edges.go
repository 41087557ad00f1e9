package grep

// Word edges. GNU's \< holds where a word starts (no word character
// before, one after) and \> where one ends (one before, none after); Go's
// engine has only \b, which is either. Where the edge's neighbour in its
// sequence settles the other half (\< before word characters, as in
// \<word; \> after them) \b is exact, and that is what the engine sees.
// Any other edge is rendered as a named capture of \b: Go's engine still
// reads \b, which selects a superset of the lines, and the matcher
// confirms each line with the backtracker, which reads the capture's name
// as the edge itself (boundary.go).

const (
	wordStartCapture = "padfs_wordstart"
	wordEndCapture   = "padfs_wordend"
	bufEndCapture    = "padfs_bufend" // \' under -w (wordloop.go)
)

// resolveEdges sets the rendering of every \< and \> in n and reports
// whether any is left to the backtracker.
func resolveEdges(n *node, word runeSet) bool {
	switch n.kind {
	case nAssert:
		if n.edge != 0 { // an edge with no sequence around it (repeated)
			n.text = edgeCapture(n.edge)
			return true
		}
	case nRepeat:
		return resolveEdges(n.sub, word)
	case nGroup:
		left := false
		for _, seq := range n.alts {
			for i, x := range seq {
				if x.kind != nAssert || x.edge == 0 {
					left = resolveEdges(x, word) || left
					continue
				}
				var s runeSet
				ok := false
				if x.edge == '<' && i+1 < len(seq) {
					s, ok = firstSet(seq[i+1])
				} else if x.edge == '>' && i > 0 {
					s, ok = lastSet(seq[i-1])
				}
				if ok && s.subsetOf(word) {
					x.text = `\b`
				} else {
					x.text = edgeCapture(x.edge)
					left = true
				}
			}
		}
		return left
	}
	return false
}

func edgeCapture(edge rune) string {
	if edge == '<' {
		return `(?P<` + wordStartCapture + `>\b)`
	}
	return `(?P<` + wordEndCapture + `>\b)`
}

// firstSet is the set every match of n starts with; ok is false where n
// can match the empty string or starts with an assertion.
func firstSet(n *node) (set runeSet, ok bool) {
	return endSet(n, func(seq []*node) *node { return seq[0] })
}

// lastSet is the set every match of n ends with (see firstSet).
func lastSet(n *node) (set runeSet, ok bool) {
	return endSet(n, func(seq []*node) *node { return seq[len(seq)-1] })
}

func endSet(n *node, end func([]*node) *node) (runeSet, bool) {
	switch n.kind {
	case nSet:
		return n.set, true
	case nRepeat:
		if n.min >= 1 {
			return endSet(n.sub, end)
		}
	case nGroup:
		var set runeSet
		for _, seq := range n.alts {
			if len(seq) == 0 {
				return nil, false
			}
			s, ok := endSet(end(seq), end)
			if !ok {
				return nil, false
			}
			set = append(set, s...)
		}
		return set.norm(), true
	}
	return nil, false
}
