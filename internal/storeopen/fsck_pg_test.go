package storeopen_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/session"
)

// TestFsckPostgres: a store written by one process checks clean in the
// next one (fsck reads every key in one scan).
func TestFsckPostgres(t *testing.T) {
	url := pgtest.DB(t)
	st, err := storeopen.Open(t.TempDir(), url)
	if err != nil {
		t.Fatal(err)
	}
	pad, err := session.Wrap(st, nil).Create("x")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := pad.Write(context.Background(), fmt.Sprintf("f%d", i), "data"); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	for _, fresh := range []bool{true, false} {
		st, err = storeopen.Open(t.TempDir(), url)
		if err != nil {
			t.Fatal(err)
		}
		if !fresh {
			st.Sessions() // warm the cache
		}
		r, err := st.Fsck(mvcc.FsckOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Problems) != 0 {
			t.Errorf("fsck (fresh %v): %d keys, problems %+v", fresh, r.Keys, r.Problems)
		}
		st.Close()
	}
}
