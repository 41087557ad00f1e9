package search

import (
	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/bleve/v2/analysis/analyzer/custom"
	"github.com/blevesearch/bleve/v2/analysis/lang/en"
	"github.com/blevesearch/bleve/v2/analysis/token/lowercase"
	"github.com/blevesearch/bleve/v2/analysis/token/porter"
	"github.com/blevesearch/bleve/v2/mapping"
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
)

// addCodeAnalyzers registers the code analyzers in im (they are stored
// with the index's mapping; queries name them).
func addCodeAnalyzers(im *mapping.IndexMappingImpl) {
	for name, tok := range map[string]string{codeAnalyzer: codetok.TokenizerName, wholeAnalyzer: codetok.WholeTokenizerName} {
		if err := im.AddCustomAnalyzer(name, map[string]interface{}{
			"type":          custom.Name,
			"tokenizer":     tok,
			"token_filters": []string{lowercase.Name, en.StopName, porter.Name},
		}); err != nil {
			panic(err) // a static configuration: fails every test if wrong
		}
	}
}

var codeAn, wholeAn analysis.Analyzer

func init() {
	im := bleve.NewIndexMapping()
	addCodeAnalyzers(im)
	codeAn = im.AnalyzerNamed(codeAnalyzer)
	wholeAn = im.AnalyzerNamed(wholeAnalyzer)
}

// analyzedField is a text field analyzed by one of the code analyzers,
// counted into its frequency map directly (as textField, without the
// allocation per term of bleve's TextField).
type analyzedField struct {
	name   string
	data   []byte
	an     analysis.Analyzer
	freqs  index.TokenFrequencies
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
	return f.freqs
}
func (f *analyzedField) Size() int { return 64 }

// Analyze runs on scorch's analysis goroutines. The analyzer lowercases
// in place: data must be the document's own copy.
func (f *analyzedField) Analyze() {
	f.freqs, f.length = termFreqs(f.an.Analyze(f.data))
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
