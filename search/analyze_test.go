package search

import (
	"reflect"
	"testing"
)

// The trigram field makes its frequency map each time scorch asks (twice
// a document: counting terms, then adding postings) and keeps none: the
// maps of a whole batch held from analysis to the segment's build were
// most of the index worker's heap. Both maps hold every trigram once,
// as key, with frequency 0 and no locations (all zap reads of an entry).
func TestTermsFieldMapsNotKept(t *testing.T) {
	data := []byte("func main() { fmt.Println(\"Hello, World\") }\n")
	tri, ok := contentTrigrams(data, false)
	if !ok {
		t.Fatal("no trigrams")
	}
	f := newTermsField("tri", tri, 3)
	f.Analyze()
	a, b := f.AnalyzedTokenFrequencies(), f.AnalyzedTokenFrequencies()
	if len(a) != len(tri)/3 || f.AnalyzedLength() != len(a) {
		t.Fatalf("%d terms, length %d; want %d", len(a), f.AnalyzedLength(), len(tri)/3)
	}
	if reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer() {
		t.Fatal("the field returned one map twice: it keeps it")
	}
	for i := 0; i < len(tri); i += 3 {
		term := string(tri[i : i+3])
		ta, tb := a[term], b[term]
		if ta == nil || tb == nil || ta.Frequency() != 0 || len(ta.Locations) != 0 || len(tb.Locations) != 0 {
			t.Fatalf("term %q: %+v, %+v", term, ta, tb)
		}
	}
	if _, ok := a["fmt"]; !ok {
		t.Fatalf("no trigram fmt in %d terms", len(a))
	}
}
