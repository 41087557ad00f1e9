package search

import (
	"strings"
	"sync"
)

// Code names are concept words abbreviated and run together: regalloc
// (register allocation), netpoll (network poller), malloc (memory
// allocator), mgcmark (garbage collector mark). A path component (or a
// declared name's word) made of pieces of the query's words, each a
// prefix of one word, an acronym of consecutive words (gc, mvs, ecdh) or
// a common abbreviation (cfg, msg), matches those words.

// abbreviationsOf are common abbreviations in code that are not a
// prefix of the word they stand for (prefixes, like alloc or reg, need
// none), by word; abbreviations holds them by the word's stem.
var abbreviationsOf = map[string][]string{
	"configuration": {"cfg", "conf"}, "config": {"cfg"}, "configure": {"cfg", "conf"},
	"message": {"msg"}, "package": {"pkg"}, "pointer": {"ptr"}, "command": {"cmd"},
	"source": {"src"}, "destination": {"dst"}, "context": {"ctx"}, "transaction": {"txn", "tx"},
	"format": {"fmt"}, "compare": {"cmp"}, "comparison": {"cmp"}, "count": {"cnt"}, "index": {"idx"},
	"image": {"img"}, "manager": {"mgr"}, "temporary": {"tmp"}, "database": {"db"},
	"password": {"pwd", "passwd"}, "debug": {"dbg"}, "function": {"fn"}, "library": {"lib"},
	"regular": {"regexp", "regex"}, "synchronization": {"sync"}, "synchronize": {"sync"},
	"request": {"req"}, "response": {"resp"}, "certificate": {"cert"}, "authentication": {"auth"},
	"authorization": {"authz"}, "language": {"lang"}, "argument": {"arg", "argv"},
	"environment": {"env"}, "window": {"win"}, "millisecond": {"ms"}, "second": {"sec"},
}

// abbreviations is built on first use: codeAn is set by an init.
var abbreviations = sync.OnceValue(func() map[string][]string {
	m := map[string][]string{}
	for w, as := range abbreviationsOf {
		for _, t := range codeAn.Analyze([]byte(w)) {
			m[string(t.Term)] = append(m[string(t.Term)], as...)
		}
	}
	return m
})

// segPiece is a piece a name may be made of, and the query units (by
// bit) it stands for.
type segPiece struct {
	s     string
	units uint32
}

const (
	// maxSegUnits bounds the units the pieces cover (one bit each).
	maxSegUnits = 32
	// maxSegSteps bounds segment's search of one word.
	maxSegSteps = 4096
)

// queryPieces are the pieces of r's single-word units: each word's
// prefixes, its abbreviations, and the acronyms of two to four
// consecutive words.
func queryPieces(units []unit) *segPieces {
	var ps []segPiece
	single := func(i int) bool { return i < maxSegUnits && len(units[i].parts) == 1 }
	for i, u := range units {
		if !single(i) {
			continue
		}
		w := u.parts[0]
		for n := 1; n <= len(w); n++ {
			ps = append(ps, segPiece{w[:n], 1 << i})
		}
		for _, a := range abbreviations()[u.stems[0]] {
			ps = append(ps, segPiece{a, 1 << i})
		}
	}
	for i := range units {
		acr := ""
		var bits uint32
		for j := i; j < len(units) && j < i+4 && single(j); j++ {
			acr += units[j].parts[0][:1]
			bits |= 1 << j
			if j > i {
				ps = append(ps, segPiece{acr, bits})
			}
		}
	}
	sp := &segPieces{all: ps}
	for _, p := range ps {
		sp.first[p.s[0]] = append(sp.first[p.s[0]], p)
	}
	return sp
}

// segPieces are a query's pieces, and by their first byte.
type segPieces struct {
	all   []segPiece
	first [256][]segPiece
}

// segment finds the pieces word is best made of: most letters covered
// (at least three quarters, at least two pieces, one of three letters
// or more, one letter only as the first), and returns the units they
// stand for (0: none, or a word mostly one query word's prefix). A word
// that is an acronym of the query's words matches them too.
func segment(word string, sp *segPieces) uint32 {
	ps := sp.all
	for _, p := range ps {
		if p.s == word && p.units&(p.units-1) != 0 {
			return p.units // an acronym: mvs, ecdh
		}
	}
	if len(word) < 4 || len(word) > 24 || len(ps) == 0 {
		return 0
	}
	maxSkip := len(word) / 4
	bestCov, bestUnits := 0, uint32(0)
	steps := 0 // bounds the search: a pathological name gives up
	// A word that starts with a one-letter piece (m in malloc) must be
	// covered to its end: no letter skipped.
	oneLetter := false
	var rec func(pos, skipped int, used uint32, cov, pieces, longest int)
	rec = func(pos, skipped int, used uint32, cov, pieces, longest int) {
		if steps++; steps > maxSegSteps {
			return
		}
		if pos == len(word) {
			if pieces >= 2 && longest >= 3 && cov > bestCov {
				bestCov, bestUnits = cov, used
			}
			return
		}
		for _, p := range sp.first[word[pos]] {
			// One letter is a piece only at the start (m in malloc).
			if len(p.s) == 1 && pos > 0 {
				continue
			}
			if p.units&used == 0 && strings.HasPrefix(word[pos:], p.s) {
				oneLetter = len(p.s) == 1 || oneLetter && pos > 0
				rec(pos+len(p.s), skipped, used|p.units, cov+len(p.s), pieces+1, max(longest, len(p.s)))
				oneLetter = oneLetter && pos > 0
			}
		}
		if skipped < maxSkip && !oneLetter {
			rec(pos+1, skipped+1, used, cov, pieces, longest)
		}
	}
	rec(0, 0, 0, 0, 0, 0)
	for _, p := range ps {
		// A word that one query word's prefix mostly is matches it
		// as an abbreviation (pathScore), not as pieces.
		if 4*len(p.s) >= 3*len(word) && strings.HasPrefix(word, p.s) && p.units&(p.units-1) == 0 {
			return 0
		}
	}
	return bestUnits
}
