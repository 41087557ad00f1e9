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
//     the callback keeps asking for more.
//   - Updates are serialized across every process on the database by a
//     transaction-scoped advisory lock, so a READ COMMITTED transaction
//     that holds it reads everything committed before it and nothing
//     commits beside it. Writes are buffered in memory (reads see them) and
//     sent at commit as one INSERT ... ON CONFLICT over arrays and one
//     DELETE ... = ANY, pipelined with the lease checks and the COMMIT: one
//     round trip.
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
}

// Store is a kv.Store in PostgreSQL. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	opts   Options
	closed atomic.Bool
	desc   string // host/database, for errors

	// mu serializes the Updates' callbacks and owns the open batch.
	mu      sync.Mutex
	waiting atomic.Int32 // Updates blocked on mu
	batch   *batch

	leaseMu sync.Mutex
	leases  map[string]*Lease // held by this process, checked at every commit
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
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	cfg.MaxConns = opts.MaxConns
	cfg.ConnConfig.RuntimeParams["application_name"] = "padfs"
	desc := cfg.ConnConfig.Host + "/" + cfg.ConnConfig.Database
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store %s: %w", desc, err)
	}
	s := &Store{pool: pool, opts: opts, desc: desc, leases: map[string]*Lease{}}
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
CREATE OR REPLACE FUNCTION padfs_fence(n text, tok bigint) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM padfs_lease WHERE name = n AND token = tok AND expires > clock_timestamp()) THEN
		RAISE EXCEPTION 'lease % (token %) is no longer held', n, tok USING ERRCODE = 'PF001';
	END IF;
END $f$;
`

// fencedCode is the SQLSTATE padfs_fence raises.
const fencedCode = "PF001"

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
	return fmt.Errorf("postgres store %s: %w", s.desc, err)
}

// --- reads ---

// View runs fn in a REPEATABLE READ READ ONLY transaction.
func (s *Store) View(fn func(kv.Reader) error) error {
	if s.closed.Load() {
		return kv.ErrClosed
	}
	ctx := context.Background()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.wrap(err)
	}
	defer c.Release()
	// The snapshot is taken at the first statement: take it now, so the
	// View sees nothing committed after it began.
	if _, err := c.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1"); err != nil {
		return s.wrap(err)
	}
	r := &reader{s: s, q: c}
	ferr := fn(r)
	if _, err := c.Exec(ctx, "ROLLBACK"); err != nil && ferr == nil {
		ferr = s.wrap(err)
	}
	r.done = true
	return ferr
}

// querier is a connection in a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// reader reads the database inside a transaction.
type reader struct {
	s    *Store
	q    querier
	done bool
	err  error // a failed query: the transaction is aborted
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
	var v []byte
	err := r.q.QueryRow(context.Background(), "SELECT v FROM padfs_kv WHERE k = $1", key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		r.err = r.s.wrap(err)
		return nil, r.err
	}
	if v == nil {
		v = []byte{}
	}
	return v, nil
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

// Page sizes: a Scan that stops at its first key (a version-chain seek)
// costs a small page; one that walks a range grows to big pages.
const (
	firstPage = 8
	maxPage   = 512
)

// pager reads rows of [start, end) in key order, a page at a time.
type pager struct {
	r        *reader
	end      []byte
	after    []byte // the last key read; nil before the first page
	start    []byte
	size     int
	rows     []row
	i        int
	finished bool // the last page was short: no more rows
}

type row struct{ k, v []byte }

func (r *reader) pages(start, end []byte) *pager {
	if start == nil {
		start = []byte{}
	}
	return &pager{r: r, start: bytes.Clone(start), end: bytes.Clone(end), size: firstPage}
}

// next returns the next row (ok false at the end of the range).
func (p *pager) next() (k, v []byte, ok bool, err error) {
	if p.i == len(p.rows) {
		if p.finished {
			return nil, nil, false, nil
		}
		if err := p.fill(); err != nil {
			return nil, nil, false, err
		}
		if len(p.rows) == 0 {
			return nil, nil, false, nil
		}
	}
	rw := p.rows[p.i]
	p.i++
	return rw.k, rw.v, true, nil
}

func (p *pager) fill() error {
	if p.end != nil && bytes.Compare(p.start, p.end) >= 0 {
		p.rows, p.i, p.finished = nil, 0, true
		return nil
	}
	var sql string
	args := []any{}
	lower := "k >= $1"
	if p.after != nil {
		lower = "k > $1"
		args = append(args, p.after)
	} else {
		args = append(args, p.start)
	}
	if p.end != nil {
		sql = "SELECT k, v FROM padfs_kv WHERE " + lower + " AND k < $2 ORDER BY k LIMIT $3"
		args = append(args, p.end)
	} else {
		sql = "SELECT k, v FROM padfs_kv WHERE " + lower + " ORDER BY k LIMIT $2"
	}
	args = append(args, p.size)
	rows, err := p.r.q.Query(context.Background(), sql, args...)
	if err != nil {
		p.r.err = p.r.s.wrap(err)
		return p.r.err
	}
	p.rows, p.i = p.rows[:0], 0
	for rows.Next() {
		var rw row
		if err := rows.Scan(&rw.k, &rw.v); err != nil {
			rows.Close()
			p.r.err = p.r.s.wrap(err)
			return p.r.err
		}
		if rw.v == nil {
			rw.v = []byte{}
		}
		p.rows = append(p.rows, rw)
	}
	if err := rows.Err(); err != nil {
		p.r.err = p.r.s.wrap(err)
		return p.r.err
	}
	if len(p.rows) < p.size {
		p.finished = true
	} else {
		p.after = p.rows[len(p.rows)-1].k
		p.size = min(p.size*4, maxPage)
	}
	return nil
}

// --- writes ---

// batch is one PostgreSQL transaction shared by the Updates of a group
// commit.
type batch struct {
	conn  *pgxpool.Conn
	r     *reader
	ov    *btree.BTreeG[entry] // buffered writes, newest per key
	bytes int
	n     int           // Updates that succeeded in it
	done  chan struct{} // closed after COMMIT (or its failure)
	err   error         // the COMMIT's outcome
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
	s.waiting.Add(1)
	s.mu.Lock()
	s.waiting.Add(-1)
	if s.closed.Load() {
		s.mu.Unlock()
		return kv.ErrClosed
	}
	b := s.batch
	if b == nil {
		var err error
		if b, err = s.beginLocked(); err != nil {
			s.mu.Unlock()
			return err
		}
		s.batch = b
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
	// Commit when nobody else is about to join, or the batch is full.
	if s.waiting.Load() == 0 || b.n >= s.opts.MaxBatch || b.bytes >= s.opts.MaxBatchBytes || b.r.err != nil {
		s.batch = nil
		s.finishLocked(b)
	}
	s.mu.Unlock()
	if panicked != nil {
		panic(panicked) // after its writes were undone and the lock released, as bbolt does
	}
	if ferr != nil {
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
	ctx := context.Background()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.wrap(err)
	}
	if _, err := c.Exec(ctx, fmt.Sprintf("BEGIN; SELECT pg_advisory_xact_lock(%d)", writerLock)); err != nil {
		c.Release()
		return nil, s.wrap(err)
	}
	return &batch{conn: c, r: &reader{s: s, q: c}, ov: btree.NewBTreeGOptions(entryLess, btree.Options{NoLocks: true}),
		done: make(chan struct{})}, nil
}

// finishLocked commits the batch (or rolls it back if no Update in it
// succeeded) and wakes its Updates.
func (s *Store) finishLocked(b *batch) {
	defer close(b.done)
	defer b.conn.Release()
	ctx := context.Background()
	if b.n == 0 || b.r.err != nil {
		b.err = b.r.err
		if _, err := b.conn.Exec(ctx, "ROLLBACK"); err != nil && b.err == nil {
			b.err = s.wrap(err)
		}
		return
	}
	var puts, vals, dels [][]byte
	b.ov.Scan(func(e entry) bool {
		if e.del {
			dels = append(dels, []byte(e.k))
		} else {
			puts = append(puts, []byte(e.k))
			vals = append(vals, e.v)
		}
		return true
	})
	pb := &pgx.Batch{}
	if len(puts) > 0 {
		pb.Queue("INSERT INTO padfs_kv (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v", puts, vals)
	}
	if len(dels) > 0 {
		pb.Queue("DELETE FROM padfs_kv WHERE k = ANY($1::bytea[])", dels)
	}
	for _, l := range s.heldLeases() {
		pb.Queue("SELECT padfs_fence($1, $2)", l.name, l.token)
	}
	pb.Queue("COMMIT")
	err := b.conn.SendBatch(ctx, pb).Close()
	if err != nil || b.conn.Conn().PgConn().TxStatus() != 'I' {
		b.conn.Exec(ctx, "ROLLBACK")
		if err == nil {
			err = errors.New("transaction did not commit")
		}
		b.err = s.wrap(err)
	}
}

// undo restores a key of the batch's buffer when an Update fails.
type undo struct {
	had bool
	e   entry
}

// txn is one Update's view of its batch.
type txn struct {
	b     *batch
	undo  map[string]undo // keys this Update wrote: their state before it
	ended bool
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

// Sync returns at once: a committed Update is in PostgreSQL's log.
func (s *Store) Sync() error {
	if s.closed.Load() {
		return kv.ErrClosed
	}
	return nil
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
	var err error
	for _, l := range s.heldLeases() {
		err = errors.Join(err, l.Release())
	}
	s.pool.Close()
	return err
}

// ctxTimeout bounds the housekeeping statements (leases, schema).
const ctxTimeout = 10 * time.Second

var _ kv.Compactor = (*Store)(nil)

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
