package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Holder returns who holds the lease name now (exactly that name, not
// AllNames), or nil when no live holder does. It takes nothing: commands
// that must not act on a session another process writes (a forget) ask
// it.
func (s *Store) Holder(ctx context.Context, name string) (*HeldError, error) {
	if s.closed.Load() {
		return nil, errClosed
	}
	var h HeldError
	err := s.pool.QueryRow(ctx, `SELECT name, host, pid, since, expires FROM padfs_lease
		WHERE name = $1 AND expires > clock_timestamp()`, name).
		Scan(&h.Name, &h.Host, &h.Pid, &h.Since, &h.Expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, s.wrap(err)
	}
	return &h, nil
}

// Holds reports whether this process holds the lease name.
func (s *Store) Holds(name string) bool {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	l := s.leases[name]
	return l != nil && !l.Lost()
}
