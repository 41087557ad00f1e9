package storeopen_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/wal"
	"github.com/padfs/padfs/session"
)

// TestRolledBackMetaPage: a damaged newest bbolt meta page makes bbolt
// fall back to the older one, silently losing the last fold. The fold
// record in wal/STATE catches it; fsck's RepairDir accepts it explicitly.
func TestRolledBackMetaPage(t *testing.T) {
	dir := t.TempDir()
	st, err := storeopen.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	pad, err := session.Wrap(st, nil).Create("rb")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if err := pad.Write(context.Background(), "f"+string(rune('a'+i)), strings.Repeat("x", 100*(i+1))); err != nil {
			t.Fatal(err)
		}
		if err := st.KV().(interface{ Flush() error }).Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, mvcc.StoreFile)
	fi, err := bolt.CheckFile(db)
	if err != nil {
		t.Fatal(err)
	}
	cur := fi.Metas[fi.Current]
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	// Flip a byte of the current meta page's checksum.
	b[int(cur.PageSize)*cur.Page+16+56] ^= 0xff
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = storeopen.OpenDir(dir)
	if !errors.Is(err, wal.ErrRolledBack) || !errors.Is(err, mvcc.ErrCorrupt) {
		t.Fatalf("OpenDir after a damaged newest meta page: %v; want store rolled back", err)
	}
	msg := err.Error()
	older := fi.Metas[1-fi.Current].TxID
	for _, want := range []string{"store rolled back", wal.StatePath(filepath.Join(dir, mvcc.WALDir)),
		fmt.Sprint("txid ", cur.TxID), fmt.Sprint("txid ", older), "fsck --repair"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
	t.Log(msg)
	probs, err := storeopen.RepairDir(dir)
	if err != nil || len(probs) != 1 || probs[0].Kind != mvcc.ProblemStore || probs[0].Repaired == "" {
		t.Fatalf("RepairDir: %+v, %v", probs, err)
	}
	st, err = storeopen.OpenDir(dir)
	if err != nil {
		t.Fatalf("open after accepting the rollback: %v", err)
	}
	st.Close()

	// A store file deleted under the log is refused too, not recreated empty.
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := storeopen.OpenDir(dir); !errors.Is(err, wal.ErrRolledBack) || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("OpenDir on an empty padfs.db: %v", err)
	}
}

func TestNotAURL(t *testing.T) {
	_, err := storeopen.Open(t.TempDir(), "mysql://x:secret@h/db")
	if err == nil || !strings.Contains(err.Error(), "not a postgres:// URL") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("Open with a mysql URL = %v; want a one-line refusal without the password", err)
	}
}
