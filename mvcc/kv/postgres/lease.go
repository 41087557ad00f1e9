package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
// (padfs_fence): a former holder can never commit after losing its lease,
// because taking a lease over also takes the writer lock.
//
// The name "*" stands for everything: it conflicts with every other lease
// (a mount of all sessions), and every lease conflicts with it.

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

	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	mu      sync.Mutex
	lost    bool
}

// LeaseOptions tunes Acquire.
type LeaseOptions struct {
	Host string        // the holder's host name, shown to whoever is refused
	Pid  int           // the holder's pid
	TTL  time.Duration // default DefaultTTL
	// NoRenew leaves the lease to expire (tests of a paused holder).
	NoRenew bool
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
	l := &Lease{s: s, name: name, ttl: opt.TTL, stop: make(chan struct{}), stopped: make(chan struct{})}
	err = tx.QueryRow(ctx, `INSERT INTO padfs_lease (name, token, host, pid, since, expires)
		VALUES ($1, 1, $2, $3, clock_timestamp(), clock_timestamp() + $4 * interval '1 millisecond')
		ON CONFLICT (name) DO UPDATE SET token = padfs_lease.token + 1, host = EXCLUDED.host, pid = EXCLUDED.pid,
			since = EXCLUDED.since, expires = EXCLUDED.expires
		RETURNING token`, name, opt.Host, opt.Pid, opt.TTL.Milliseconds()).Scan(&l.token)
	if err != nil {
		return nil, s.wrap(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, s.wrap(err)
	}
	s.leaseMu.Lock()
	s.leases[name] = l
	s.leaseMu.Unlock()
	if opt.NoRenew {
		close(l.stopped)
	} else {
		go l.renew()
	}
	return l, nil
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
		// Renewing an expired lease that nobody took over (the server was
		// away longer than the TTL) is safe: a taker would have changed
		// the token, and commits in between failed their check.
		tag, err := l.s.pool.Exec(ctx, `UPDATE padfs_lease SET expires = clock_timestamp() + $3 * interval '1 millisecond'
			WHERE name = $1 AND token = $2`, l.name, l.token, l.ttl.Milliseconds())
		cancel()
		switch {
		case err != nil:
			slog.Warn("renew lease", "lease", l.name, "err", err) // next tick retries
		case tag.RowsAffected() == 0:
			slog.Error("lease lost: commits will fail", "lease", l.name, "token", l.token)
			l.mu.Lock()
			l.lost = true
			l.mu.Unlock()
			return
		}
	}
}

// Release gives the lease up: it expires now (the row and its token stay,
// so tokens keep growing) and commits stop checking it.
func (l *Lease) Release() error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.stopped
		l.s.leaseMu.Lock()
		if l.s.leases[l.name] == l {
			delete(l.s.leases, l.name)
		}
		l.s.leaseMu.Unlock()
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
