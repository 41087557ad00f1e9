package bolt

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

// fillStore writes n keys of 1 KiB to a new store at path and closes it.
func fillStore(t testing.TB, path string, n int) {
	t.Helper()
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(func(tx kv.Txn) error {
		for i := 0; i < n; i++ {
			if err := tx.Put(fmt.Appendf(nil, "key/%06d", i), bytes.Repeat([]byte{byte(i)}, 1024)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

const childEnv = "PADFS_BOLT_CHILD"

// TestTruncatedChild opens (and reads all of) the store named by the
// environment; TestTruncated runs it in a child process because a fault
// on the mapping that is not turned into an error kills the process.
// Modes: "open" (truncated before open), "under" (truncated while open).
func TestTruncatedChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("run by TestTruncated")
	}
	mode, rest, _ := strings.Cut(spec, ":")
	path, size, _ := strings.Cut(rest, ":")
	if mode == "open" {
		s, err := Open(path, Options{})
		if err != nil {
			fmt.Println("ERR", err)
			return
		}
		defer s.Close()
		fmt.Println("OPENED", scanAll(s))
		return
	}
	s, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	n, _ := strconv.ParseInt(size, 10, 64)
	if err := os.Truncate(path, n); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ERR", scanAll(s))
	// Writes fail too, and no later call crashes.
	fmt.Println("ERR", s.Update(func(tx kv.Txn) error { return tx.Put([]byte("key/000000"), []byte("x")) }))
}

func scanAll(s *Store) error {
	return s.View(func(r kv.Reader) error {
		return r.Scan(nil, nil, func(k, v []byte) (bool, error) {
			_ = bytes.Count(v, []byte{1}) // touch every byte
			return true, nil
		})
	})
}

func runChild(t *testing.T, spec string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTruncatedChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+spec)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "fatal error") || strings.Contains(string(out), "panic") {
		t.Fatalf("child %s: %v\n%s", spec, err, out)
	}
	return string(out)
}

func TestTruncated(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "orig.db")
	fillStore(t, orig, 2000)
	data, err := os.ReadFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := CheckFile(orig)
	if err != nil {
		t.Fatal(err)
	}
	cur := fi.Metas[fi.Current]
	need := int64(cur.Pages) * int64(cur.PageSize)
	size := int64(len(data))
	t.Logf("store: %d bytes, %d pages of %d in use (txid %d)", size, cur.Pages, cur.PageSize, cur.TxID)
	for _, n := range []int64{1, 15, 16, 80, 4095, 4096, 4097, 8191, 8192, 3 * 4096, size / 2, need - 4096, need - 1, need, size - 1} {
		if n <= 0 || n > size {
			continue
		}
		t.Run(strconv.FormatInt(n, 10), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "padfs.db")
			if err := os.WriteFile(path, data[:n], 0o600); err != nil {
				t.Fatal(err)
			}
			out := runChild(t, "open:"+path)
			switch {
			case n >= need && !strings.Contains(out, "OPENED <nil>"):
				t.Errorf("%d bytes still hold every page in use, want a good open:\n%s", n, out)
			case n < need && (!strings.Contains(out, "ERR ") || !strings.Contains(out, ErrCorrupt.Error()) || !strings.Contains(out, path)):
				t.Errorf("want a corrupt-store error naming %s:\n%s", path, out)
			}
			t.Log(strings.TrimSpace(strings.Split(out, "\n")[0]))
		})
	}
	// Truncated under an open store: reads fault on the mapping.
	path := filepath.Join(dir, "under.db")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	out := runChild(t, "under:"+path+":8192")
	if strings.Count(out, "ERR kv/bolt") != 2 || !strings.Contains(out, ErrCorrupt.Error()) {
		t.Errorf("reads and writes of a store truncated under it: want two ErrCorrupt:\n%s", out)
	}
	t.Log(out)
}

func TestCheckHeaderMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "padfs.db")
	fillStore(t, path, 10)
	fi, err := CheckFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Metas[0].Valid || !fi.Metas[1].Valid {
		t.Fatalf("metas %+v", fi.Metas)
	}
	if _, bad := fi.NewerMetaDamaged(); bad {
		t.Error("intact store reported a damaged newer meta")
	}
	if _, err := CheckFile(filepath.Join(t.TempDir(), "none")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
