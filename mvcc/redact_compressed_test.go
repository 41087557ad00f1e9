package mvcc

import (
	"bytes"
	"compress/gzip"
	"errors"
	"strings"
	"testing"
)

func gzipBytes(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write(data)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestFindCompressed: versions holding the needle compressed are listed
// once per file (with their count, newest path); text that merely starts
// like a zlib header is not; past the scan's budget files are listed as
// not inspected.
func TestFindCompressed(t *testing.T) {
	e := lcOpen(t)
	const needle = "sk-live-zipped-4242"
	sid := e.session("z")
	e.write(sid, "a.gz", gzipBytes(t, []byte("v1 "+needle)))
	e.write(sid, "a.gz", gzipBytes(t, []byte("v2 "+needle)))
	e.write(sid, "a.gz", gzipBytes(t, []byte("v3 clean")))
	e.write(sid, "clean.gz", gzipBytes(t, []byte("nothing")))
	e.write(sid, "HKEY.txt", []byte("HKEY_LOCAL_MACHINE\\Software "+strings.Repeat("text ", 40)))
	e.write(sid, "x.txt", []byte("x^ not zlib at all "+needle))
	e.write(sid, "cut.gz", gzipBytes(t, bytes.Repeat([]byte("abcdefgh"), 5000))[:60])

	got, err := e.st.FindCompressed(sid, needle)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Path != "a.gz" || got[0].Status != "contains" || got[0].Versions != 2 || got[0].Format != "gzip" ||
		got[1].Path != "cut.gz" || !strings.HasPrefix(got[1].Status, "could not inspect: ") {
		t.Fatalf("found %+v", got)
	}
	if !strings.Contains(got[0].Advice, "padfs redact") {
		t.Errorf("advice for a gzip file: %q", got[0].Advice)
	}

	defer func(b int64) { compressedBudget = b }(compressedBudget)
	compressedBudget = 1
	got, err = e.st.FindCompressed(sid, needle)
	if err != nil {
		t.Fatal(err)
	}
	spent := 0
	for _, f := range got {
		if strings.Contains(f.Status, "budget") {
			spent++
		}
	}
	if spent == 0 {
		t.Fatalf("with a budget of 1 byte: %+v", got)
	}
}

// TestFindCompressedUnknownSession: a session the store lacks is
// ErrNoSession, not an empty list.
func TestFindCompressedUnknownSession(t *testing.T) {
	e := lcOpen(t)
	if got, err := e.st.FindCompressed(testID(), "x"); !errors.Is(err, ErrNoSession) {
		t.Errorf("FindCompressed of an unknown session: %v, %v; want ErrNoSession", got, err)
	}
}
