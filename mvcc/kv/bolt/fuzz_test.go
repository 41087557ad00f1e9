package bolt

import "testing"

// FuzzCheckHeader: the pre-open check never panics, and what it accepts
// holds every page its current meta page says is in use.
func FuzzCheckHeader(f *testing.F) {
	// testdata/fuzz/FuzzCheckHeader holds the first pages of a real store.
	f.Add([]byte{}, int64(0))
	f.Add(make([]byte, 8192), int64(8192))
	f.Fuzz(func(t *testing.T, head []byte, size int64) {
		if size < int64(len(head)) || size > 1<<40 {
			return
		}
		fi, err := checkHeader(head, size)
		if err != nil || fi.Empty {
			return
		}
		cur := fi.Metas[fi.Current]
		if !cur.Valid || int64(cur.Pages)*int64(cur.PageSize) > size {
			t.Fatalf("accepted %d bytes with meta %+v", size, cur)
		}
	})
}
