package storeopen_test

import (
	"os"
	"testing"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/internal/storeopen"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// TestOpenPostgres: processes open, write and close one PostgreSQL store
// one after another (as padfs commands on several hosts do), each seeing
// the sessions of the ones before.
func TestOpenPostgres(t *testing.T) {
	url := pgtest.DB(t)
	for i, name := range []string{"one", "two", "three"} {
		st, err := storeopen.Open(t.TempDir(), url)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreateSession(name, 0, 0); err != nil {
			t.Fatal(err)
		}
		ss, err := st.Sessions()
		if err != nil {
			t.Fatal(err)
		}
		if len(ss) != i+1 {
			t.Errorf("process %d sees %d sessions; want %d", i, len(ss), i+1)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
