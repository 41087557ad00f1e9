package mvcc

import (
	"fmt"
	"testing"
)

// BenchmarkMetaCommit measures the CPU of metadata commits: each op creates
// one file, sets its mode and removes it again (three commits), the
// pattern of rm -rf and of git's lock files.
func BenchmarkMetaCommit(b *testing.B) {
	st, err := OpenDir(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("bench", 0, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("f%d", i)
		n, err := st.Create(h.ID, h.Root, name, Attr{Mode: 0o100644}, "")
		if err != nil {
			b.Fatal(err)
		}
		mode := uint32(0o600)
		if _, err := st.SetAttr(h.ID, n.Ino, SetAttr{Mode: &mode}); err != nil {
			b.Fatal(err)
		}
		if err := st.Remove(h.ID, h.Root, name, false); err != nil {
			b.Fatal(err)
		}
	}
}
