package search

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"path"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search/codetok"
)

// Ranked search is hybrid: several rankers score the candidates, their
// scores are fused by a weighted sum, then the best candidates are
// re-ranked by reading their content.
//
//	ranker  what it scores                                      weight  scale
//	text    BM25 of the content's words (identifiers split,     0.8     / best
//	        stemmed; the index's text field)
//	decl    BM25 of the names the file declares (decl field)    0.3     / best
//	path    the query's units in the path: file name first,     1.5     0..1
//	        then its directory; exact, stem, prefix (an
//	        abbreviation: reg for register), common
//	        abbreviations (cmd, msg), infix (alloc in regalloc),
//	        and names made of pieces of the query's words
//	        (netpoll, malloc, mgcmark: rankabbrev.go); the
//	        extension by the words for its kind ("shell
//	        script", "assembly"); to the power 1.5, so that one
//	        word of four in a file name counts little
//	prox    re-rank: the most of the query's words in one       0.5     0..1
//	        400-byte window (squared), and the query as a
//	        phrase (as typed, or its words as text or as an
//	        identifier)
//	def     re-rank: the share of the query's units one name    1.2     0..1
//	        the file declares holds (its declarations read
//	        from its content), squared; a name the query
//	        spells exactly, case included, adds 0.2
//	doc     re-rank: the share of the query's words one         0.8     0..1
//	        comment block (or paragraph of prose) holds, each
//	        at the start of a word, squared (0.8), and how many
//	        blocks hold half of them (0.2, five or more: 1)
//
// The path and def rankers cover the query's units: its identifiers as
// typed. A compound (AfterFunc) is one unit, matched whole or, for less,
// by its parts (stop words included: After); a unit typed as an
// identifier (a capital, a compound) weighs twice a plain word, and a
// declared name spelled otherwise (parseInt for ParseInt) counts 0.7.
// Declaration keywords (func, type, struct) are no units.
//
// BM25 scores are normalized by the best candidate's; the others are
// absolute. The sum of a test file's (or test data's) parts counts 0.7,
// and so does generated code's (a "Code generated ... DO NOT EDIT." line,
// seen when re-ranking): a query means the code a person wrote. A file
// most of whose declarations are deprecated counts 0.8.
//
// Candidates are the union of each index ranker's best (the path's words
// are an index ranker too, for recall by name, and the kind ranker, for
// files of another kind than the code: rankkind.go). A file the index has
// not caught up with is scored by reading it, with statistics from the
// files read, and marked Degraded: degraded hits always come after the
// settled ones, whatever their scores, since those are not comparable.
// As of a past time (SearchOptions.AsOf) every file is read and scored
// that way, exactly, without the index.
const (
	// candidatesPerRanker is how many documents each index ranker returns.
	candidatesPerRanker = 100
	// rerankDepth is how many fused candidates (beyond k) are read and
	// re-ranked, and poolPerRanker how many of each first-pass ranker's
	// best are, wherever the fusion put them.
	rerankDepth   = 50
	poolPerRanker = 10
	// proxWindow is the window of the proximity ranker, in bytes.
	proxWindow = 400
	// maxOccurrences bounds the occurrences of a word the proximity ranker
	// looks at in one file.
	maxOccurrences = 2000
	// testPrior scales the score of test files and test data, and
	// generatedPrior that of generated code: code search means the code
	// a person wrote more often than its tests or a generator's output.
	testPrior      = 0.7
	generatedPrior = 0.7
	// deprecatedPrior scales a file most of whose declarations are
	// deprecated (io/ioutil's against os): the API a query means is the
	// one that replaced them.
	deprecatedPrior = 0.8
)

// Rankers, in the order of Hit.Explain.
const (
	rText = iota
	rDecl
	rPath
	rProx
	rDef
	rDoc
	numRankers
	// numFirstPass rankers need no content: they pick what is re-ranked.
	numFirstPass = rPath + 1
)

var rankerNames = [numRankers]string{"text", "decl", "path", "prox", "def", "doc"}
var rankerWeights = [numRankers]float64{0.8, 0.3, 1.5, 0.5, 1.2, 0.8}

// rankerNormalized: scores divided by the best candidate's (BM25 has no
// scale of its own).
var rankerNormalized = [numRankers]bool{true, true, false, false, false, false}

// Hit is one result of a ranked search.
type Hit struct {
	Path    string  `json:"path"`
	Score   float64 `json:"score"`
	Line    int     `json:"line,omitempty"`
	Snippet string  `json:"snippet"`
	// Degraded: the file changed after the index last saw it (or it has
	// not seen it); it was scored by reading it, on another scale than the
	// settled hits, and is listed after them.
	Degraded bool `json:"degraded"`
	// Explain is each ranker's part of Score.
	Explain []Contribution `json:"explain"`
}

// Contribution is one ranker's part of a hit's score.
type Contribution struct {
	Ranker string `json:"ranker"`
	// Raw is the ranker's own score (BM25 for text and decl; 0..1 for
	// path, prox, def and doc).
	Raw float64 `json:"raw"`
	// Rank is the hit's place among the candidates by this ranker alone
	// (1 is best; 0: the ranker did not score it).
	Rank int `json:"rank"`
	// Weight times Raw (normalized by the best candidate's for text and
	// decl) times the file's prior (0.7 for tests, test data and
	// generated code, 0.8 for mostly deprecated code, else 1) is Score.
	Weight float64 `json:"weight"`
	Score  float64 `json:"score"`
}

// SearchOptions refine SearchWith.
type SearchOptions struct {
	// Path restricts the search to this file or directory (relative to the
	// session's root; "" or "/": everything).
	Path string
	// AsOf, if not 0, ranks the files as they were at this HLC, reading
	// them all (exact, slower: no index).
	AsOf mvcc.HLC
}

// Search returns up to k files of session sid ranked by relevance to the
// words of q, each with a snippet from its current content. It stops
// with ctx's error (context.Canceled) when ctx is done: a control-socket
// client that went away.
func (ix *Index) Search(ctx context.Context, sid mvcc.SessionID, q string, k int) ([]Hit, error) {
	return ix.SearchWith(ctx, sid, q, k, SearchOptions{})
}

// rq is a parsed query.
type rq struct {
	text string
	// words are the query's words lowercased, stems their analyzed
	// forms (distinct, in order); needles are what a word looks like as a
	// substring of content (the stem, less a Porter "i" for "y").
	words, stems, needles []string
	// phrases are the query's words as a phrase, as text and as
	// identifiers (snake_case, concatenated).
	phrases [][]byte
	// units are what the path and declaration rankers cover: each
	// identifier of the query as typed, a word or a compound (AfterFunc).
	units      []unit
	unitWeight float64 // the units' weights' sum
	pieces     *segPieces
	// idents are the query's identifiers as typed.
	idents map[string]bool
	// comps caches the path components pathScore analyzed.
	comps   map[string]pathComp
	compsMu sync.Mutex // pathScore runs on several goroutines
	prefix  string
	// kinds are the kinds of file the query names (namedKinds).
	kinds map[string]bool
	// strongKind: a word of the query names a kind and nothing else
	// (strongKindWords).
	strongKind bool
}

func parseQuery(q, prefix string) (*rq, error) {
	r := &rq{text: q, prefix: strings.Trim(path.Clean("/"+prefix), "/"), idents: map[string]bool{}, comps: map[string]pathComp{}}
	for _, f := range strings.FieldsFunc(q, func(c rune) bool { return !isWordRune(c) }) {
		r.idents[f] = true
	}
	seen := map[string]bool{}
	for _, t := range codeAn.Analyze([]byte(q)) {
		if seen[string(t.Term)] {
			continue
		}
		seen[string(t.Term)] = true
		s := string(t.Term)
		r.stems = append(r.stems, s)
		r.words = append(r.words, strings.ToLower(q[t.Start:t.End]))
		n := s
		if len(n) > 4 && strings.HasSuffix(n, "i") {
			n = n[:len(n)-1]
		}
		r.needles = append(r.needles, n)
	}
	if len(r.stems) == 0 {
		return nil, errors.New("empty query (no words but stop words)")
	}
	r.kinds = namedKinds(q)
	for _, w := range r.words {
		r.strongKind = r.strongKind || strongKindWords[w]
	}
	r.units = queryUnits(q)
	r.pieces = queryPieces(r.units)
	for _, u := range r.units {
		r.unitWeight += u.weight
	}
	if len(r.words) > 1 {
		// As typed (a declaration pasted whole), then its words as text,
		// snake_case and one identifier, stop words included.
		raw := strings.Join(strings.Fields(strings.ToLower(q)), " ")
		r.phrases = append(r.phrases, []byte(raw))
		words := strings.FieldsFunc(raw, func(c rune) bool { return !isWordRune(c) })
		for _, sep := range []string{" ", "_", ""} {
			r.phrases = append(r.phrases, []byte(strings.Join(words, sep)))
		}
	}
	return r, nil
}

// unit is one identifier of a query: lowercased whole, and its parts
// with their stems. A compound's parts keep their stop words (After in
// AfterFunc): matching one part of a name is not matching the name.
type unit struct {
	typed, whole string
	parts, stems []string
	// cased: typed as an identifier (a capital, or a compound), so that
	// a declaration spelled otherwise is another name (ParseInt, parseInt).
	cased bool
	// weight is the unit's share of the query in the path and
	// declaration rankers: an identifier typed as one (MustCompile in
	// "func MustCompile(str string)") is what the query is about more
	// than a plain word.
	weight float64
}

const (
	// casedWeight is the weight of a unit typed as an identifier.
	casedWeight = 2
	// abbrevMatch is a path word's match of a query word it abbreviates.
	abbrevMatch = 0.8
	// compoundParts scales a path's match of a compound identifier's
	// parts, each on its own.
	compoundParts = 0.6
)

// queryUnits splits q into its identifiers; a lone stop word is none.
func queryUnits(q string) []unit {
	var us []unit
	var cur unit
	seen := map[string]bool{}
	codetok.Split([]byte(q), func(start, end, nparts int) {
		u := cur
		cur = unit{}
		u.typed = q[start:end]
		u.whole = strings.ToLower(u.typed)
		u.cased = u.typed != u.whole || nparts > 1
		u.weight = 1
		if u.cased {
			u.weight = casedWeight
		}
		if len(u.parts) == 0 || seen[u.whole] {
			return
		}
		if len(u.parts) == 1 && u.stems[0] == "" {
			return // a stop word
		}
		for i, st := range u.stems {
			if st == "" {
				u.stems[i] = u.parts[i]
			}
		}
		seen[u.whole] = true
		us = append(us, u)
	}, func(start, end int) {
		w := strings.ToLower(q[start:end])
		st := ""
		if ts := codeAn.Analyze([]byte(w)); len(ts) > 0 {
			st = string(ts[0].Term)
		}
		cur.parts = append(cur.parts, w)
		cur.stems = append(cur.stems, st)
	})
	// Keywords that introduce a declaration (func, type, struct, ...)
	// are syntax, not names, in a query that is code (an identifier
	// typed as one, or brackets) and has names too; in prose ("function
	// inlining budget", "type checker") they are words.
	code := strings.ContainsAny(q, "(){}[]*")
	for _, u := range us {
		code = code || u.cased
	}
	if !code {
		return us
	}
	names := us[:0:0]
	for _, u := range us {
		if !declKeywords[u.typed] {
			names = append(names, u)
		}
	}
	if len(names) > 0 {
		us = names
	}
	return us
}

// declKeywords are the words that introduce or shape a declaration in the
// languages codetok.Decls reads, as typed (lowercase).
var declKeywords = map[string]bool{
	"func": true, "type": true, "struct": true, "interface": true, "const": true, "var": true, "package": true,
	"def": true, "class": true, "function": true, "fn": true, "let": true, "impl": true, "trait": true, "enum": true,
	"pub": true, "static": true, "public": true, "private": true, "void": true, "typedef": true,
}

// mayName reports whether a declared name (lowercased) may match one of
// the query's units in defScore: every match there needs a unit's part,
// or its stem, to share its first three letters (all of a shorter one)
// with a word of the name.
func (r *rq) mayName(lname string) bool {
	for _, u := range r.units {
		for pi, w := range u.parts {
			if strings.Contains(lname, w[:min(3, len(w))]) {
				return true
			}
			if s := u.stems[pi]; strings.Contains(lname, s[:min(3, len(s))]) {
				return true
			}
		}
	}
	return false
}

// lower lowercases content for the re-rankers: ASCII only, which keeps
// offsets (docScore, snippet) and is several times faster than
// bytes.ToLower on non-ASCII text, unless a query word is not ASCII.
func (r *rq) lower(data []byte) []byte {
	for _, nd := range r.needles {
		for i := 0; i < len(nd); i++ {
			if nd[i] >= utf8.RuneSelf {
				return bytes.ToLower(data)
			}
		}
	}
	return lowerASCIIInto(getBuf(len(data)), data)
}

// lowerASCII is a copy of b with ASCII letters lowercased.
func lowerASCII(b []byte) []byte { return lowerASCIIInto(make([]byte, len(b)), b) }

// lowerASCIIInto writes b with ASCII letters lowercased to out (as long
// as b) and returns it. Eight bytes at a time: the re-rankers lowercase
// about a megabyte per query.
func lowerASCIIInto(out, b []byte) []byte {
	const (
		low7 = 0x7f7f7f7f7f7f7f7f
		high = 0x8080808080808080
		geA  = 0x3f3f3f3f3f3f3f3f // 0x80 - 'A': the high bit of c&0x7f + geA says c&0x7f >= 'A'
		gtZ  = 0x2525252525252525 // 0x80 - 'Z' - 1: ... says c&0x7f > 'Z'
	)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		h := x & low7
		// The high bit of each byte that is 'A'..'Z' (not one >= 0x80).
		upper := (h + geA) &^ (h + gtZ) &^ x & high
		binary.LittleEndian.PutUint64(out[i:], x|upper>>2)
	}
	for ; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

// within reports whether p is in the query's path restriction.
func (r *rq) within(p string) bool {
	return r.prefix == "" || p == r.prefix || strings.HasPrefix(p, r.prefix+"/")
}

// cand is a candidate being ranked.
type cand struct {
	path  string
	raw   [numRankers]float64
	pathw float64 // the index's path-word score: candidates only
	// declares: the file declares one of the query's identifiers whole
	// (re-ranked, wherever the fusion put it; the best few).
	declares float64
	// kind: the kind ranker's score (rankkind.go): the best few are
	// re-ranked too.
	kind  float64
	force bool
	n     *mvcc.Inode
	data  []byte
	read  bool   // data holds the content
	low   []byte // data lowercased (rq.lower), once re-ranked
	// contentPrior scales the sum for what the content says (generated,
	// deprecated); 0 until re-ranked.
	contentPrior float64
	// kindPrior scales the sum of a file of another kind than the query
	// names by a word that names nothing else (kindPrior); 0: 1.
	kindPrior float64
	score     float64
	part      [numRankers]float64
	rank      [numRankers]int
}

// SearchWith is Search with options.
func (ix *Index) SearchWith(ctx context.Context, sid mvcc.SessionID, q string, k int, o SearchOptions) ([]Hit, error) {
	if k <= 0 {
		k = 10
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := parseQuery(q, o.Path)
	if err != nil {
		return nil, err
	}
	var lastSeq uint64
	var at mvcc.HLC
	if err := ix.st.View(func(t *mvcc.ReadTx) error {
		if _, err := t.Header(sid); err != nil {
			return err
		}
		var err error
		lastSeq, at, err = t.LastEvent(sid)
		return err
	}); err != nil {
		return nil, err
	}
	if o.AsOf != 0 {
		var files []fileRef
		if err := ix.walkWithin(sid, r, o.AsOf, func(f fileRef) { files = append(files, f) }); err != nil {
			return nil, err
		}
		return ix.rankByReading(ctx, r, files, k, false)
	}
	// Without a usable index (worker down, damaged index) every file is
	// read and scored: degraded, not failed.
	pos, err := ix.be.position(sid)
	seq := pos.Seq
	if err != nil {
		ix.log.Warn("search: index unusable; scoring by reading files", "session", sid.String(), "err", err)
		seq = 0
	}
	ch := newChanges()
	if seq < lastSeq {
		if seq == 0 {
			ch.full = true
		} else if err := ix.st.View(func(t *mvcc.ReadTx) error {
			return t.Events(sid, seq, func(ev mvcc.Event) bool { ch.add(ev); return !ch.full })
		}); err != nil {
			return nil, err
		}
	}
	var settled []*cand
	changed := map[string]bool{} // found by the index, changed since
	if seq > 0 && !ch.full {
		res, err := ix.be.search(ctx, sid, rankQuery{Text: q, Prefix: r.prefix, Size: candidatesPerRanker})
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			ix.log.Warn("search: index unusable; scoring by reading files", "session", sid.String(), "err", err)
			ch.full = true
			res = nil
		}
		for _, h := range res {
			if ch.affects(h.id) {
				changed[h.id] = true
				continue
			}
			c := &cand{path: h.id, pathw: h.scores[rankPathw], declares: h.scores[rankDeclExact], kind: h.scores[rankKind]}
			c.raw[rText], c.raw[rDecl] = h.scores[rankText], h.scores[rankDecl]
			settled = append(settled, c)
		}
	}
	hits, err := ix.rankIndexed(ctx, sid, at, r, settled, k)
	if err != nil {
		return nil, err
	}
	// Files the index has not seen as they are now: read and scored,
	// listed after the settled ones.
	var files []fileRef
	if ch.full {
		if err := ix.walkWithin(sid, r, at, func(f fileRef) { files = append(files, f) }); err != nil {
			return nil, err
		}
	} else {
		paths := map[string]bool{}
		for p := range changed {
			paths[p] = true
		}
		for p := range ch.paths {
			paths[p] = true
		}
		for _, p := range ch.inos {
			paths[p] = true
		}
		for p := range paths {
			if n, err := ix.st.Walk(sid, p, at); err == nil && n.IsRegular() && r.within(p) {
				files = append(files, fileRef{p, n})
			}
		}
		for p := range ch.subtrees {
			_ = ix.walk(sid, p, at, func(f fileRef) {
				if !paths[f.path] && r.within(f.path) {
					paths[f.path] = true
					files = append(files, f)
				}
			})
		}
	}
	if len(files) > 0 {
		inHits := map[string]bool{}
		for _, h := range hits {
			inHits[h.Path] = true
		}
		rest := files[:0]
		for _, f := range files {
			if !inHits[f.path] {
				rest = append(rest, f)
			}
		}
		deg, err := ix.rankByReading(ctx, r, rest, k, true)
		if err != nil {
			return nil, err
		}
		hits = append(hits, deg...)
	}
	if len(hits) > k {
		hits = hits[:k]
	}
	return hits, nil
}

// walkWithin walks the files of the query's path restriction as of at.
func (ix *Index) walkWithin(sid mvcc.SessionID, r *rq, at mvcc.HLC, fn func(fileRef)) error {
	err := ix.walk(sid, r.prefix, at, fn)
	if r.prefix != "" && errors.Is(err, mvcc.ErrNotFound) {
		return nil // nothing there: no hits
	}
	return err
}

// rankIndexed fuses the index's candidates, reads the best and re-ranks
// them.
func (ix *Index) rankIndexed(ctx context.Context, sid mvcc.SessionID, at mvcc.HLC, r *rq, cs []*cand, k int) ([]Hit, error) {
	// Path scores for some 300 candidates, in parallel by chunks (one a
	// goroutine's hand-off would cost as much as a score).
	const chunk = 32
	if err := parallel(ctx, (len(cs)+chunk-1)/chunk, func(i int) error {
		for _, c := range cs[i*chunk : min(len(cs), (i+1)*chunk)] {
			c.raw[rPath] = pathScore(c.path, r)
			c.kindPrior = kindPrior(r, c.path)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	forceDeclarers(cs)
	forceKinds(cs)
	fuse(cs, numFirstPass)
	var pool []*cand
	for i, c := range cs {
		if inPool(c, i, k) {
			pool = append(pool, c)
		}
	}
	// The pool's files are read in parallel (50-80 of them; the store's
	// reads are independent), in the pool's order for what follows, into
	// pooled buffers, returned when the hits are made.
	defer func() {
		for _, c := range pool {
			putBuf(c.data)
			putBuf(c.low)
			c.data, c.low = nil, nil
		}
	}()
	if err := parallel(ctx, len(pool), func(i int) error {
		c := pool[i]
		// One read transaction for the walk and the content.
		return ix.st.View(func(t *mvcc.ReadTx) error {
			n, err := t.Walk(sid, c.path, at)
			if err != nil || !n.IsRegular() {
				return nil // gone since
			}
			var buf []byte
			if n.Size <= MaxTextSize {
				buf = getBuf(int(n.Size))
			}
			data, err := t.ContentInto(n, buf)
			if err != nil {
				return fmt.Errorf("search: read %s: %w", c.path, err)
			}
			c.n, c.data, c.read = n, data, true
			return nil
		})
	}); err != nil {
		return nil, err
	}
	top := pool[:0]
	for _, c := range pool {
		if c.read {
			top = append(top, c)
		}
	}
	return rerank(ctx, r, top, k, false)
}

// parallel runs fn(0) ... fn(n-1) on a few goroutines and returns the
// error of the lowest i that failed (what a loop in order would have
// returned), or ctx's error once ctx is done.
func parallel(ctx context.Context, n int, fn func(i int) error) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, max(4, runtime.GOMAXPROCS(0))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = fn(i)
			}
		}()
	}
	var err error
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(next)
	wg.Wait()
	if err != nil {
		return err
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return ctx.Err()
}

// rankByReading scores files by reading them all: BM25 over the fields
// the index would hold, with statistics of these files, then the same
// fusion and re-rank.
func (ix *Index) rankByReading(ctx context.Context, r *rq, files []fileRef, k int, degraded bool) ([]Hit, error) {
	type fieldStats struct {
		df     map[string]int
		length float64 // total analyzed length
		docs   int
	}
	var st [numIndexRankers]fieldStats
	for i := range st {
		st[i].df = map[string]int{}
	}
	type memDoc struct {
		c   *cand
		tf  [numIndexRankers]map[string]int
		len [numIndexRankers]int
	}
	want := map[string]bool{}
	for _, s := range r.stems {
		want[s] = true
	}
	idents := identTerms(r.text)
	for _, s := range idents {
		want[s] = true
	}
	count := func(toks analysis.TokenStream) (map[string]int, int) {
		m := map[string]int{}
		for _, t := range toks {
			if want[string(t.Term)] {
				m[string(t.Term)]++
			}
		}
		return m, len(toks)
	}
	var docs []*memDoc
	var textBytes, textTokens, allTextBytes float64
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		d := &memDoc{c: &cand{path: f.path, n: f.n}}
		d.tf[rankPathw], d.len[rankPathw] = count(wholeAn.Analyze([]byte(f.path)))
		if f.n.Size <= MaxTextSize {
			data, err := ix.st.ReadAll(f.n)
			if err != nil {
				return nil, fmt.Errorf("search: read %s: %w", f.path, err)
			}
			if !isBinary(data) {
				allTextBytes += float64(len(data))
				low := bytes.ToLower(data)
				hit := false
				for _, nd := range r.needles {
					if bytes.Contains(low, []byte(nd)) {
						hit = true
						break
					}
				}
				if hit {
					d.c.data, d.c.read = data, true
					d.tf[rankDecl], d.len[rankDecl] = count(wholeAn.Analyze(declText(f.path, data)))
					d.tf[rankText], d.len[rankText] = count(codeAn.Analyze(low)) // low is a copy: analysis may lowercase it in place
					textBytes += float64(len(data))
					textTokens += float64(d.len[rankText])
				}
			}
		}
		for i := range st {
			if i == rankText && !d.c.read {
				continue // estimated below
			}
			st[i].docs++
			st[i].length += float64(d.len[i])
			for t := range d.tf[i] {
				st[i].df[t]++
			}
		}
		if len(d.tf[rankPathw]) > 0 || d.c.read {
			docs = append(docs, d)
		}
	}
	n := float64(len(files))
	// Files without a query word count for the text field's average
	// length by their size.
	avg := [numIndexRankers]float64{}
	for i := range st {
		if st[i].docs > 0 {
			avg[i] = st[i].length / float64(st[i].docs)
		}
	}
	if textBytes > 0 && allTextBytes > 0 && n > 0 {
		avg[rankText] = allTextBytes * (textTokens / textBytes) / n
	}
	bm25 := func(i int, tf map[string]int, dl int) float64 {
		const k1, b = 1.2, bm25B
		var s float64
		for t, f := range tf {
			df := float64(st[i].df[t])
			idf := math.Log(1 + (n-df+0.5)/(df+0.5))
			norm := 1.0
			if avg[i] > 0 {
				norm = 1 - b + b*float64(dl)/avg[i]
			}
			s += idf * float64(f) * (k1 + 1) / (float64(f) + k1*norm)
		}
		return s
	}
	var cs []*cand
	for _, d := range docs {
		c := d.c
		c.raw[rText] = bm25(rankText, d.tf[rankText], d.len[rankText])
		c.raw[rDecl] = bm25(rankDecl, d.tf[rankDecl], d.len[rankDecl])
		c.pathw = bm25(rankPathw, d.tf[rankPathw], d.len[rankPathw])
		c.raw[rPath] = pathScore(c.path, r)
		c.kindPrior = kindPrior(r, c.path)
		for _, t := range idents {
			c.declares += float64(d.tf[rankDecl][t])
		}
		if c.raw[rText] == 0 && c.raw[rPath] == 0 && c.pathw == 0 {
			continue
		}
		cs = append(cs, c)
	}
	forceDeclarers(cs)
	fuse(cs, numFirstPass)
	var top []*cand
	for i, c := range cs {
		if !inPool(c, i, k) {
			continue
		}
		if !c.read {
			if c.n.Size > MaxTextSize {
				continue // found by name, too large to snippet; still a hit
			}
			data, err := ix.st.ReadAll(c.n)
			if err != nil {
				return nil, fmt.Errorf("search: read %s: %w", c.path, err)
			}
			c.data, c.read = data, true
		}
		top = append(top, c)
	}
	return rerank(ctx, r, top, k, degraded)
}

// forceDeclarers marks the poolPerRanker best declarers of the query's
// identifiers for the re-rank.
func forceDeclarers(cs []*cand) {
	forceBest(cs, poolPerRanker, func(c *cand) float64 { return c.declares })
}

// forceKinds marks the kind ranker's kindPool best for the re-rank.
func forceKinds(cs []*cand) {
	forceBest(cs, kindPool, func(c *cand) float64 { return c.kind })
}

// forceBest marks for the re-rank the n candidates of cs with the highest
// positive score (ties in cs's order); it never unmarks one.
func forceBest(cs []*cand, n int, score func(*cand) float64) {
	var best []*cand
	for _, c := range cs {
		if score(c) > 0 {
			best = append(best, c)
		}
	}
	sort.SliceStable(best, func(a, b int) bool { return score(best[a]) > score(best[b]) })
	for _, c := range best[:min(len(best), n)] {
		c.force = true
	}
}

// inPool reports whether c, i-th after the first fusion, is re-ranked.
func inPool(c *cand, i, k int) bool {
	if c.score == 0 && !c.force {
		return false // only a candidate of the trigrams of names, and no match
	}
	if i < k+rerankDepth || c.force {
		return true
	}
	for r := range numFirstPass {
		if c.rank[r] > 0 && c.rank[r] <= poolPerRanker {
			return true
		}
	}
	return false
}

// fuse scales the first nr rankers' raw scores (normalized by their
// best among cs, or as they are), sums them by weight and sorts cs by the
// sum (ties by path).
func fuse(cs []*cand, nr int) {
	for i := range nr {
		best := 1.0
		if rankerNormalized[i] {
			best = 0
			for _, c := range cs {
				best = max(best, c.raw[i])
			}
		}
		for _, c := range cs {
			c.part[i] = 0
			if best > 0 {
				c.part[i] = rankerWeights[i] * c.raw[i] / best
			}
		}
		order := make([]*cand, 0, len(cs))
		for _, c := range cs {
			c.rank[i] = 0
			if c.raw[i] > 0 {
				order = append(order, c)
			}
		}
		sort.SliceStable(order, func(a, b int) bool {
			if order[a].raw[i] != order[b].raw[i] {
				return order[a].raw[i] > order[b].raw[i]
			}
			return order[a].path < order[b].path
		})
		for j, c := range order {
			c.rank[i] = j + 1
		}
	}
	for _, c := range cs {
		prior := 1.0
		if isTestPath(c.path) {
			prior = testPrior
		}
		if c.contentPrior > 0 {
			prior *= c.contentPrior
		}
		if c.kindPrior > 0 {
			prior *= c.kindPrior
		}
		// Scaled part by part, so that the parts still add up.
		c.score = 0
		for i := range nr {
			c.part[i] *= prior
			c.score += c.part[i]
		}
	}
	sort.SliceStable(cs, func(a, b int) bool {
		if cs[a].score != cs[b].score {
			return cs[a].score > cs[b].score
		}
		if cs[a].pathw != cs[b].pathw {
			return cs[a].pathw > cs[b].pathw
		}
		return cs[a].path < cs[b].path
	})
}

// rerank adds the proximity ranker to the candidates read (their content
// in data), fuses again and returns the best k as hits.
func rerank(ctx context.Context, r *rq, cs []*cand, k int, degraded bool) ([]Hit, error) {
	// Each candidate's scores depend on it alone: computed in parallel.
	if err := parallel(ctx, len(cs), func(i int) error {
		c := cs[i]
		if !isBinary(c.data) {
			c.low = r.lower(c.data)
			o := r.occurrences(c.low)
			c.raw[rProx] = proxScore(c.low, o, r)
			var decls int
			c.raw[rDef], decls = defScore(c.path, c.data, r)
			c.raw[rDoc] = docScoreOcc(c.path, c.data, c.low, o, r)
			c.contentPrior = 1
			// Generated code is not what a query means, unless it names
			// the kind the generator writes ("sha256 block amd64
			// assembly": the .s an assembler generator wrote).
			if isGenerated(c.data) && !namesKind(r.kinds, c.path) {
				c.contentPrior *= generatedPrior
			}
			if isDeprecated(c.low, decls) {
				c.contentPrior *= deprecatedPrior
			}
		}
		return nil
	}); err != nil {
		return nil, err
	}
	fuse(cs, numRankers)
	if len(cs) > k {
		cs = cs[:k]
	}
	hits := make([]Hit, len(cs))
	// Snippets read each hit's lines: in parallel too.
	if err := parallel(ctx, len(cs), func(j int) error {
		c := cs[j]
		h := Hit{Path: c.path, Score: c.score, Degraded: degraded}
		if !isBinary(c.data) {
			h.Line, h.Snippet = snippet(c.data, c.low, r.needles)
		}
		for i := range numRankers {
			h.Explain = append(h.Explain, Contribution{Ranker: rankerNames[i], Raw: c.raw[i], Rank: c.rank[i], Weight: rankerWeights[i], Score: c.part[i]})
		}
		hits[j] = h
		return nil
	}); err != nil {
		return nil, err
	}
	return hits, nil
}

// pathComp is a component of a path: lowercased, its words and their
// stems, and its weight in the path.
type pathComp struct {
	s      string
	words  []string
	weight float64
	// seg: the units (by bit) whose pieces one of its words is made of
	// (netpoll: network poller); see segment.
	seg uint32
}

// compAnalysis is what pathScore needs of a path component whatever the
// query: lowercased, its words (codetok's, whole, and analyzed) and its
// parts (codetok's, lowercased).
type compAnalysis struct {
	s            string
	words, parts []string
}

// compCache holds the analysis of the path components seen by ranked
// searches, process-wide: analyzing them was a tenth of a query's CPU,
// and a corpus has a few tens of thousands of distinct ones (emptied when
// it holds maxCompCache).
var compCache = struct {
	sync.Mutex
	m map[string]*compAnalysis
}{m: map[string]*compAnalysis{}}

const maxCompCache = 1 << 17

func analyzeComp(comp string) *compAnalysis {
	compCache.Lock()
	a := compCache.m[comp]
	compCache.Unlock()
	if a != nil {
		return a
	}
	a = &compAnalysis{s: strings.ToLower(comp)}
	for _, w := range codetok.Words(comp, true) {
		a.words = append(a.words, strings.ToLower(w))
	}
	for _, t := range wholeAn.Analyze([]byte(comp)) {
		a.words = append(a.words, string(t.Term))
	}
	for _, w := range codetok.Words(comp, false) {
		a.parts = append(a.parts, strings.ToLower(w))
	}
	compCache.Lock()
	if len(compCache.m) >= maxCompCache {
		clear(compCache.m)
	}
	compCache.m[comp] = a
	compCache.Unlock()
	return a
}

// pathScore is the path ranker: for each query unit, its best match
// among the path's components (the file name, without extension, counts
// fully, its directory 0.7, directories above 0.4), averaged over the
// query's units by weight, to the power 1.5.
func pathScore(p string, r *rq) float64 {
	comps := strings.Split(p, "/")
	base := comps[len(comps)-1]
	if i := strings.IndexByte(base, '.'); i > 0 {
		comps[len(comps)-1] = base[:i]
	}
	cs := make([]pathComp, 0, len(comps))
	for i := len(comps) - 1; i >= 0; i-- {
		w := 0.4
		switch len(comps) - 1 - i {
		case 0:
			w = 1
		case 1:
			w = 0.7
		}
		r.compsMu.Lock()
		c, ok := r.comps[comps[i]]
		r.compsMu.Unlock()
		if !ok {
			a := analyzeComp(comps[i])
			c = pathComp{s: a.s, words: slices.Clip(a.words)}
			for _, w := range a.parts {
				c.seg |= segment(w, r.pieces)
			}
			r.compsMu.Lock()
			r.comps[comps[i]] = c
			r.compsMu.Unlock()
		}
		c.weight = w
		cs = append(cs, c)
	}
	// The extension, as the words that name its kind: "shell script",
	// "assembly" in a query mean a file of that kind.
	if kw := fileKindWords(p); kw != nil {
		cs = append(cs, pathComp{words: kw, weight: kindWeight})
	}
	// A unit's match is its best among the components, a compound's the
	// better of the whole (afterfunc) and the mean of its parts'.
	var total float64
	for ui, u := range r.units {
		var whole float64
		var parts float64
		for pi, word := range u.parts {
			stem := u.stems[pi]
			abbrevs := abbreviations()[stem]
			var best float64
			for _, c := range cs {
				m := wordMatch(c, word, stem, abbrevs)
				if ui < maxSegUnits && c.seg&(1<<ui) != 0 {
					m = max(m, abbrevMatch)
				}
				best = max(best, m*c.weight)
				if pi == 0 && len(u.parts) > 1 {
					for _, w := range c.words {
						if w == u.whole {
							whole = max(whole, c.weight)
						}
					}
				}
			}
			parts += best
		}
		parts /= float64(len(u.parts))
		if len(u.parts) > 1 {
			// An identifier is a name, not a bag of words: its parts
			// apart (parse/int.go for ParseInt) are weak evidence.
			parts *= compoundParts
		}
		total += u.weight * max(whole, parts)
	}
	if r.unitWeight == 0 {
		return 0
	}
	s := total / r.unitWeight
	return s * math.Sqrt(s)
}

// wordMatch is how well a query word (and its stem) matches path
// component c: exactly or by stem 1, by abbreviation 0.8, inside a
// compound 0.6, by a common prefix up to 0.4. abbrevs are the stem's
// abbreviations().
func wordMatch(c pathComp, word, stem string, abbrevs []string) float64 {
	var m float64
	for _, w := range c.words {
		switch {
		case w == word || w == stem:
			m = max(m, 1)
		case len(w) >= 3 && (strings.HasPrefix(word, w) || strings.HasPrefix(w, stem)):
			m = max(m, abbrevMatch) // abbreviation (reg, register) or a longer form
		case slices.Contains(abbrevs, w):
			m = max(m, abbrevMatch) // cmd for command
		}
	}
	if m == 0 && len(stem) >= 4 && strings.Contains(c.s, stem) {
		m = 0.6 // inside a compound name: alloc in regalloc
	}
	if m == 0 && len(word) >= 3 {
		if p := commonPrefix(c.s, word); p >= 3 {
			m = 0.4 * min(1, float64(p)/4) // reg in regalloc
		}
	}
	return m
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// isTestPath: a test file or test data, which a query means less often
// than the code it tests.
func isTestPath(p string) bool {
	base := path.Base(p)
	if strings.Contains(base, "_test.") || strings.Contains(base, ".test.") || strings.Contains(base, ".spec.") ||
		strings.HasPrefix(base, "test_") {
		return true
	}
	// A directory of tests or test data. Not "test": often the code of a
	// test command (Go's cmd/go/internal/test).
	for _, d := range strings.Split(path.Dir(p), "/") {
		switch d {
		case "testdata", "tests", "__tests__":
			return true
		}
	}
	return false
}

// isGenerated reports whether data is generated code: a line near its top
// says "Code generated ... DO NOT EDIT." (Go's convention,
// go.dev/s/generatedcode, which other generators follow too).
func isGenerated(data []byte) bool {
	head := data[:min(len(data), 2048)]
	i := bytes.Index(head, []byte("DO NOT EDIT"))
	if i < 0 {
		return false
	}
	line := head[:i]
	if j := bytes.LastIndexByte(line, '\n'); j >= 0 {
		line = line[j+1:]
	}
	return bytes.Contains(bytes.ToLower(line), []byte("generated"))
}

// isDeprecated reports whether at least half of a file's declarations
// (decls of them) are marked deprecated: a comment line that starts
// "Deprecated:" (Go's convention) or an @deprecated tag (Javadoc, JSDoc).
// low is the content lowercased.
func isDeprecated(low []byte, decls int) bool {
	if decls == 0 {
		return false
	}
	// One scan for both forms ("deprecated" cannot overlap itself).
	word := []byte("deprecated")
	rare := rarestByte(word)
	n := 0
	for off := 0; ; {
		at := indexFrom(low, word, off, rare)
		if at < 0 {
			break
		}
		off = at + 1
		if at > 0 && low[at-1] == '@' {
			n++
			continue
		}
		if at+len(word) >= len(low) || low[at+len(word)] != ':' {
			continue
		}
		// The comment's text starts there: "// Deprecated:", "# Deprecated:".
		line := low[bytes.LastIndexByte(low[:at], '\n')+1 : at]
		if len(bytes.Trim(line, " \t/#*")) == 0 {
			n++
		}
	}
	return 2*n >= decls
}

// defScore is the declaration re-ranker (and the number of names the
// file declares): the largest share of the
// query's units (by weight) that one name declared in data holds (the
// unit as typed; else its whole or its words, or their stems' prefixes:
// Alloc for allocation, at 0.7 for an identifier), squared, and 0.2 more
// for a name the query spells exactly.
func defScore(p string, data []byte, r *rq) (float64, int) {
	var best float64
	exact := false
	decls := codetok.Decls(p, data)
	for _, name := range decls {
		if !exact && len(name) >= 3 && r.idents[name] {
			exact = true
		}
		lname := strings.ToLower(name)
		if !r.mayName(lname) {
			continue // most of a file's names: no match below can hold
		}
		words := codetok.Words(name, false)
		if len(words) == 0 {
			continue
		}
		for i, w := range words {
			words[i] = strings.ToLower(w)
		}
		var hit float64
		for _, u := range r.units {
			if u.cased && name == u.typed {
				hit += u.weight
				continue
			}
			if lname == u.whole || len(u.parts) > 1 && slices.Contains(words, u.whole) {
				// The name, spelled otherwise: another identifier if
				// the query spelled one.
				hit += u.weight * casedFactor(u)
				continue
			}
			n := 0
			for pi, w := range u.parts {
				s := u.stems[pi]
				for _, nw := range words {
					if nw == w || nw == s || len(s) >= 3 && strings.HasPrefix(nw, s) || len(nw) >= 3 && strings.HasPrefix(w, nw) {
						n++
						break
					}
				}
			}
			hit += u.weight * casedFactor(u) * float64(n) / float64(len(u.parts))
		}
		if r.unitWeight > 0 {
			best = max(best, hit/r.unitWeight)
		}
	}
	s := 0.8 * best * best
	if exact {
		s += 0.2
	}
	return s, len(decls)
}

// casedFactor is what a declared name that is not the query's
// identifier as typed counts: less for an identifier (a capital, a
// compound) than for a plain word.
func casedFactor(u unit) float64 {
	if u.cased {
		return 0.7
	}
	return 1
}

func isWordRune(c rune) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= utf8.RuneSelf
}

// snippet picks the line with the most distinct query words (then the
// most occurrences) and returns its number and text, trimmed.
func snippet(data, all []byte, terms []string) (int, string) {
	bestLine, bestScore, bestNum := []byte(nil), 0, 0
	num := 0
	// all is data lowercased; line by line only where that changed
	// lengths (some non-ASCII letters).
	same := len(all) == len(data)
	off := 0
	for len(data) > 0 {
		num++
		i := bytes.IndexByte(data, '\n')
		var line []byte
		if i < 0 {
			line, data = data, nil
		} else {
			line, data = data[:i], data[i+1:]
		}
		var low []byte
		if same {
			low = all[off : off+len(line)]
			off += len(line) + 1
		} else {
			low = bytes.ToLower(line)
		}
		score := 0
		for _, t := range terms {
			if c := bytes.Count(low, []byte(t)); c > 0 {
				score += 1000 + c
			}
		}
		if score > bestScore {
			bestLine, bestScore, bestNum = line, score, num
		}
	}
	if bestLine == nil {
		return 0, ""
	}
	s := strings.TrimSpace(string(bytes.ToValidUTF8(bestLine, []byte("\uFFFD"))))
	if len(s) > 160 {
		cut := 160
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return bestNum, s
}
