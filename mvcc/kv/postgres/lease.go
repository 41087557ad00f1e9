package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Leases give one process at a time the right to write something (a
// session): a row (name, token, holder host and pid, since, expires). The
// holder renews it every TTL/3; a holder that stops (kill -9, a pause, a
// partition) loses it TTL after its last renewal, by the server's clock,
// and the next Acquire takes it over with token+1. Every commit of a
// process checks, inside its transaction and under the writer lock, that
// each lease it holds still carries its token and has not expired
// (qLogChange; padfs_fence for a commit that writes nothing): a former
// holder can never commit after losing its lease, because taking a lease
// over also takes the writer lock.
//
// The name "*" stands for everything: it conflicts with every other lease
// (a mount of all sessions), and every lease conflicts with it.
//
// A session's lease (LeaseOptions.Session) also makes its holder the only
// process that may commit to that session's keys: the guard (checked by
// every commit's change row, qLogChange, under the writer lock, and by
// padfs_changes_guard for writers that do not) refuses, naming the
// holder, a commit that touches a partition of a session whose lease is
// live and not the committer's; a writer that does not log (SQL by hand) logs the partition
// "" (everything), which the guard refuses while any session's lease is
// live. So while the lease lives, nothing changes the session's keys but
// this process's own commits, and its reads of them can be served from
// the cache with no round trip (lease-local reads: localread.go). The
// privilege ends, by this process's monotonic clock, at the start of the
// last renewal that succeeded + TTL - TTL/4: before the server lets
// anyone else take the lease (TTL after that renewal reached it, by the
// server's clock), unless the two clocks' rates differ by a quarter.

// AllNames is the lease name that conflicts with every other.
const AllNames = "*"

// DefaultTTL is how long a lease outlives its holder's last renewal.
const DefaultTTL = 15 * time.Second

// ErrFenced wraps a commit's error when a lease this process held was
// lost (expired, or taken over by another holder): nothing was written.
var ErrFenced = errors.New("lease lost: another process may hold it now")

// ErrHeld is wrapped by Acquire's *HeldError.
var ErrHeld = errors.New("lease held by another process")

// HeldError says who holds a lease Acquire wanted.
type HeldError struct {
	Name    string
	Host    string
	Pid     int
	Since   time.Time
	Expires time.Time
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("held by pid %d on host %s since %s (lease %q, expires %s unless renewed)",
		e.Pid, e.Host, e.Since.UTC().Format(time.RFC3339), e.Name, e.Expires.UTC().Format(time.RFC3339))
}

func (e *HeldError) Unwrap() error { return ErrHeld }

// Lease is a lease this process holds.
type Lease struct {
	s     *Store
	name  string
	token int64
	ttl   time.Duration

	sid   []byte       // the session whose keys it guards; nil: none
	until atomic.Int64 // monoNow() at which its lease-local reads stop

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	mu      sync.Mutex
	lost    bool
}

// monoBase anchors monoNow.
var monoBase = time.Now()

// monoNow is the monotonic clock, in nanoseconds since monoBase (a SIGSTOP
// does not stop it).
func monoNow() int64 { return int64(time.Since(monoBase)) }

// extend moves the end of the lease-local privilege to sent + TTL - TTL/4,
// where sent is monoNow() before the statement that set the lease's
// expiry to (the server's clock) + TTL was sent.
func (l *Lease) extend(sent int64) {
	l.until.Store(sent + int64(l.ttl-l.ttl/4))
}

// local reports whether reads of the lease's session may be served from
// the cache: the lease is held, renewed in time, and not found lost.
func (l *Lease) local() bool {
	if l.sid == nil || monoNow() >= l.until.Load() {
		return false
	}
	return !l.Lost()
}

// LeaseOptions tunes Acquire.
type LeaseOptions struct {
	Host string        // the holder's host name, shown to whoever is refused
	Pid  int           // the holder's pid
	TTL  time.Duration // default DefaultTTL
	// NoRenew leaves the lease to expire (tests of a paused holder).
	NoRenew bool
	// Session is the 16-byte id of the session whose keys the lease
	// guards (see above); nil: it guards nothing.
	Session []byte
	// OnTakeOver, if set, is told whom TakeOver takes the lease from
	// before it waits for that holder's lease to run out.
	OnTakeOver func(*HeldError)
}

// Acquire takes the lease name, or fails with a *HeldError naming its live
// holder. The lease is renewed in the background until Release (or Close).
func (s *Store) Acquire(ctx context.Context, name string, opt LeaseOptions) (*Lease, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	if opt.TTL <= 0 {
		opt.TTL = DefaultTTL
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer c.Release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return nil, s.wrap(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(writerLock)); err != nil {
		return nil, s.wrap(err)
	}
	var h HeldError
	err = tx.QueryRow(ctx, `SELECT name, host, pid, since, expires FROM padfs_lease
		WHERE expires > clock_timestamp() AND (name = $1 OR name = $2 OR $1 = $2) LIMIT 1`, name, AllNames).
		Scan(&h.Name, &h.Host, &h.Pid, &h.Since, &h.Expires)
	switch {
	case err == nil:
		return nil, &h
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, s.wrap(err)
	}
	return s.takeLocked(ctx, tx, name, opt, 0)
}

// takeLocked writes the lease row for this process in tx (which holds the
// writer lock) and commits; wait is how long to wait after that before
// the lease is used (TakeOver's).
func (s *Store) takeLocked(ctx context.Context, tx pgx.Tx, name string, opt LeaseOptions, wait time.Duration) (*Lease, error) {
	l := &Lease{s: s, name: name, ttl: opt.TTL, sid: bytes.Clone(opt.Session), stop: make(chan struct{}), stopped: make(chan struct{})}
	sent := monoNow()
	// A lease taken over must outlive the wait for its former holder.
	err := tx.QueryRow(ctx, `INSERT INTO padfs_lease (name, token, host, pid, since, expires, sid)
		VALUES ($1, 1, $2, $3, clock_timestamp(), clock_timestamp() + ($4::bigint + $6::bigint) * interval '1 millisecond', $5)
		ON CONFLICT (name) DO UPDATE SET token = padfs_lease.token + 1, host = EXCLUDED.host, pid = EXCLUDED.pid,
			since = EXCLUDED.since, expires = EXCLUDED.expires, sid = EXCLUDED.sid
		RETURNING token`, name, opt.Host, opt.Pid, opt.TTL.Milliseconds(), l.sid, wait.Milliseconds()).Scan(&l.token)
	if err != nil {
		return nil, s.wrap(err)
	}
	// Commits up to now may have changed the session; later ones of others
	// cannot (the guard).
	var g int64
	if err := tx.QueryRow(ctx, "SELECT coalesce(max(gen), 0) FROM padfs_changes").Scan(&g); err != nil {
		return nil, s.wrap(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, s.wrap(err)
	}
	s.raiseFloor(g)
	if wait > 0 {
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			// Taken, but the former holder may still read: give it up.
			s.pool.Exec(context.Background(), "UPDATE padfs_lease SET expires = clock_timestamp() WHERE name = $1 AND token = $2", name, l.token)
			return nil, fmt.Errorf("take lease %q over: %w", name, ctx.Err())
		}
		// Renew it now: the wait used up part of it.
		sent = monoNow()
		tag, err := s.pool.Exec(ctx, `UPDATE padfs_lease SET expires = clock_timestamp() + $3 * interval '1 millisecond'
			WHERE name = $1 AND token = $2`, name, l.token, opt.TTL.Milliseconds())
		if err != nil {
			return nil, s.wrap(err)
		}
		if tag.RowsAffected() == 0 {
			return nil, fmt.Errorf("take lease %q over: %w", name, ErrFenced) // it ran out while we waited, and was taken
		}
	}
	l.extend(sent)
	s.leaseMu.Lock()
	s.leases[name] = l
	s.leaseMu.Unlock()
	s.relist()
	if opt.NoRenew {
		close(l.stopped)
	} else {
		go l.renew()
	}
	return l, nil
}

// TakeOver takes the lease name even from a live holder (an override such
// as `session forget --force`): the holder's commits fail from then on
// (its token is stale), and TakeOver returns once the holder's lease has
// run out by the server's clock, so that the holder's lease-local reads
// have stopped before this process commits anything. It returns the
// holder it took the lease from (nil if none held it).
func (s *Store) TakeOver(ctx context.Context, name string, opt LeaseOptions) (*Lease, *HeldError, error) {
	if s.closed.Load() {
		return nil, nil, errClosed
	}
	if opt.TTL <= 0 {
		opt.TTL = DefaultTTL
	}
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	defer c.Release()
	tx, err := c.Begin(ctx)
	if err != nil {
		return nil, nil, s.wrap(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(writerLock)); err != nil {
		return nil, nil, s.wrap(err)
	}
	var h HeldError
	var left time.Duration
	var ms float64
	err = tx.QueryRow(ctx, `SELECT name, host, pid, since, expires, extract(epoch FROM expires - clock_timestamp()) * 1000 FROM padfs_lease
		WHERE expires > clock_timestamp() AND (name = $1 OR name = $2 OR $1 = $2) ORDER BY expires DESC LIMIT 1`, name, AllNames).
		Scan(&h.Name, &h.Host, &h.Pid, &h.Since, &h.Expires, &ms)
	var held *HeldError
	switch {
	case err == nil:
		held = &h
		left = time.Duration(ms*float64(time.Millisecond)) + 50*time.Millisecond
		if h.Name != name {
			return nil, &h, &h // another name ("*" or a session under "*"): not ours to take
		}
		if opt.OnTakeOver != nil {
			opt.OnTakeOver(&h)
		}
	case !errors.Is(err, pgx.ErrNoRows):
		return nil, nil, s.wrap(err)
	}
	l, err := s.takeLocked(ctx, tx, name, opt, left)
	return l, held, err
}

var errClosed = errors.New("postgres store: closed")

func (s *Store) heldLeases() []*Lease {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	ls := make([]*Lease, 0, len(s.leases))
	for _, l := range s.leases {
		ls = append(ls, l)
	}
	return ls
}

// Token is the lease's fencing token: it grows with every holder.
func (l *Lease) Token() int64 { return l.token }

// Lost reports whether a renewal found the lease expired or taken over.
func (l *Lease) Lost() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

func (l *Lease) renew() {
	defer close(l.stopped)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ctxTimeout)
		sent := monoNow()
		// Renewing an expired lease that nobody took over (the server was
		// away longer than the TTL) is safe: a taker would have changed
		// the token, and commits in between failed their check.
		// A lease that had run out may have let another process commit to
		// the session meanwhile: lease-local reads then wait for the cache
		// to see the commits up to the renewal.
		var lapsed bool
		var g int64
		err := l.s.pool.QueryRow(ctx, `WITH old AS (SELECT expires <= clock_timestamp() AS lapsed FROM padfs_lease WHERE name = $1 AND token = $2)
			UPDATE padfs_lease SET expires = clock_timestamp() + $3 * interval '1 millisecond' FROM old
			WHERE name = $1 AND token = $2 RETURNING old.lapsed`, l.name, l.token, l.ttl.Milliseconds()).Scan(&lapsed)
		if err == nil && lapsed {
			err = l.s.pool.QueryRow(ctx, "SELECT coalesce(max(gen), 0) FROM padfs_changes").Scan(&g)
		}
		cancel()
		switch {
		case err != nil && !errors.Is(err, pgx.ErrNoRows):
			slog.Warn("renew lease", "lease", l.name, "err", err) // next tick retries
		case err != nil:
			slog.Error("lease lost: commits will fail", "lease", l.name, "token", l.token)
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
			return
		default:
			if lapsed {
				l.s.raiseFloor(g)
			}
			l.extend(sent)
		}
	}
}

// Release gives the lease up: it expires now (the row and its token stay,
// so tokens keep growing) and commits stop checking it.
func (l *Lease) Release() error {
	l.s.flushDeferred() // they commit under this lease
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.stopped
		l.until.Store(0) // no lease-local read from now on, before the server lets others in
		l.s.leaseMu.Lock()
		if l.s.leases[l.name] == l {
			delete(l.s.leases, l.name)
		}
		l.s.leaseMu.Unlock()
		l.s.relist()
		ctx, cancel := context.WithTimeout(context.Background(), ctxTimeout)
		defer cancel()
		_, err = l.s.pool.Exec(ctx, "UPDATE padfs_lease SET expires = clock_timestamp() WHERE name = $1 AND token = $2",
			l.name, l.token)
		if err != nil {
			err = fmt.Errorf("release lease %q: %w", l.name, l.s.wrap(err))
		}
	})
	return err
}
