package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

// dump returns every row of [start, end) and the values of keys, read in
// one View, as "k=v" lines (absent keys: "k-").
func dump(t *testing.T, s kv.Store, start, end string, keys ...string) string {
	t.Helper()
	var b strings.Builder
	err := s.View(func(r kv.Reader) error {
		var e []byte
		if end != "" {
			e = []byte(end)
		}
		if err := r.Scan([]byte(start), e, func(k, v []byte) (bool, error) {
			fmt.Fprintf(&b, "%s=%s ", k, v)
			return true, nil
		}); err != nil {
			return err
		}
		b.WriteString("| ")
		for _, k := range keys {
			v, err := r.Get([]byte(k))
			if err != nil {
				return err
			}
			if v == nil {
				fmt.Fprintf(&b, "%s- ", k)
			} else {
				fmt.Fprintf(&b, "%s=%s ", k, v)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(b.String())
}

func putKV(t *testing.T, s kv.Store, kvs ...string) {
	t.Helper()
	if err := s.Update(func(tx kv.Txn) error {
		for i := 0; i < len(kvs); i += 2 {
			var err error
			if kvs[i+1] == "-" {
				err = tx.Delete([]byte(kvs[i]))
			} else {
				err = tx.Put([]byte(kvs[i]), []byte(kvs[i+1]))
			}
			if err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// The cache of one process never serves what another process changed or
// deleted since (a write, a prune, a purge or a hard forget elsewhere):
// each transaction first drops what the commits it has not seen touched.
// The keys are those of the mvcc layer's partitions (a session's inodes,
// chunks, meta).
func TestCacheAcrossProcesses(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	sid := strings.Repeat("s", 16)
	i1, i2, i3 := "I"+sid+"1", "I"+sid+"2", "I"+sid+"3"
	chunk, meta := "C"+strings.Repeat("h", 32), "Mhlc"
	putKV(t, a, i1, "v1", i2, "v2", chunk, "data", meta, "1")
	want := fmt.Sprintf("%s=v1 %s=v2 | %s=data %s=1 %s-", i1, i2, chunk, meta, i3)
	// Twice: the second is served by a's cache.
	for range 2 {
		if got := dump(t, a, "I"+sid, "I"+sid+"~", chunk, meta, i3); got != want {
			t.Fatalf("a reads %q; want %q", got, want)
		}
	}
	// Another process deletes, changes and adds rows a has cached (as
	// purge, prune and a commit elsewhere do).
	putKV(t, b, i1, "-", i2, "v2b", i3, "v3", chunk, "-", meta, "2")
	want = fmt.Sprintf("%s=v2b %s=v3 | %s- %s=2 %s=v3", i2, i3, chunk, meta, i3)
	if got := dump(t, a, "I"+sid, "I"+sid+"~", chunk, meta, i3); got != want {
		t.Fatalf("a reads %q after b's commit; want %q", got, want)
	}
	// A writer that does not log its changes (SQL by hand, an older
	// padfs): the trigger makes every process drop its whole cache.
	if _, err := b.Pool().Exec(context.Background(), "DELETE FROM padfs_kv WHERE k = $1", []byte(i2)); err != nil {
		t.Fatal(err)
	}
	want = fmt.Sprintf("%s=v3 | %s- %s=2 %s=v3", i3, chunk, meta, i3)
	if got := dump(t, a, "I"+sid, "I"+sid+"~", chunk, meta, i3); got != want {
		t.Fatalf("a reads %q after a DELETE by hand; want %q", got, want)
	}
	// a's own commits go into its cache, and b sees them.
	putKV(t, a, i1, "v1c")
	want = fmt.Sprintf("%s=v1c %s=v3 | %s- %s=2 %s=v3", i1, i3, chunk, meta, i3)
	for _, s := range []kv.Store{a, b} {
		if got := dump(t, s, "I"+sid, "I"+sid+"~", chunk, meta, i3); got != want {
			t.Fatalf("reads %q after a's commit; want %q", got, want)
		}
	}
}

// A View that began before a commit of its own process keeps its
// snapshot: the cache, which that commit moved on, does not leak the
// newer rows into it.
func TestCacheSnapshot(t *testing.T) {
	s := open(t, pgtest.DB(t))
	t.Cleanup(func() { s.Close() })
	putKV(t, s, "k", "old", "j", "old")
	dump(t, s, "", "", "k", "j") // into the cache
	started, committed := make(chan struct{}), make(chan struct{})
	done := make(chan string)
	go func() {
		var got []string
		err := s.View(func(r kv.Reader) error {
			v, err := r.Get([]byte("j"))
			got = append(got, string(v))
			close(started)
			<-committed
			for _, k := range []string{"k", "j"} {
				v, err = r.Get([]byte(k))
				if err != nil {
					return err
				}
				got = append(got, string(v))
			}
			return err
		})
		if err != nil {
			got = append(got, err.Error())
		}
		done <- strings.Join(got, " ")
	}()
	<-started
	putKV(t, s, "k", "new", "j", "new")
	close(committed)
	if got := <-done; got != "old old old" {
		t.Errorf("a View begun before a commit read %q; want old old old", got)
	}
	if got := dump(t, s, "", "", "k"); got != "j=new k=new | k=new" {
		t.Errorf("after the commit: %q", got)
	}
}

// Round trips: once a process has read or written rows, a View of them
// costs one round trip (its begin; its end is not waited for), and a
// commit two (begin under the writer lock, then the writes and COMMIT),
// however many rows they read.
func TestCacheRoundTrips(t *testing.T) {
	s := open(t, pgtest.DB(t))
	t.Cleanup(func() { s.Close() })
	sid := strings.Repeat("s", 16)
	var kvs []string
	for i := range 100 {
		kvs = append(kvs, fmt.Sprintf("D%s%03d", sid, i), "v")
	}
	putKV(t, s, kvs...)
	dump(t, s, "D"+sid, "D"+sid+"~") // the cache learns the gaps between them
	n0 := s.RoundTrips()
	if got := dump(t, s, "D"+sid, "D"+sid+"~", "D"+sid+"050", "D"+sid+"x"); !strings.HasSuffix(got, "| D"+sid+"050=v D"+sid+"x-") {
		t.Fatalf("read %q", got)
	}
	if n := s.RoundTrips() - n0; n != 1 {
		t.Errorf("a View of 100 cached rows took %d round trips; want 1", n)
	}
	n0 = s.RoundTrips()
	if err := s.Update(func(tx kv.Txn) error {
		n := 0
		if err := tx.Scan([]byte("D"+sid), []byte("D"+sid+"~"), func(k, v []byte) (bool, error) {
			n++
			return true, nil
		}); err != nil {
			return err
		}
		if n != 100 {
			return fmt.Errorf("scanned %d rows; want 100", n)
		}
		return tx.Put([]byte("D"+sid+"100"), []byte("w"))
	}); err != nil {
		t.Fatal(err)
	}
	if n := s.RoundTrips() - n0; n != 2 {
		t.Errorf("a commit that read 100 cached rows took %d round trips; want 2", n)
	}
	// Without a cache, the same View reads the rows from the server.
	nc, err := postgres.Open(context.Background(), pgtest.DB(t), postgres.Options{CacheBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	putKV(t, nc, "a", "1")
	n0 = nc.RoundTrips()
	dump(t, nc, "", "", "a")
	if n := nc.RoundTrips() - n0; n < 3 {
		t.Errorf("a View without a cache took %d round trips; want its begin, a page and a Get", n)
	}
}

// A scan without an end that begins inside a partition the cache reads
// ahead in (a session's inodes) goes on past that partition's end (it
// used to stop there: fsck, which reads every key in one scan, missed
// the keys after a session's inodes).
func TestScanPastPartition(t *testing.T) {
	s := open(t, pgtest.DB(t))
	t.Cleanup(func() { s.Close() })
	sid := strings.Repeat("s", 16)
	var kvs []string
	for i := range 20 {
		kvs = append(kvs, fmt.Sprintf("I%s%03d", sid, i), "v")
	}
	putKV(t, s, append(kvs, "M", "m", "N"+sid, "n")...)
	for range 2 {
		n := 0
		if err := s.View(func(r kv.Reader) error {
			return r.Scan([]byte("I"+sid+"005"), nil, func(k, v []byte) (bool, error) {
				n++
				return true, nil
			})
		}); err != nil {
			t.Fatal(err)
		}
		if n != 17 {
			t.Errorf("scan from the 6th inode to the end: %d rows; want 17", n)
		}
	}
}

// TestGetReadsGroup: a Get of a directory's live entry that misses reads
// the directory's entries (a page of them) into the cache: the next
// lookups there, of names present or not, need no read; another process's
// new entry is seen; a name past the page is read by itself.
func TestGetReadsGroup(t *testing.T) {
	url := pgtest.DB(t)
	a, b := open(t, url), open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	dir := "L" + strings.Repeat("g", 16) + "parent.."
	var kvs []string
	for i := range 200 {
		kvs = append(kvs, fmt.Sprintf("%sn%03d", dir, i), fmt.Sprint(i))
	}
	putKV(t, b, kvs...)
	if got := get(t, a, dir+"n005"); got != "5" {
		t.Fatalf("n005 = %q", got)
	}
	st0 := a.Stats()
	for k, want := range map[string]string{"n000": "0", "n100": "100", "n099x": "-", "a": "-"} {
		if got := get(t, a, dir+k); got != want {
			t.Errorf("%s = %q; want %q", k, got, want)
		}
	}
	if d := a.Stats().Sub(st0); d.Gets+d.Pages != 0 {
		t.Errorf("lookups in a directory read before: %v; want no read but the begins", d)
	}
	if got := get(t, a, dir+"n199"); got != "199" {
		t.Errorf("a name past the first page: %q", got)
	}
	putKV(t, b, dir+"n050x", "new")
	if got := get(t, a, dir+"n050x"); got != "new" {
		t.Errorf("another process's new entry reads %q", got)
	}
}

// A database gone back to an earlier state (restored from a backup): the
// cache holds a newer generation than the database's newest. A View reads
// the database, not the cache, and the next Update empties the cache.
func TestCacheDatabaseWentBack(t *testing.T) {
	url := pgtest.DB(t)
	a := open(t, url)
	t.Cleanup(func() { a.Close() })
	ctx := context.Background()
	putKV(t, a, "x", "1")
	var g1 int64
	if err := a.Pool().QueryRow(ctx, "SELECT max(gen) FROM padfs_changes").Scan(&g1); err != nil {
		t.Fatal(err)
	}
	putKV(t, a, "x", "2", "y", "2")
	if got := get(t, a, "x") + get(t, a, "y"); got != "22" {
		t.Fatalf("a reads %q; want 22", got)
	}
	// Back to g1, unlogged (as a restore is).
	c, err := a.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"SELECT set_config('padfs.logged', 'on', true)", "UPDATE padfs_kv SET v = '1' WHERE k = 'x'",
		"DELETE FROM padfs_kv WHERE k = 'y'", fmt.Sprintf("DELETE FROM padfs_changes WHERE gen > %d", g1)} {
		if _, err := c.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := get(t, a, "x") + get(t, a, "y"); got != "1-" {
		t.Errorf("after the database went back a View reads %q; want 1-", got)
	}
	putKV(t, a, "z", "3")
	if got := get(t, a, "x") + get(t, a, "y") + get(t, a, "z"); got != "1-3" {
		t.Errorf("after an Update a reads %q; want 1-3", got)
	}
}
