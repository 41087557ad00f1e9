package search

import (
	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/ngram"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/mapping"
	bsearch "github.com/blevesearch/bleve/v2/search"
	index "github.com/blevesearch/bleve_index_api"
	"github.com/padfs/padfs/search/codetok"
)

// The ranked-search fields of a document (see the table in index.go):
// the content, the names it declares and its path, each through a code
// analyzer: padfs's code tokenizer (identifiers split on camelCase,
// snake_case and digits; codetok) followed by bleve's lowercase, English
// stop word and Porter stemmer filters, so that "allocation" finds
// "allocator" and "alloc".
const (
	// codeAnalyzer: identifiers split into their parts (the text field).
	codeAnalyzer = "padfs_code"
	// wholeAnalyzer: parts and compound identifiers whole (decl, pathw).
	wholeAnalyzer = "padfs_code_whole"
	// pathGramAnalyzer: the trigrams of the path's words (pathg), so that
	// a word inside a compound name is found: alloc in regalloc.
	// pathGramQueryAnalyzer: the trigrams of the query's stems.
	pathGramAnalyzer      = "padfs_path_grams"
	pathGramQueryAnalyzer = "padfs_path_grams_query"
	trigramFilter         = "padfs_trigrams"
	// bm25B is BM25's length normalization for every field (bleve's
	// default is 0.75): source files that matter are often long (the
	// implementation a query means is the package's big file, its tests
	// and helpers the short ones), and a long file that uses a word as
	// often as a short one per line is not less about it. On the relevance
	// set MRR@10 rose steadily from b = 0.6 (0.716) through 0.4 (0.724),
	// 0.25 (0.734) to 0.1 (0.763); 0 (no normalization) ranked worse.
	// Scoring only: the index does not change with it.
	bm25B = 0.1
)

// addCodeAnalyzers registers the code analyzers in im (they are stored
// with the index's mapping; queries name them).
func addCodeAnalyzers(im *mapping.IndexMappingImpl) {
	if err := im.AddCustomTokenFilter(trigramFilter, map[string]interface{}{"type": ngram.Name, "min": 3.0, "max": 3.0}); err != nil {
		panic(err) // a static configuration: fails every test if wrong
	}
	for name, c := range map[string]struct {
		tok     string
		filters []string
	}{
		codeAnalyzer:          {codetok.TokenizerName, []string{lowercase.Name, en.StopName, porter.Name}},
		wholeAnalyzer:         {codetok.WholeTokenizerName, []string{lowercase.Name, en.StopName, porter.Name}},
		pathGramAnalyzer:      {codetok.WholeTokenizerName, []string{lowercase.Name, trigramFilter}},
		pathGramQueryAnalyzer: {codetok.TokenizerName, []string{lowercase.Name, en.StopName, porter.Name, trigramFilter}},
	} {
		if err := im.AddCustomAnalyzer(name, map[string]interface{}{
			"type":          custom.Name,
			"tokenizer":     c.tok,
			"token_filters": c.filters,
		}); err != nil {
			panic(err)
		}
	}
}

var codeAn, wholeAn, pathGramAn analysis.Analyzer

func init() {
	im := bleve.NewIndexMapping()
	addCodeAnalyzers(im)
	codeAn = im.AnalyzerNamed(codeAnalyzer)
	wholeAn = im.AnalyzerNamed(wholeAnalyzer)
	pathGramAn = im.AnalyzerNamed(pathGramAnalyzer)
	// Process-wide in bleve; padfs's indexes are the only ones.
	bsearch.BM25_b = bm25B
}

// analyzedField is a text field analyzed by one of the code analyzers,
// counted into its frequency map directly (without the
// allocation per term of bleve's TextField).
type analyzedField struct {
	name   string
	data   []byte
	an     analysis.Analyzer
	freqs  termCounts
	length int
}

func (f *analyzedField) Name() string                        { return f.name }
func (f *analyzedField) ArrayPositions() []uint64            { return nil }
func (f *analyzedField) Options() index.FieldIndexingOptions { return textOpts }
func (f *analyzedField) Value() []byte                       { return nil }
func (f *analyzedField) NumPlainTextBytes() uint64           { return uint64(len(f.data)) }
func (f *analyzedField) EncodedFieldType() byte              { return 't' }
func (f *analyzedField) AnalyzedLength() int                 { return f.length }
func (f *analyzedField) AnalyzedTokenFrequencies() index.TokenFrequencies {
	return f.freqs.tokenFrequencies()
}
func (f *analyzedField) Size() int { return 64 }

// Analyze runs on scorch's analysis goroutines. The analyzer lowercases
// in place: data must be the document's own copy.
func (f *analyzedField) Analyze() {
	m, n := analyzeFreqs(f.an, f.data)
	f.freqs, f.length = compactCounts(m), n
	f.data = nil
}

// termFreqs counts tokens as analysis.TokenFrequency does for a field
// without term vectors.
func termFreqs(toks analysis.TokenStream) (index.TokenFrequencies, int) {
	m := make(index.TokenFrequencies, len(toks)/4+1)
	tfs := make([]index.TokenFreq, 0, len(toks))
	for _, t := range toks {
		if tf, ok := m[string(t.Term)]; ok {
			tf.SetFrequency(tf.Frequency() + 1)
			continue
		}
		tfs = append(tfs, index.TokenFreq{Term: t.Term})
		tf := &tfs[len(tfs)-1]
		tf.SetFrequency(1)
		m[string(t.Term)] = tf
	}
	return m, len(toks)
}

// declText is the declared names of a file, one per line, for the decl
// field.
func declText(path string, data []byte) []byte {
	var b []byte
	for _, d := range codetok.Decls(path, data) {
		b = append(append(b, d...), '\n')
	}
	return b
}

// rankFields are the content fields of ranked search for a text file (data is the
// document's own copy: analysis lowercases it in place).
func rankFields(path string, data []byte) []*analyzedField {
	fs := []*analyzedField{{name: "text", data: data, an: codeAn}}
	if d := declText(path, data); len(d) > 0 {
		fs = append(fs, &analyzedField{name: "decl", data: d, an: wholeAn})
	}
	return fs
}

// identTerms are the decl field's terms of the query's identifiers as
// typed, whole (readFull -> readful, not read and full).
func identTerms(q string) []string {
	b := []byte(q)
	runs := map[[2]int]bool{}
	codetok.Split(b, func(start, end, _ int) { runs[[2]int{start, end}] = true }, func(int, int) {})
	var out []string
	seen := map[string]bool{}
	for _, t := range wholeAn.Analyze([]byte(q)) {
		if runs[[2]int{t.Start, t.End}] && !seen[string(t.Term)] {
			seen[string(t.Term)] = true
			out = append(out, string(t.Term))
		}
	}
	return out
}
