// Package postgres is a kv.Store in a PostgreSQL database, through pgx: the
// ordered keys of the mvcc layer as rows of one table, so that padfs
// processes on many hosts can share one store.
//
//	padfs_kv    (k bytea PRIMARY KEY, v bytea NOT NULL)   the keyspace; bytea sorts as bytes.Compare
//	padfs_lease (name text PRIMARY KEY, token, host, pid, since, expires)   one writer per session (lease.go)
//
// Transactions:
//
//   - A View is a REPEATABLE READ READ ONLY transaction whose snapshot is
//     taken when it begins; a Scan reads pages of rows in key order (keyset
//     pagination: ORDER BY k, then k > the last key), growing the page as
//     the callback keeps asking for more. In a process that holds a
//     session's lease, a View begins only at its first read that the
//     cache cannot serve by that lease: reads of the leased session's keys
//     need no round trip (localread.go).
//   - Updates are serialized across every process on the database by a
//     transaction-scoped advisory lock, so a READ COMMITTED transaction
//     that holds it reads everything committed before it and nothing
//     commits beside it. Writes are buffered in memory (reads see them) and
//     sent at commit (the change row with the lease checks, qLogChange;
//     one INSERT ... ON CONFLICT over arrays; one DELETE ... = ANY),
//     pipelined with the COMMIT: one round trip, which also
//     begins the next batch (beginning ahead, see queueAhead), so that
//     Updates one after another cost one round trip each. Statements use
//     generic plans (plan_cache_mode), and the other processes are
//     notified after the commit, once for the commits of a few
//     milliseconds (notify.go).
//   - Group commit: Updates that queue up while one is running join its
//     PostgreSQL transaction, each with its own undo (an Update whose fn
//     fails is rolled back alone); the batch commits when nobody is
//     waiting, and every Update in it returns after that COMMIT.
//
// A committed Update is as durable as PostgreSQL's COMMIT
// (synchronous_commit); Sync has nothing to add.
package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/padfs/padfs/mvcc/kv"
	"github.com/tidwall/btree"
)

// writerLock is the advisory lock key that serializes writers ("padfs kv").
const writerLock = 0x7061646673206b76

// Options tunes Open. The zero value is a good default.
type Options struct {
	// MaxConns bounds the connection pool (default 16).
	MaxConns int32
	// MaxBatch bounds the Updates of one group commit (default 256) and
	// MaxBatchBytes the bytes they buffer (default 32 MiB).
	MaxBatch      int
	MaxBatchBytes int
	// CacheBytes bounds the cache of rows read and written (cache.go;
	// default 64 MiB); negative: no cache.
	CacheBytes int
	// PollInterval is how often Follow polls while it cannot listen for
	// other processes' commits (default 1 s; notify.go).
	PollInterval time.Duration
	// RetryFor is how long a transaction that cannot begin, because the
	// server cannot be reached (restarting, or the network), keeps trying
	// before it fails (default DefaultRetryFor).
	RetryFor time.Duration
	// AheadIdle is how long the writer transaction a commit begins ahead,
	// in its own round trip, waits for the next Update before it is rolled
	// back (default DefaultAheadIdle; negative: commits begin none). It
	// holds the writer lock meanwhile: other processes' commits wait up to
	// that long.
	AheadIdle time.Duration
	// DeferFor is how long after its first deferred Update (kv.Defer) a
	// batch waits for more before it commits (default DefaultDeferFor;
	// negative: no Update returns before its commit). defer.go.
	DeferFor time.Duration
}

// DefaultAheadIdle is the default Options.AheadIdle: longer than the gap
// between the commits of a program that runs file operations one after
// another (a shell loop, tar, git), short beside a round trip of another
// host's commit.
const DefaultAheadIdle = 2 * time.Millisecond

// DefaultRetryFor is the default Options.RetryFor: as long as a lease
// outlives its holder, so that a server restart shorter than that costs
// its clients a wait, not an error.
const DefaultRetryFor = 15 * time.Second

// Store is a kv.Store in PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	opts   Options
	closed atomic.Bool
	desc   string // host/database, for errors

	// mu serializes the Updates' callbacks and owns the open batch.
	mu         sync.Mutex
	waiting    atomic.Int32 // Updates blocked on mu
	batch      *batch
	defers     deferState  // deferred Updates (defer.go)
	aheadTimer *time.Timer // rolls back a batch begun ahead that waited AheadIdle unused (armAheadLocked)

	leaseMu sync.Mutex
	leases  map[string]*Lease                 // held by this process, checked at every commit
	locals  atomic.Pointer[map[string]*Lease] // of them, those guarding a session: by its 16-byte id (localread.go)
	local   localState

	trips atomic.Int64 // round trips to the server (RoundTrips)
	stats stats        // transactions and their round trips, by kind (Stats)
	cache *cache       // nil: none

	// Following other processes (notify.go).
	id        string // this process's, in its notifications
	connCfg   *pgx.ConnConfig
	bg        sync.WaitGroup
	stopBg    chan struct{} // closed by Close
	wake      chan struct{}
	listening atomic.Bool
	notes     notifier
}

// RoundTrips is the number of round trips to the server so far: each
// statement, or pipelined batch of statements, the store waited for.
func (s *Store) RoundTrips() int64 { return s.trips.Load() }

// Stats counts a store's transactions and round trips by kind, so that the
// cost of a filesystem operation can be told in round trips (Store.Stats).
type Stats struct {
	Views, LocalViews int64 // Views; of them, served from the cache with no round trip
	Updates, Batches  int64 // Updates; the group commits they made
	Begins            int64 // round trips beginning a transaction
	Gets, Pages       int64 // round trips reading a key, a page of keys
	Commits           int64 // round trips committing a batch
	Ahead, Idle       int64 // batches begun in the previous commit's round trip; of them, rolled back unused
	Deferred          int64 // Updates that returned before their commit (defer.go)
	DeferViews        int64 // Views that read through a batch of deferred Updates
	Trips             int64 // all round trips (RoundTrips)
}

type stats struct {
	views, localViews, updates, batches, begins, gets, pages, commits, ahead, idle atomic.Int64
	deferred, deferViews                                                           atomic.Int64
}

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	return Stats{Views: s.stats.views.Load(), LocalViews: s.stats.localViews.Load(),
		Updates: s.stats.updates.Load(), Batches: s.stats.batches.Load(),
		Begins: s.stats.begins.Load(), Gets: s.stats.gets.Load(), Pages: s.stats.pages.Load(),
		Commits: s.stats.commits.Load(), Ahead: s.stats.ahead.Load(), Idle: s.stats.idle.Load(),
		Deferred: s.stats.deferred.Load(), DeferViews: s.stats.deferViews.Load(), Trips: s.trips.Load()}
}

// Sub returns the counts of st since earlier.
func (st Stats) Sub(earlier Stats) Stats {
	return Stats{st.Views - earlier.Views, st.LocalViews - earlier.LocalViews, st.Updates - earlier.Updates,
		st.Batches - earlier.Batches, st.Begins - earlier.Begins, st.Gets - earlier.Gets, st.Pages - earlier.Pages,
		st.Commits - earlier.Commits, st.Ahead - earlier.Ahead, st.Idle - earlier.Idle,
		st.Deferred - earlier.Deferred, st.DeferViews - earlier.DeferViews, st.Trips - earlier.Trips}
}

func (st Stats) String() string {
	return fmt.Sprintf("%d trips: %d views (%d local, %d through deferred), %d updates (%d deferred) in %d batches; %d begins, %d gets, %d pages, %d commits; %d begun ahead, %d idle",
		st.Trips, st.Views, st.LocalViews, st.DeferViews, st.Updates, st.Deferred, st.Batches, st.Begins, st.Gets, st.Pages, st.Commits, st.Ahead, st.Idle)
}

var _ kv.Store = (*Store)(nil)

// Open connects to the database at url (postgres://...) and creates the
// tables if they are missing.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if opts.MaxConns <= 0 {
		opts.MaxConns = 16
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = 32 << 20
	}
	if opts.CacheBytes == 0 {
		opts.CacheBytes = 64 << 20
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = time.Second
	}
	if opts.RetryFor <= 0 {
		opts.RetryFor = DefaultRetryFor
	}
	if opts.AheadIdle == 0 {
		opts.AheadIdle = DefaultAheadIdle
	}
	if opts.DeferFor == 0 {
		opts.DeferFor = DefaultDeferFor
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.RuntimeParams["application_name"] = "padfs"
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		// Every statement is prepared once per connection. With the
		// default (auto), statements over arrays (the commit's writes)
		// were planned anew at every execution: a third of the server's
		// CPU per commit. Their generic plans are the plans wanted (the
		// primary keys' indexes).
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	desc := cfg.ConnConfig.Host + "/" + cfg.ConnConfig.Database
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store %s: %w", desc, err)
	}
	s := &Store{pool: pool, opts: opts, desc: desc, leases: map[string]*Lease{}, connCfg: cfg.ConnConfig.Copy(),
		id: fmt.Sprintf("%016x", rand.Uint64()), stopBg: make(chan struct{}), wake: make(chan struct{}, 1)}
	s.local.cond = sync.NewCond(&s.local.mu)
	if opts.CacheBytes > 0 {
		s.cache = newCache(opts.CacheBytes)
	}
	if err := s.createSchema(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres store %s: %w", desc, err)
	}
	return s, nil
}

const schema = `
CREATE TABLE IF NOT EXISTS padfs_kv (k bytea PRIMARY KEY, v bytea NOT NULL);
CREATE TABLE IF NOT EXISTS padfs_lease (
	name    text PRIMARY KEY,
	token   bigint NOT NULL,
	host    text NOT NULL,
	pid     integer NOT NULL,
	since   timestamptz NOT NULL,
	expires timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS padfs_changes (gen bigint PRIMARY KEY, nonce bigint NOT NULL, parts bytea[] NOT NULL);
CREATE OR REPLACE FUNCTION padfs_kv_changed() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	IF current_setting('padfs.logged', true) IS DISTINCT FROM 'on' THEN
		INSERT INTO padfs_changes (gen, nonce, parts)
			SELECT coalesce(max(gen), 0) + 1, (random() * 9e18)::bigint, ARRAY[''::bytea] FROM padfs_changes;
	END IF;
	RETURN NULL;
END $f$;
-- The triggers fire only for writers that do not do their work
-- themselves: padfs's writer transactions set padfs.logged and
-- padfs.guarded when they begin (qLock), log their change and check the
-- guard in their commit's statement (qLogChange). Triggers of an older
-- padfs, without the WHEN clause, are replaced.
DO $d$ BEGIN
	IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'padfs_kv_changed' AND tgrelid = 'padfs_kv'::regclass AND tgqual IS NULL) THEN
		DROP TRIGGER padfs_kv_changed ON padfs_kv;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'padfs_kv_changed' AND tgrelid = 'padfs_kv'::regclass) THEN
		CREATE TRIGGER padfs_kv_changed AFTER INSERT OR UPDATE OR DELETE ON padfs_kv
			FOR EACH STATEMENT WHEN (current_setting('padfs.logged', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION padfs_kv_changed();
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'padfs_kv_truncated' AND tgrelid = 'padfs_kv'::regclass) THEN
		CREATE TRIGGER padfs_kv_truncated AFTER TRUNCATE ON padfs_kv
			FOR EACH STATEMENT EXECUTE FUNCTION padfs_kv_changed();
	END IF;
END $d$;
ALTER TABLE padfs_lease ADD COLUMN IF NOT EXISTS sid bytea;
-- padfs_guard refuses a change of parts ps to a session whose lease is live
-- and not one of mine (name/token, comma-separated).
CREATE OR REPLACE FUNCTION padfs_guard(ps bytea[], mine text) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
	h record;
BEGIN
	SELECT l.name, l.host, l.pid, l.since INTO h FROM padfs_lease l
	WHERE l.sid IS NOT NULL AND l.expires > clock_timestamp()
		AND NOT (l.name || '/' || l.token) = ANY (string_to_array(coalesce(mine, ''), ','))
		AND EXISTS (SELECT 1 FROM unnest(ps) p WHERE length(p) = 0
			OR get_byte(p, 0) = ANY ('{72,90,68,73,88,83,80,76,87}'::int[]) AND (length(p) < 17 OR substring(p FROM 2 FOR 16) = l.sid))
	LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'session % is mounted read-write by pid % on host % since % (its lease): only its holder may write it',
			h.name, h.pid, h.host, to_char(h.since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') USING ERRCODE = 'PF002';
	END IF;
END $f$;
CREATE OR REPLACE FUNCTION padfs_changes_guard() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
	PERFORM padfs_guard(NEW.parts, current_setting('padfs.mine', true));
	RETURN NEW;
END $f$;
DO $d$ BEGIN
	IF EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'padfs_changes_guard' AND tgrelid = 'padfs_changes'::regclass AND tgqual IS NULL) THEN
		DROP TRIGGER padfs_changes_guard ON padfs_changes;
	END IF;
	IF NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'padfs_changes_guard' AND tgrelid = 'padfs_changes'::regclass) THEN
		CREATE TRIGGER padfs_changes_guard BEFORE INSERT ON padfs_changes
			FOR EACH ROW WHEN (current_setting('padfs.guarded', true) IS DISTINCT FROM 'on') EXECUTE FUNCTION padfs_changes_guard();
	END IF;
END $d$;
CREATE OR REPLACE FUNCTION padfs_fence(n text, tok bigint) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM padfs_lease WHERE name = n AND token = tok AND expires > clock_timestamp()) THEN
		RAISE EXCEPTION 'lease % (token %) is no longer held', n, tok USING ERRCODE = 'PF001';
	END IF;
END $f$;
-- What padfs before qLogChange called for a commit (kept for it).
CREATE OR REPLACE FUNCTION padfs_commit(g bigint, nc bigint, ps bytea[], mine text, names text[], tokens bigint[],
	chan text, who text, ks bytea[], vs bytea[], ds bytea[])
RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
	lost record;
BEGIN
	PERFORM set_config('padfs.mine', mine, true), set_config('padfs.logged', 'on', true);
	-- The change, if every lease is still held (padfs_fence of each, in
	-- the same statement: each statement costs the server an executor).
	INSERT INTO padfs_changes (gen, nonce, parts) SELECT g, nc, ps
	WHERE NOT EXISTS (SELECT 1 FROM unnest(names, tokens) AS h(n, t)
		WHERE NOT EXISTS (SELECT 1 FROM padfs_lease WHERE name = h.n AND token = h.t AND expires > clock_timestamp()));
	IF NOT FOUND THEN
		SELECT h.n, h.t INTO lost FROM unnest(names, tokens) AS h(n, t)
		WHERE NOT EXISTS (SELECT 1 FROM padfs_lease WHERE name = h.n AND token = h.t AND expires > clock_timestamp()) LIMIT 1;
		RAISE EXCEPTION 'lease % (token %) is no longer held', lost.n, lost.t USING ERRCODE = 'PF001';
	END IF;
	IF cardinality(ks) > 0 THEN
		INSERT INTO padfs_kv (k, v) SELECT * FROM unnest(ks, vs) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v;
	END IF;
	IF cardinality(ds) > 0 THEN
		DELETE FROM padfs_kv WHERE k = ANY (ds);
	END IF;
	IF chan <> '' THEN
		PERFORM pg_notify(chan, who);
	END IF;
END $f$;
-- padfs_refused says why qLogChange's checks failed: a lease lost
-- (fenced), else the guard (naming the holder). If neither holds any more
-- (a lease ran out in between), nothing is in the way: the parts go in.
CREATE OR REPLACE FUNCTION padfs_refused(ps bytea[], names text[], tokens bigint[]) RETURNS bytea[] LANGUAGE plpgsql AS $f$
DECLARE
	lost record;
BEGIN
	SELECT h.n, h.t INTO lost FROM unnest(names, tokens) AS h(n, t)
	WHERE NOT EXISTS (SELECT 1 FROM padfs_lease WHERE name = h.n AND token = h.t AND expires > clock_timestamp()) LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'lease % (token %) is no longer held', lost.n, lost.t USING ERRCODE = 'PF001';
	END IF;
	PERFORM padfs_guard(ps, (SELECT string_agg(h.n || '/' || h.t, ',') FROM unnest(names, tokens) AS h(n, t)));
	RETURN ps;
END $f$;
-- What padfs before padfs_commit called, then wrote padfs_kv itself.
CREATE OR REPLACE FUNCTION padfs_log(g bigint, nc bigint, ps bytea[], mine text, names text[], tokens bigint[], chan text, who text)
RETURNS void LANGUAGE sql AS $f$
	SELECT padfs_commit(g, nc, ps, mine, names, tokens, chan, who, '{}', '{}', '{}');
$f$;
`

// fencedCode is the SQLSTATE padfs_fence and padfs_refused raise for a
// lease lost, guardCode padfs_guard's.
const (
	fencedCode = "PF001"
	guardCode  = "PF002"
)

// guardError is a commit the guard refused: it touched a session whose
// lease another process holds. It is ErrHeld.
type guardError struct{ msg string }

func (e *guardError) Error() string { return e.msg }
func (e *guardError) Unwrap() error { return ErrHeld }

func (s *Store) createSchema(ctx context.Context) error {
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	// Two processes creating the same tables at once would collide in the
	// catalog: take the writer lock.
	if _, err := c.Exec(ctx, fmt.Sprintf("BEGIN; SELECT pg_advisory_xact_lock(%d);", writerLock)); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, schema); err != nil {
		c.Exec(ctx, "ROLLBACK")
		return fmt.Errorf("create tables: %w", err)
	}
	_, err = c.Exec(ctx, "COMMIT")
	return err
}

// Pool is the connection pool (for the lease and notification helpers of
// the layers above, and tests).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

func (s *Store) wrap(err error) error {
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == fencedCode {
		return fmt.Errorf("%w: %s", ErrFenced, pe.Message)
	}
	if pe != nil && pe.Code == guardCode {
		return &guardError{pe.Message}
	}
	if pe == nil && !errors.Is(err, kv.ErrClosed) {
		// Not the server's answer: the connection's. Its cause is not
		// handed on, so that a unix socket that is not there (ENOENT) is
		// not taken for a file that is not there.
		return fmt.Errorf("postgres store %s: %w: %s", s.desc, ErrUnavailable, err)
	}
	return fmt.Errorf("postgres store %s: %w", s.desc, err)
}

// ErrUnavailable is wrapped by errors of a server that could not be
// reached or a connection that broke (the operation failed; a commit's
// fate is unknown if it broke during COMMIT).
var ErrUnavailable = errors.New("server unavailable")

// --- reads ---

// View runs fn in a REPEATABLE READ READ ONLY transaction.
func (s *Store) View(fn func(kv.Reader) error) error {
	if s.closed.Load() {
		return kv.ErrClosed
	}
	s.stats.views.Add(1)
	if b := s.defers.pending.Load(); b != nil {
		// A View sees every Update that returned: while some wait in
		// an open batch, it reads through that batch (defer.go).
		if ok, err := s.viewDeferred(b, fn); ok {
			return err
		}
	}
	// A process holding a session's lease begins lazily: the View may be
	// served by the cache alone (localread.go).
	r := &reader{s: s, lazy: s.cache != nil && s.anyLocal()}
	if !r.lazy {
		if err := r.begin(); err != nil {
			return err
		}
	}
	defer r.end()
	return fn(r)
}

// viewBegin begins a View's transaction. The snapshot is taken at the first
// statement, which reads the generation: the View sees nothing committed
// after it began.
const viewBegin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"

// begin begins the View's transaction: at once, or at the first read a
// lease-local View cannot serve from its snapshot, which must then be
// the same as the transaction's generation for what the View read.
func (r *reader) begin() error {
	from := int64(-1)
	sn := r.snap
	if sn != nil {
		from = sn.gen
	}
	r.lazy = false
	var c *pgxpool.Conn
	var err error
	pre := r.s.prebegunFor(r)
	if pre == nil {
		c, err = r.s.open(context.Background(), r, viewBegin, false, from)
		if sn != nil {
			// Pinned until the transaction's snapshot is taken: no commit
			// of this process falls between the two, unless one gave up
			// waiting and began a transaction for this View meanwhile.
			if pre = r.s.unpin(r); pre != nil && c != nil {
				r.s.endTx(c)
			}
		}
	}
	if pre != nil {
		c, err = r.usePrebegun(pre)
	}
	if sn != nil {
		sn.release()
	}
	r.snap = nil
	if err != nil {
		r.err = err
		return err
	}
	r.conn = c
	if sn != nil && len(r.read) > 0 && overtaken(sn, r.gen, r.nonce, r.changes, r.read) {
		r.err = r.s.errOvertaken()
		return r.err
	}
	return nil
}

// usePrebegun makes the transaction a commit began for r r's.
func (r *reader) usePrebegun(pre *prebegun) (*pgxpool.Conn, error) {
	<-pre.done
	if pre.err != nil {
		return nil, pre.err
	}
	r.q, r.gen, r.nonce, r.changes, r.cached = pre.conn, pre.r.gen, pre.r.nonce, pre.r.changes, pre.r.cached
	return pre.conn, nil
}

// end ends a View.
func (r *reader) end() {
	r.done = true
	if r.snap != nil {
		if pre := r.s.unpin(r); pre != nil {
			<-pre.done
			if pre.conn != nil {
				r.s.endTx(pre.conn)
			}
		}
		r.snap.release()
		r.snap = nil
	}
	if r.conn != nil {
		r.s.endTx(r.conn)
	} else if r.err == nil {
		r.s.stats.localViews.Add(1)
	}
}

// open acquires a connection and begins a transaction on it (beginTx).
// While the server cannot be reached it retries for up to
// Options.RetryFor: a begin that failed changed nothing.
// The changes it reads start at generation from (-1: the cache's).
func (s *Store) open(ctx context.Context, r *reader, begin string, write bool, from int64) (*pgxpool.Conn, error) {
	deadline := time.Now().Add(s.opts.RetryFor)
	pause := 20 * time.Millisecond
	for {
		c, err := s.pool.Acquire(ctx)
		if err == nil {
			r.q = c
			if err = s.beginTx(ctx, c, r, begin, write, from); err == nil {
				return c, nil
			}
			c.Exec(ctx, "ROLLBACK") // a broken connection is closed on release
			c.Release()
		}
		if !unreachable(err) || s.closed.Load() || time.Now().Add(pause).After(deadline) {
			r.q = nil
			return nil, s.wrap(err)
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

// unreachable reports whether err means the server could not be talked
// to (no connection, a connection lost, a server shutting down or
// starting up) rather than a statement that failed.
func unreachable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || strings.HasPrefix(pe.Code, "57P")
	}
	return err != nil
}

// endTx rolls back a read-only transaction and returns its connection
// without waiting for the answer: nothing depends on it (a connection
// that fails to roll back is closed by the pool).
func (s *Store) endTx(c *pgxpool.Conn) {
	go func() {
		c.Exec(context.Background(), "ROLLBACK")
		c.Release()
	}()
}

// Reading the generation: the newest change, and (with a cache) the
// changes since the cache's generation, newest first, the first of them
// the newest (one index scan: a union with the newest read apart cost the
// server about 8 µs more a transaction). The newest is below the cache's
// generation only in a database gone back to an earlier state: then no
// row comes, and qNewest tells (errNewestUnknown).
const (
	qNewest  = "SELECT gen, nonce FROM padfs_changes ORDER BY gen DESC LIMIT 1"
	qChanges = "SELECT gen, nonce, parts FROM padfs_changes WHERE gen >= $1 ORDER BY gen DESC LIMIT 1000"
)

// errNewestUnknown: qChanges found no change from the cache's generation
// on, so it did not tell the newest.
var errNewestUnknown = errors.New("postgres store: newest generation unknown")

// qLock takes the writer lock of an Update's transaction, and says that
// the transaction logs its change and checks the guard itself (qLogChange):
// the triggers on padfs_kv and padfs_changes need not fire.
const qLock = "SELECT pg_advisory_xact_lock($1), set_config('padfs.logged', 'on', true), set_config('padfs.guarded', 'on', true)"

// beginTx begins a transaction on c in one round trip: begin, then
// (under the writer lock, for an Update) the generation it sees and the
// changes the cache has not seen; the cache is brought to that
// generation, and r reads it if it could be.
func (s *Store) beginTx(ctx context.Context, c *pgxpool.Conn, r *reader, begin string, write bool, from int64) error {
	pb := &pgx.Batch{}
	pb.Queue(begin)
	if write {
		pb.Queue(qLock, int64(writerLock))
	}
	from = s.queueGen(pb, from)
	s.trips.Add(1)
	s.stats.begins.Add(1)
	br := c.SendBatch(ctx, pb)
	err := s.readBegin(br, r, write, from)
	if cerr := br.Close(); err == nil || errors.Is(err, errNewestUnknown) && cerr != nil {
		err = cerr
	}
	if errors.Is(err, errNewestUnknown) {
		s.trips.Add(1)
		err = c.QueryRow(ctx, qNewest).Scan(&r.gen, &r.nonce)
		if errors.Is(err, pgx.ErrNoRows) {
			err = nil
		}
		r.changes = nil
		r.cached = err == nil && s.cache.advance(r.gen, r.nonce, nil, write)
	}
	return err
}

// queueGen queues the reads of the generation and the changes since from
// (-1: the cache's), which readGen reads; it returns the from it used.
func (s *Store) queueGen(pb *pgx.Batch, from int64) int64 {
	if s.cache == nil {
		pb.Queue(qNewest)
		return from
	}
	s.cache.mu.Lock()
	if from < 0 || from > s.cache.gen {
		from = s.cache.gen
	}
	s.cache.mu.Unlock()
	pb.Queue(qChanges, from)
	return from
}

func (s *Store) readBegin(br pgx.BatchResults, r *reader, write bool, from int64) error {
	if _, err := br.Exec(); err != nil {
		return err
	}
	if write {
		if _, err := br.Exec(); err != nil {
			return err
		}
	}
	return s.readGen(br, r, write, from)
}

// readGen reads what queueGen(from) queued into r and brings the cache to
// it, or fails with errNewestUnknown.
func (s *Store) readGen(br pgx.BatchResults, r *reader, write bool, from int64) error {
	r.gen, r.nonce = 0, 0
	if s.cache == nil {
		err := br.QueryRow().Scan(&r.gen, &r.nonce)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	var changes []change
	for rows.Next() {
		var ch change
		if err := rows.Scan(&ch.gen, &ch.nonce, &ch.parts); err != nil {
			rows.Close()
			return err
		}
		changes = append(changes, ch)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(changes) == 0 && from > 0 {
		return errNewestUnknown
	}
	if len(changes) > 0 {
		r.gen, r.nonce = changes[0].gen, changes[0].nonce
	}
	slices.Reverse(changes) // in order
	r.changes = changes
	r.cached = s.cache.advance(r.gen, r.nonce, changes, write)
	return nil
}

// querier is a connection in a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// reader reads the database inside a transaction: from the cache while
// the cache is at the transaction's generation, else by queries.
type reader struct {
	s      *Store
	q      querier
	gen    int64 // the generation the transaction reads
	nonce  int64 // its change's
	cached bool  // the cache was at gen when the transaction began
	done   bool
	err    error // a failed query: the transaction is aborted

	// A View of a process holding a session's lease (localread.go).
	lazy    bool                // not begun yet: reads try the snapshot first
	snap    *snapshot           // pinned at its first lease-local read
	read    map[string]struct{} // partitions it read from snap
	changes []change            // read when it began (from snap's generation)
	conn    *pgxpool.Conn       // its transaction's, once begun
	pre     *prebegun           // begun for it by a commit (guarded by local.mu)

	// The last page read: a read that goes on where it ended reads a
	// bigger one.
	lastHi   string
	lastSize int
}

func (r *reader) check() error {
	if r.done {
		return errors.New("postgres store: transaction used after it ended")
	}
	return r.err
}

func (r *reader) Get(key []byte) ([]byte, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	return r.get(key)
}

func (r *reader) get(key []byte) ([]byte, error) {
	if r.lazy {
		if v, found, ok := r.localGet(key); ok {
			if !found {
				return nil, nil
			}
			return v, nil
		}
		if err := r.begin(); err != nil {
			return nil, err
		}
	}
	if r.cached {
		if v, found, covered := r.s.cache.get(r.gen, key); covered {
			if !found {
				return nil, nil
			}
			return v, nil
		}
	}
	if r.cached {
		if lo, hi, ok := groupOf(key); ok {
			if v, found, ok, err := r.getGroup(key, lo, hi); err != nil || ok {
				if !found {
					v = nil
				}
				return v, err
			}
		}
	}
	var v []byte
	r.s.trips.Add(1)
	r.s.stats.gets.Add(1)
	err := r.q.QueryRow(context.Background(), "SELECT v FROM padfs_kv WHERE k = $1", key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		if r.cached {
			r.s.cache.fill(r.gen, string(key), string(key)+"\x00", false, nil)
		}
		return nil, nil
	}
	if err != nil {
		r.err = r.s.wrap(err)
		return nil, r.err
	}
	if v == nil {
		v = []byte{}
	}
	if r.cached {
		r.s.cache.fill(r.gen, string(key), string(key)+"\x00", false, []row{{bytes.Clone(key), v}})
	}
	return v, nil
}

// groupPage is how many rows a Get that misses in a key group reads.
const groupPage = 128

// groupOf returns the key group [lo, hi) a Get of key reads whole on a
// miss: a directory's live entries (L sid parent name), looked up name by
// name, new names too, so that the next lookups in that directory find
// the cache covering them, present or absent.
func groupOf(key []byte) (lo, hi string, ok bool) {
	const n = 1 + 16 + 8
	if len(key) <= n || key[0] != 'L' {
		return "", "", false
	}
	lo = string(key[:n])
	hi = prefixEnd(lo)
	return lo, hi, hi != ""
}

// getGroup reads up to groupPage rows of group [lo, hi) into the cache and
// answers the Get of key from them: ok false if the page ended before key.
func (r *reader) getGroup(key []byte, lo, hi string) (v []byte, found, ok bool, err error) {
	r.s.trips.Add(1)
	r.s.stats.pages.Add(1)
	rows, err := r.q.Query(context.Background(), "SELECT k, v FROM padfs_kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3",
		[]byte(lo), []byte(hi), groupPage)
	if err != nil {
		r.err = r.s.wrap(err)
		return nil, false, false, r.err
	}
	var page []row
	for rows.Next() {
		var rw row
		if err := rows.Scan(&rw.k, &rw.v); err != nil {
			rows.Close()
			r.err = r.s.wrap(err)
			return nil, false, false, r.err
		}
		if rw.v == nil {
			rw.v = []byte{}
		}
		page = append(page, rw)
	}
	if err := rows.Err(); err != nil {
		r.err = r.s.wrap(err)
		return nil, false, false, r.err
	}
	end := hi
	if len(page) == groupPage {
		end = string(page[len(page)-1].k) + "\x00"
	}
	r.s.cache.fill(r.gen, lo, end, false, page)
	if string(key) >= end {
		return nil, false, false, nil
	}
	for _, rw := range page {
		if bytes.Equal(rw.k, key) {
			return rw.v, true, true, nil
		}
	}
	return nil, false, true, nil
}

func (r *reader) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) error {
	if err := r.check(); err != nil {
		return err
	}
	p := r.pages(start, end)
	for {
		k, v, ok, err := p.next()
		if err != nil || !ok {
			return err
		}
		if more, err := fn(k, v); err != nil || !more {
			return err
		}
	}
}

var (
	_ kv.Firster = (*reader)(nil)
	_ kv.Firster = (*txn)(nil)
)

// First is the first row of [start, end) (kv.Firster): a Scan stopped at
// its first row, without the callback and the pager on the heap (mvcc
// seeks a chain's newest version so, several times per operation).
func (r *reader) First(start, end []byte) (k, v []byte, err error) {
	if err := r.check(); err != nil {
		return nil, nil, err
	}
	p := pager{r: r, pos: string(start), end: end}
	k, v, _, err = p.next()
	return k, v, err
}

// Page sizes: a read that stops at its first key (a version-chain seek)
// costs a small page; reads that go on where the last page ended grow to
// big pages.
const (
	firstPage = 16
	maxPage   = 512
)

// pager reads rows of [pos, end) in key order: from the cache where it
// covers them, else a page at a time (keyset pagination).
type pager struct {
	r        *reader
	pos      string // the next key to look at
	end      []byte // nil: no bound
	rows     []row  // a page the cache did not take
	i        int
	finished bool
}

type row struct{ k, v []byte }

func (r *reader) pages(start, end []byte) *pager {
	return &pager{r: r, pos: string(start), end: bytes.Clone(end)}
}

// next returns the next row (ok false at the end of the range).
func (p *pager) next() (k, v []byte, ok bool, err error) {
	for {
		if p.i < len(p.rows) {
			rw := p.rows[p.i]
			p.i++
			p.pos = string(rw.k) + "\x00"
			return rw.k, rw.v, true, nil
		}
		if p.finished {
			return nil, nil, false, nil
		}
		if p.end != nil && p.pos >= string(p.end) {
			p.finished = true
			continue
		}
		// What this process holds: a lease-local View's snapshot (until
		// it must begin), else the cache at the transaction's generation.
		var k, v []byte
		var found, known bool
		switch {
		case p.r.lazy:
			if k, v, found, known = p.r.localNext(&p.pos, p.end); !found && !known {
				if err := p.r.begin(); err != nil {
					return nil, nil, false, err
				}
				continue // begun: the cache, or a fetch
			}
		case p.r.cached:
			k, v, found, known = p.r.s.cache.next(p.r.gen, &p.pos, p.end)
		}
		switch {
		case found:
			p.pos = string(k) + "\x00"
			return k, v, true, nil
		case known:
			p.finished = true
		default:
			if err := p.fetch(); err != nil {
				return nil, nil, false, err
			}
		}
	}
}

// fetch reads a page from p.pos: into the cache if it takes it, else
// into p.rows.
func (p *pager) fetch() error {
	r := p.r
	qend, inf := string(p.end), p.end == nil
	if r.cached {
		// Read ahead to the end of the partition: the neighbours come next.
		if we, ok := widenEnd(p.pos); ok && !inf && we > qend {
			qend, inf = we, false
		}
	}
	size := firstPage
	if r.lastSize > 0 && p.pos == r.lastHi {
		size = min(r.lastSize*4, maxPage)
	}
	var sql string
	args := []any{[]byte(p.pos)}
	if inf {
		sql = "SELECT k, v FROM padfs_kv WHERE k >= $1 ORDER BY k LIMIT $2"
	} else {
		sql = "SELECT k, v FROM padfs_kv WHERE k >= $1 AND k < $2 ORDER BY k LIMIT $3"
		args = append(args, []byte(qend))
	}
	args = append(args, size)
	r.s.trips.Add(1)
	r.s.stats.pages.Add(1)
	rows, err := r.q.Query(context.Background(), sql, args...)
	if err != nil {
		r.err = r.s.wrap(err)
		return r.err
	}
	var page []row
	for rows.Next() {
		var rw row
		if err := rows.Scan(&rw.k, &rw.v); err != nil {
			rows.Close()
			r.err = r.s.wrap(err)
			return r.err
		}
		if rw.v == nil {
			rw.v = []byte{}
		}
		page = append(page, rw)
	}
	if err := rows.Err(); err != nil {
		r.err = r.s.wrap(err)
		return r.err
	}
	hi := qend
	if len(page) == size {
		hi, inf = string(page[len(page)-1].k)+"\x00", false
	}
	r.lastHi, r.lastSize = hi, size
	if r.cached {
		r.s.cache.fill(r.gen, p.pos, hi, inf, page)
	}
	// The rows are served from the page itself, whether the cache took
	// them or not.
	p.rows, p.i = page[:0], 0
	for _, rw := range page {
		if p.end != nil && string(rw.k) >= string(p.end) {
			p.finished = true
			break
		}
		p.rows = append(p.rows, rw)
	}
	if len(page) < size {
		p.finished = true
	}
	p.pos = hi
	return nil
}

// --- writes ---

// batch is one PostgreSQL transaction shared by the Updates of a group
// commit.
type batch struct {
	conn     *pgxpool.Conn
	r        *reader
	ov       *btree.BTreeG[entry] // buffered writes, newest per key
	bytes    int
	n        int           // Updates that succeeded in it
	done     chan struct{} // closed after COMMIT (or its failure)
	err      error         // the COMMIT's outcome
	nonce    int64         // of its generation (b.r.gen+1)
	used     bool          // an Update ran in it (a batch begun ahead may wait for one)
	ahead    time.Time     // when it was begun ahead (zero: by an Update)
	deferred bool          // it holds deferred Updates, which returned already (defer.go)
}

// entry is a buffered write: a value, or a deletion.
type entry struct {
	k   string
	v   []byte
	del bool
}

func entryLess(a, b entry) bool { return a.k < b.k }

// Update runs fn in the current group commit's transaction and returns
// after that transaction committed (or failed).
func (s *Store) Update(fn func(kv.Txn) error) error {
	if s.closed.Load() {
		return kv.ErrClosed
	}
	s.stats.updates.Add(1)
	s.waiting.Add(1)
	s.mu.Lock()
	s.waiting.Add(-1)
	if s.closed.Load() {
		s.mu.Unlock()
		return kv.ErrClosed
	}
	b := s.batch
	if b != nil && !b.used && !b.ahead.IsZero() && time.Since(b.ahead) > aheadServerIdle/2 {
		// Its timer came late (a paused process): the server may be
		// about to end it.
		s.dropAheadLocked(b)
		b = nil
	}
	if b == nil {
		var err error
		if b, err = s.beginLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		s.batch = b
	}
	if !b.used {
		b.used = true
		s.stats.batches.Add(1)
	}
	t := &txn{b: b, undo: map[string]undo{}}
	panicked, ferr := callFn(fn, t)
	t.ended = true
	if ferr == nil && b.r.err != nil {
		ferr = b.r.err // a failed query the callback ignored
	}
	if ferr != nil {
		t.rollback()
	} else {
		b.n++
	}
	deferred := ferr == nil && t.deferOK && s.deferLocked(b)
	// Commit when nobody else is about to join (unless this Update may
	// return before its commit), or the batch is full.
	if !deferred && s.waiting.Load() == 0 || b.n >= s.opts.MaxBatch || b.bytes >= s.opts.MaxBatchBytes || b.r.err != nil {
		s.batch = nil
		s.finishLocked(b)
	}
	s.mu.Unlock()
	if panicked != nil {
		panic(panicked) // after its writes were undone and the lock released, as bbolt does
	}
	if ferr != nil || deferred {
		return ferr
	}
	<-b.done
	return b.err
}

// callFn runs an Update's callback; a panic comes back as p (and an
// error), so that Update can undo its writes before re-raising it.
func callFn(fn func(kv.Txn) error, t *txn) (p any, err error) {
	defer func() {
		if r := recover(); r != nil {
			p, err = r, fmt.Errorf("postgres store: update panicked: %v", r)
		}
	}()
	return nil, fn(t)
}

// beginLocked starts a batch: a transaction holding the writer lock.
func (s *Store) beginLocked() (*batch, error) {
	r := &reader{s: s}
	c, err := s.open(context.Background(), r, "BEGIN", true, -1)
	if err != nil {
		return nil, err
	}
	return newBatch(c, r), nil
}

func newBatch(c *pgxpool.Conn, r *reader) *batch {
	return &batch{conn: c, r: r, ov: btree.NewBTreeGOptions(entryLess, btree.Options{NoLocks: true}),
		done: make(chan struct{}), nonce: rand.Int64()}
}

// Beginning ahead. A commit's round trip also begins the next batch on
// its connection (BEGIN, the writer lock if it is free, the generation),
// so that an Update that follows soon, as the next file operation of a
// program does, costs one round trip instead of two. While that batch
// waits it holds the writer lock, as a running batch does: it reads
// everything committed before it and nothing can commit beside it. It is
// rolled back, freeing the lock, when no Update came for
// Options.AheadIdle, or when the lock was not free (another process's
// writer was waiting: it goes first, and this process's next Update
// begins as usual). A process paused or cut off while such a batch waits
// (its timer cannot run) would hold the lock for every host: the server
// ends the batch's session once it has been idle aheadServerIdle, and an
// Update does not take a batch begun ahead that long ago.

// aheadServerIdle is the idle_in_transaction_session_timeout of a batch
// begun ahead: how long a paused process can keep the writer lock from
// the others.
const aheadServerIdle = 2 * time.Second

// queueAhead queues the begin of the next batch after a COMMIT.
func (s *Store) queueAhead(pb *pgx.Batch) (from int64) {
	pb.Queue("BEGIN")
	pb.Queue(`SELECT pg_try_advisory_xact_lock($1), set_config('idle_in_transaction_session_timeout', $2, true),
		set_config('padfs.logged', 'on', true), set_config('padfs.guarded', 'on', true)`, // as qLock
		int64(writerLock), fmt.Sprint(aheadServerIdle.Milliseconds()))
	return s.queueGen(pb, -1)
}

// readAhead reads what queueAhead(from) queued: the next batch, or nil if
// the writer lock was not free (or the newest generation is not known: the
// next Update begins as usual).
func (s *Store) readAhead(br pgx.BatchResults, c *pgxpool.Conn, from int64) (*batch, error) {
	if _, err := br.Exec(); err != nil {
		return nil, err
	}
	var locked bool
	var timeout, logged, guarded string
	if err := br.QueryRow().Scan(&locked, &timeout, &logged, &guarded); err != nil || !locked {
		return nil, err
	}
	r := &reader{s: s, q: c}
	if err := s.readGen(br, r, true, from); err != nil {
		return nil, err
	}
	b := newBatch(c, r)
	b.ahead = time.Now()
	return b, nil
}

// dropAheadLocked rolls the batch begun ahead b back (unused).
func (s *Store) dropAheadLocked(b *batch) {
	s.batch = nil
	s.stats.idle.Add(1)
	close(b.done)
	s.endTx(b.conn)
}

// armAheadLocked starts the wait of a batch just begun ahead for its first
// Update. One timer serves every batch, re-armed by each: a program whose
// commits follow each other within AheadIdle never sees it fire (a timer
// per batch cost every commit a goroutine, and a wake-up of the lock's
// waiter, when it fired after the next commit had begun).
func (s *Store) armAheadLocked() {
	if s.aheadTimer == nil {
		s.aheadTimer = time.AfterFunc(s.opts.AheadIdle, s.idleAhead)
		return
	}
	s.aheadTimer.Reset(s.opts.AheadIdle)
}

// idleAhead rolls the batch begun ahead back if no Update has used it for
// AheadIdle.
func (s *Store) idleAhead() {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batch
	if b == nil || b.used || b.ahead.IsZero() {
		return
	}
	if wait := s.opts.AheadIdle - time.Since(b.ahead); wait > 0 {
		// Begun while this firing waited for the lock.
		s.aheadTimer.Reset(wait)
		return
	}
	s.dropAheadLocked(b)
}

// changesKept is how many generations padfs_changes keeps: a process
// whose cache is further behind empties it.
const changesKept = 10000

// finishLocked commits the batch (or rolls it back if no Update in it
// succeeded) and wakes its Updates. A batch that writes is one
// generation: its change row names the partitions it touched.
func (s *Store) finishLocked(b *batch) {
	defer close(b.done)
	if b.deferred {
		defer s.deferEnded(b)
	}
	ctx := context.Background()
	if b.n == 0 || b.r.err != nil {
		b.err = b.r.err
		if _, err := b.conn.Exec(ctx, "ROLLBACK"); err != nil && b.err == nil {
			b.err = s.wrap(err)
		}
		b.conn.Release()
		return
	}
	w := b.writes()
	gen := b.r.gen + 1
	pb := &pgx.Batch{}
	s.queueWrites(pb, gen, b.nonce, w)
	before := pb.Len()
	pb.Queue("COMMIT")
	ahead := s.opts.AheadIdle > 0 && !s.closed.Load()
	var from int64
	if ahead {
		from = s.queueAhead(pb)
	}
	logged := len(w.puts)+len(w.dels) > 0 && s.cache != nil
	if logged {
		s.commitStart(gen)
		defer s.commitEnd() // after committed, below
		s.cache.begin(gen, b)
	}
	s.trips.Add(1)
	s.stats.commits.Add(1)
	br := b.conn.SendBatch(ctx, pb)
	var err error
	for i := 0; i < before && err == nil; i++ {
		_, err = br.Exec()
	}
	if err == nil {
		var tag pgconn.CommandTag
		if tag, err = br.Exec(); err == nil && tag.String() != "COMMIT" {
			err = errors.New("transaction did not commit") // "ROLLBACK": it had failed
		}
	}
	var next *batch
	if err == nil && ahead {
		// Committed: whatever becomes of the next batch, this one stands.
		var aerr error
		next, aerr = s.readAhead(br, b.conn, from)
		if cerr := br.Close(); aerr != nil || cerr != nil {
			next = nil
		}
	} else if cerr := br.Close(); err == nil {
		err = cerr
	}
	if len(w.puts)+len(w.dels) > 0 {
		s.notifyLater() // also if its fate is unknown (the connection broke)
	}
	switch {
	case err != nil:
		b.conn.Exec(ctx, "ROLLBACK")
		b.err = s.wrap(err)
		b.conn.Release()
	case next != nil:
		s.stats.ahead.Add(1)
		s.batch = next
		s.armAheadLocked()
	case ahead:
		s.endTx(b.conn) // the next batch did not get the lock, or failed
	default:
		if b.conn.Conn().PgConn().TxStatus() != 'I' {
			b.conn.Exec(ctx, "ROLLBACK")
			b.err = s.wrap(errors.New("transaction did not commit"))
		}
		b.conn.Release()
	}
	if logged {
		s.cache.committed(gen, b, b.err == nil)
	}
}

// commitWrites are a batch's buffered writes in key order, and the key
// groups (parts) they touch, for padfs_changes.
type commitWrites struct {
	puts, vals, dels, parts [][]byte
}

// writes collects b's buffered writes for its commit.
func (b *batch) writes() (w commitWrites) {
	var lastPart []byte
	b.ov.Scan(func(e entry) bool {
		k := []byte(e.k)
		if e.del {
			w.dels = append(w.dels, k)
		} else {
			w.puts = append(w.puts, k)
			w.vals = append(w.vals, e.v)
		}
		if p := partOf(k); !bytes.Equal(p, lastPart) {
			w.parts, lastPart = append(w.parts, p), p
		}
		return true
	})
	return w
}

// queueWrites queues a commit's statements before its COMMIT: the log
// entry with the lease checks and the writes, or (with nothing to write)
// the fences of the leases this process holds.
func (s *Store) queueWrites(pb *pgx.Batch, gen, nonce int64, w commitWrites) {
	held := s.heldLeases()
	if len(w.puts)+len(w.dels) == 0 {
		for _, l := range held {
			pb.Queue("SELECT padfs_fence($1, $2)", l.name, l.token)
		}
		return
	}
	// The change with the lease checks, first: if it fails, the writes
	// after it in the pipeline do not run. No notification: it is sent
	// after the commit (notifyLater).
	mine := make([]string, len(held))
	names, tokens := make([]string, len(held)), make([]int64, len(held))
	for i, l := range held {
		mine[i] = fmt.Sprintf("%s/%d", l.name, l.token)
		names[i], tokens[i] = l.name, l.token
	}
	sids, all := guardedSessions(w.parts)
	pb.Queue(qLogChange, gen, nonce, w.parts, names, tokens, mine, sids, all)
	if len(w.puts) > 0 {
		pb.Queue("INSERT INTO padfs_kv (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
			w.puts, w.vals)
	}
	if len(w.dels) > 0 {
		pb.Queue("DELETE FROM padfs_kv WHERE k = ANY ($1::bytea[])", w.dels)
	}
	if gen%1024 == 0 {
		pb.Queue("DELETE FROM padfs_changes WHERE gen <= $1", gen-changesKept)
	}
}

// qLogChange logs a commit's change (gen, nonce, parts $1-$3) if every
// lease this process holds (names, tokens; mine: their name/token) is
// still held, and no session it touches (sids, or every session if all)
// is leased by another process: padfs_fence's and padfs_guard's checks in
// one scan of padfs_lease, with no subquery (as subqueries, in
// padfs_commit, they cost the server about 30 µs a commit, as much as a
// small file's 8 rows). If they fail, padfs_refused raises the error that
// says why.
const qLogChange = `INSERT INTO padfs_changes (gen, nonce, parts)
SELECT $1, $2, CASE WHEN c.ok THEN $3::bytea[] ELSE padfs_refused($3::bytea[], $4::text[], $5::bigint[]) END
FROM (SELECT count(*) FILTER (WHERE l.mine) = cardinality($6::text[])
		AND NOT coalesce(bool_or(NOT l.mine AND l.sid IS NOT NULL AND ($8::bool OR l.sid = ANY ($7::bytea[]))), false) AS ok
	FROM (SELECT sid, name || '/' || token = ANY ($6::text[]) AS mine FROM padfs_lease WHERE expires > clock_timestamp()) l) c`

// guardedSessions returns the sessions whose guarded keys parts touch
// (their 16-byte ids), or all if a part stands for every session: what
// padfs_guard finds in parts, computed here so that the commit's check is
// a comparison.
func guardedSessions(parts [][]byte) (sids [][]byte, all bool) {
	sids = [][]byte{}
	for _, p := range parts {
		switch {
		case len(p) == 0:
			return nil, true
		case !guardedKind(p[0]):
		case len(p) < 17:
			return nil, true
		default:
			sids = append(sids, p[1:17])
		}
	}
	return sids, false
}

// undo restores a key of the batch's buffer when an Update fails.
type undo struct {
	had bool
	e   entry
}

// txn is one Update's view of its batch.
type txn struct {
	b       *batch
	undo    map[string]undo // keys this Update wrote: their state before it
	ended   bool
	deferOK bool // Defer was called: the Update may return before its commit
}

func (t *txn) check() error {
	if t.ended {
		return errors.New("postgres store: transaction used after it ended")
	}
	return t.b.r.err
}

func (t *txn) rollback() {
	for k, u := range t.undo {
		if u.had {
			t.b.ov.Set(u.e)
		} else {
			t.b.ov.Delete(entry{k: k})
		}
	}
}

func (t *txn) write(e entry) {
	if _, ok := t.undo[e.k]; !ok {
		old, had := t.b.ov.Get(entry{k: e.k})
		t.undo[e.k] = undo{had, old}
	}
	t.b.ov.Set(e)
	t.b.bytes += len(e.k) + len(e.v)
}

func (t *txn) Put(key, value []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if len(key) == 0 {
		return errors.New("postgres store: empty key")
	}
	t.write(entry{k: string(key), v: append([]byte{}, value...)})
	return nil
}

func (t *txn) Delete(key []byte) error {
	if err := t.check(); err != nil {
		return err
	}
	if len(key) == 0 {
		return nil
	}
	t.write(entry{k: string(key), del: true})
	return nil
}

func (t *txn) Get(key []byte) ([]byte, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	if e, ok := t.b.ov.Get(entry{k: string(key)}); ok {
		if e.del {
			return nil, nil
		}
		return e.v, nil
	}
	return t.b.r.get(key)
}

// First is the first row of [start, end) (kv.Firster): the database's
// rows merged with the buffered writes, as Scan would give it.
func (t *txn) First(start, end []byte) (k, v []byte, err error) {
	if err := t.check(); err != nil {
		return nil, nil, err
	}
	p := pager{r: t.b.r, pos: string(start), end: end}
	dk, dv, dok, err := p.next()
	if err != nil {
		return nil, nil, err
	}
	pivot := string(start)
	for {
		var ov entry
		var ook bool
		t.b.ov.Ascend(entry{k: pivot}, func(e entry) bool {
			if end == nil || e.k < string(end) {
				ov, ook = e, true
			}
			return false
		})
		switch {
		case !ook || dok && string(dk) < ov.k:
			if !dok {
				return nil, nil, nil
			}
			return dk, dv, nil
		case !ov.del:
			return []byte(ov.k), ov.v, nil
		}
		// A buffered deletion: look past it.
		pivot = ov.k + "\x00"
		if dok && string(dk) == ov.k {
			if dk, dv, dok, err = p.next(); err != nil {
				return nil, nil, err
			}
		}
	}
}

// Scan merges the database's rows with the buffered writes. The callback
// may write: the scan resumes after the last key it returned, so writes at
// or behind it do not derail it.
func (t *txn) Scan(start, end []byte, fn func(k, v []byte) (bool, error)) error {
	if err := t.check(); err != nil {
		return err
	}
	p := t.b.r.pages(start, end)
	var dk, dv []byte
	var dok bool
	var last []byte // the last key handed to fn
	advance := func() error {
		var err error
		for {
			dk, dv, dok, err = p.next()
			if err != nil || !dok || last == nil || bytes.Compare(dk, last) > 0 {
				return err
			}
		}
	}
	if err := advance(); err != nil {
		return err
	}
	for {
		// The first buffered write after last (or at start).
		var ov entry
		var ook bool
		pivot := entry{k: string(start)}
		if last != nil {
			pivot = entry{k: string(last) + "\x00"}
		}
		t.b.ov.Ascend(pivot, func(e entry) bool {
			if end != nil && e.k >= string(end) {
				return false
			}
			ov, ook = e, true
			return false
		})
		var k, v []byte
		switch {
		case !dok && !ook:
			return nil
		case ook && (!dok || ov.k <= string(dk)):
			if dok && ov.k == string(dk) {
				if err := advance(); err != nil {
					return err
				}
			}
			last = []byte(ov.k)
			if ov.del {
				continue
			}
			k, v = last, ov.v
		default:
			k, v = dk, dv
			last = dk
			if err := advance(); err != nil {
				return err
			}
			if e, ok := t.b.ov.Get(entry{k: string(k)}); ok {
				// Written ahead of the scan by its own callback.
				if e.del {
					continue
				}
				v = e.v
			}
		}
		if more, err := fn(k, v); err != nil || !more {
			return err
		}
		// The callback may have moved the pager's rows behind last.
		if dok && bytes.Compare(dk, last) <= 0 {
			if err := advance(); err != nil {
				return err
			}
		}
	}
}

// Sync commits the deferred Updates (defer.go) and reports the failure of
// any deferred commit since the last Sync; an Update that returned without
// deferral is in PostgreSQL's log already.
func (s *Store) Sync() error {
	if s.closed.Load() {
		return kv.ErrClosed
	}
	s.flushDeferred()
	return s.takeDeferErr()
}

// Close waits for the running Updates, releases the leases this process
// holds and closes the connections.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return kv.ErrClosed
	}
	s.mu.Lock()
	if b := s.batch; b != nil {
		s.batch = nil
		s.finishLocked(b)
	}
	s.mu.Unlock()
	s.sendNotify(true) // of the last commits
	close(s.stopBg)
	s.bg.Wait()
	var err error
	for _, l := range s.heldLeases() {
		err = errors.Join(err, l.Release())
	}
	s.pool.Close()
	return err
}

// ctxTimeout bounds the housekeeping statements (leases, schema).
const ctxTimeout = 10 * time.Second

var (
	_ kv.Compactor = (*Store)(nil)
	_ kv.Retainer  = (*Store)(nil)
	_ kv.Sharer    = (*Store)(nil)
)

// SharedStore: every host's padfs writes the database.
func (s *Store) SharedStore() {}

// Retained is what the server keeps of deleted rows after Compact.
func (s *Store) Retained() string {
	return "PostgreSQL: the job ends with VACUUM (FULL) padfs_kv, after which no file of the table holds the deleted bytes; " +
		"the server's write-ahead log still holds them until its segment files are overwritten or removed after later checkpoints " +
		"(CHECKPOINT hastens that; a recycled segment keeps old bytes until it is reused), " +
		"and so do replicas, a WAL archive and backups until their administrator expires them"
}

// Compact rewrites the table (VACUUM FULL), so that no deleted row's bytes
// remain in its files: what hard forget and redaction promise. It holds an
// exclusive lock on the table while it runs, so every host's padfs waits.
// PostgreSQL's WAL (until its segments are recycled), its replicas and
// its backups still hold the bytes; that is for their administrators.
func (s *Store) Compact(progress func(done, total int64)) error {
	if s.closed.Load() {
		return kv.ErrClosed
	}
	if progress != nil {
		progress(0, 1)
	}
	// VACUUM cannot run inside a transaction: the simple protocol runs it
	// on its own.
	if _, err := s.pool.Exec(context.Background(), "VACUUM (FULL) padfs_kv"); err != nil {
		return s.wrap(err)
	}
	if progress != nil {
		progress(1, 1)
	}
	return nil
}
