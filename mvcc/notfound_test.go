package mvcc

import (
	"errors"
	"testing"
)

// TestLookupNotFoundError: a name that is not there is ErrNotFound named
// by its quoted bytes, live entry index or not, now and in the past.
func TestLookupNotFoundError(t *testing.T) {
	st, sid, root := openTest(t)
	before, err := st.Now()
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, st, sid, root, "a", []byte("x"))
	for _, at := range []HLC{Latest, before} {
		_, err := st.Lookup(sid, root, "no\xffpe", at)
		if !errors.Is(err, ErrNotFound) || errors.Is(err, ErrExist) {
			t.Fatalf("Lookup at %v: %v, want ErrNotFound", at, err)
		}
		if want := `no such file or directory: "no\xffpe"`; err.Error() != want {
			t.Errorf("Lookup at %v: %q, want %q", at, err.Error(), want)
		}
	}
}
