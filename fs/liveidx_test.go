package fs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/kvcount"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// `ls -l` of a directory that once held thousands of short-lived files and
// now holds 20 reads about as many keys as that of a directory that only
// ever held 20: the mount lists from the live-entry index. (Before it, the
// churned listing read a key per name the directory ever had: 5,000 more.)
func TestListingAfterChurnReadsLiveKeys(t *testing.T) {
	data := t.TempDir()
	var c *kvcount.Store
	st := openStoreOver(t, data, func(w *wal.Store) kv.Store { c = kvcount.New(w); return c })
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("churn", uint32(os.Getuid()), uint32(os.Getgid()))
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	mountAt(t, st, mnt, Options{Session: &h.ID, SpillDir: filepath.Join(data, "spill")})

	sh(t, mnt, `mkdir busy quiet && for d in busy quiet; do for i in $(seq -w 20); do : > $d/keep$i; done; done`)
	sh(t, mnt+"/busy", `for i in $(seq 5000); do : > tmp$i.o; done && rm tmp*.o`)
	keys := func(dir string) (int64, string) {
		t.Helper()
		before := c.Counts().Keys
		out := sh(t, mnt, "ls -l "+dir)
		return c.Counts().Keys - before, out
	}
	q, qout := keys("quiet")
	bk, bout := keys("busy")
	if strings.Count(bout, "keep") != 20 || strings.Count(qout, "keep") != 20 || strings.Contains(bout, "tmp") {
		t.Fatalf("ls -l busy:\n%s\nls -l quiet:\n%s", bout, qout)
	}
	t.Logf("ls -l read %d keys in the churned directory, %d in the quiet one", bk, q)
	if bk > q+40 {
		t.Fatalf("ls -l of 20 files in a directory that had 5,020 read %d keys; of one that only had 20, %d", bk, q)
	}
}
