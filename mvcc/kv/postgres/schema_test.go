package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

// TestSchemaFromOlderPadfs: a database whose triggers an older padfs made
// (no WHEN clause) gets the triggers that skip padfs's own commits when
// this version opens it, and the writers that do not check the guard
// themselves are still checked: SQL by hand, and an older padfs's commit
// function (padfs_commit, kept for it) on a session another process holds.
func TestSchemaFromOlderPadfs(t *testing.T) {
	url := pgtest.DB(t)
	ctx := context.Background()
	old := open(t, url)
	if _, err := old.Pool().Exec(ctx, `DROP TRIGGER padfs_kv_changed ON padfs_kv; DROP TRIGGER padfs_kv_truncated ON padfs_kv;
		CREATE TRIGGER padfs_kv_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON padfs_kv FOR EACH STATEMENT EXECUTE FUNCTION padfs_kv_changed();
		DROP TRIGGER padfs_changes_guard ON padfs_changes;
		CREATE TRIGGER padfs_changes_guard BEFORE INSERT ON padfs_changes FOR EACH ROW EXECUTE FUNCTION padfs_changes_guard()`); err != nil {
		t.Fatal(err)
	}
	old.Close()

	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	var triggers string
	if err := a.Pool().QueryRow(ctx, `SELECT string_agg(tgname || ':' || (tgqual IS NOT NULL), ' ' ORDER BY tgname)
		FROM pg_trigger WHERE NOT tgisinternal`).Scan(&triggers); err != nil {
		t.Fatal(err)
	}
	if want := "padfs_changes_guard:true padfs_kv_changed:true padfs_kv_truncated:false"; triggers != want {
		t.Errorf("triggers (name:has WHEN) %q; want %q", triggers, want)
	}

	sid := strings.Repeat("s", 16)
	l, err := a.Acquire(ctx, "S", postgres.LeaseOptions{Host: "hosta", Pid: 11, Session: []byte(sid)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	putKV(t, a, "D"+sid+"k", "a0")
	if got := get(t, b, "D"+sid+"k"); got != "a0" {
		t.Fatalf("the other process reads %q; want a0", got)
	}
	// An older padfs's commit from b: the trigger checks the guard.
	part := []byte("D" + sid)
	_, err = b.Pool().Exec(ctx, `SELECT padfs_commit(1000000, 1, $1::bytea[], '', '{}', '{}', '', '', $2::bytea[], $3::bytea[], '{}')`,
		[][]byte{part}, [][]byte{[]byte("D" + sid + "k")}, [][]byte{[]byte("old")})
	if err == nil || !strings.Contains(err.Error(), "mounted read-write by pid 11 on host hosta") {
		t.Errorf("an older padfs's commit to the leased session: %v; want it refused, naming the holder", err)
	}
	// SQL by hand: logged as a change of everything, which the guard refuses.
	if _, err := b.Pool().Exec(ctx, "UPDATE padfs_kv SET v = 'sql' WHERE k = $1", []byte("D"+sid+"k")); err == nil {
		t.Errorf("SQL by hand changed the leased session")
	}
	// This version's commit from b: refused by its own check.
	err = b.Update(func(tx kv.Txn) error { return tx.Put([]byte("D"+sid+"k"), []byte("b")) })
	if !errors.Is(err, postgres.ErrHeld) {
		t.Errorf("another process's commit to the leased session: %v; want ErrHeld", err)
	}
	if got := get(t, a, "D"+sid+"k"); got != "a0" {
		t.Errorf("holder reads %q; want a0", got)
	}
	// Released: SQL by hand goes through, and every cache drops what it held.
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pool().Exec(ctx, "UPDATE padfs_kv SET v = 'sql' WHERE k = $1", []byte("D"+sid+"k")); err != nil {
		t.Fatal(err)
	}
	if got := get(t, a, "D"+sid+"k"); got != "sql" {
		t.Errorf("after SQL by hand a reads %q; want sql", got)
	}
}
