// Package storeopen composes a store: a data directory (and optionally a
// store URL) -> kv drivers -> the mvcc store. It is the one place above
// mvcc that knows the concrete drivers, so mvcc itself imports none.
//
//	Open(dir, "")                    dir/padfs.db (bbolt) behind dir/wal/ (the embedded default)
//	Open(dir, "postgres://host/db")  a PostgreSQL database shared by many hosts; dir stays local
//
// The data directory always holds what is per host: the search index, the
// spill files of open writes and the control socket.
package storeopen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/mvcc/kv/bolt"
	"github.com/padfs/padfs/mvcc/kv/postgres"
	"github.com/padfs/padfs/mvcc/kv/wal"
)

// EnvStore is the environment variable that names the store when --store
// is not given.
const EnvStore = "PADFS_STORE"

// FollowInterval is how often a process on a shared store polls it for
// other processes' commits (one read of the HLC high-water mark) while it
// cannot LISTEN for their notifications.
const FollowInterval = time.Second

// IsURL reports whether s names a PostgreSQL store (postgres:// or
// postgresql://).
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open opens (creating if needed) the store of data directory dir: the
// PostgreSQL database at storeURL, or with storeURL "" the data
// directory's own bbolt store.
func Open(dir, storeURL string) (*mvcc.Store, error) {
	if storeURL == "" {
		return OpenDir(dir)
	}
	if !IsURL(storeURL) {
		scheme, _, _ := strings.Cut(storeURL, ":")
		return nil, fmt.Errorf("store %s:...: not a postgres:// URL (leave --store and $%s empty for the data directory's own store)",
			scheme, EnvStore)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pg, err := postgres.Open(ctx, storeURL, postgres.Options{PollInterval: FollowInterval})
	if err != nil {
		return nil, err
	}
	st, err := mvcc.New(pg)
	if err != nil {
		pg.Close()
		return nil, fmt.Errorf("store %s: %w", Redact(storeURL), err)
	}
	// Other hosts commit too: their commits reach this process's watchers
	// (the search index) when they NOTIFY, or within FollowInterval while
	// the listening connection is down.
	pg.Follow(func() error {
		_, err := st.PollOthers()
		return err
	})
	return st, nil
}

// Redact returns the URL without its password, for messages.
func Redact(storeURL string) string {
	cfg, err := pgx.ParseConfig(storeURL)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if strings.HasPrefix(cfg.Host, "/") {
		return fmt.Sprintf("postgres://%s@/%s?host=%s", cfg.User, cfg.Database, cfg.Host)
	}
	return fmt.Sprintf("postgres://%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

// Postgres returns st's PostgreSQL driver, if st is in PostgreSQL.
func Postgres(st *mvcc.Store) (*postgres.Store, bool) {
	pg, ok := st.KV().(*postgres.Store)
	return pg, ok
}

// corruptOpen is a store that cannot be opened because of damage: it is
// ErrCorrupt and says what fsck --repair would do about it.
type corruptOpen struct {
	err  error
	hint string
}

func (e *corruptOpen) Error() string   { return e.err.Error() + "; " + e.hint }
func (e *corruptOpen) Unwrap() []error { return []error{e.err, mvcc.ErrCorrupt} }

// OpenDir opens (creating if needed) the store in data directory dir:
// dir/padfs.db (bbolt) behind the group-commit log in dir/wal/. A commit is
// in the log (the kernel's page cache) when it returns, so it survives a
// kill -9 of padfs; Sync makes it survive a power loss; the log is folded
// into bbolt about once a second in one transaction.
func OpenDir(dir string) (*mvcc.Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dir, err)
	}
	if err := checkStoreFile(dir); err != nil {
		return nil, err
	}
	b, err := bolt.Open(filepath.Join(dir, mvcc.StoreFile), bolt.Options{})
	if errors.Is(err, bolt.ErrCorrupt) {
		return nil, &corruptOpen{err, "padfs cannot rebuild it: restore " + mvcc.StoreFile + " from a backup"}
	}
	if err != nil {
		return nil, err
	}
	w, err := wal.Open(filepath.Join(dir, mvcc.WALDir), b, wal.Options{})
	if err != nil {
		b.Close()
		switch {
		case errors.Is(err, wal.ErrRolledBack):
			err = &corruptOpen{err, rollbackHint}
		case errors.Is(err, wal.ErrCorrupt):
			err = &corruptOpen{err, fmt.Sprintf("`padfs fsck --repair` keeps the log before the damage and moves the rest to %s",
				filepath.Join(dir, mvcc.QuarantineDir))}
		}
		return nil, err
	}
	st, err := mvcc.New(w)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, mvcc.StoreFile), err)
	}
	// The names of a new data directory, store file and log directory must
	// survive a power loss as much as their contents do.
	if err := errors.Join(mvcc.SyncDir(dir), mvcc.SyncDir(filepath.Dir(dir))); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// ErrCorruptWAL is wrapped by OpenDir when the write-ahead log holds a
// damaged record that is not a torn tail.
var ErrCorruptWAL = wal.ErrCorrupt

const rollbackHint = "`padfs fsck --repair` accepts the store as it is"

// checkStoreFile refuses to let bbolt create an empty store where the log
// says a store was: a padfs.db deleted or truncated to nothing.
func checkStoreFile(dir string) error {
	walDir := filepath.Join(dir, mvcc.WALDir)
	st, found, err := wal.ReadState(walDir)
	if err != nil {
		return &corruptOpen{err, "`padfs fsck --repair` removes it"}
	}
	if !found {
		return nil
	}
	path := filepath.Join(dir, mvcc.StoreFile)
	fi, err := os.Stat(path)
	detail := ""
	switch {
	case errors.Is(err, os.ErrNotExist):
		detail = path + " is missing"
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case fi.Size() == 0:
		detail = path + " is empty"
	default:
		return nil
	}
	return &corruptOpen{&wal.RollbackError{Path: wal.StatePath(walDir), Record: st, Detail: detail}, rollbackHint}
}

// RepairDir repairs what keeps the data directory dir from opening: the
// log is cut before its first damaged record and the rest moved to
// DATA/quarantine/. It returns the problems found, each saying what was
// done and lost; none if the log is intact.
func RepairDir(dir string) ([]mvcc.Problem, error) {
	var out []mvcc.Problem
	walDir := filepath.Join(dir, mvcc.WALDir)
	// A store older than the fold record (or a fold record that does not
	// read) is accepted as it is: the record goes.
	rerr := checkStoreFile(dir)
	if rerr == nil {
		if b, err := bolt.Open(filepath.Join(dir, mvcc.StoreFile), bolt.Options{}); err == nil {
			rerr = wal.CheckBase(walDir, b)
			b.Close()
		}
	}
	if errors.Is(rerr, wal.ErrRolledBack) || errors.Is(rerr, wal.ErrCorrupt) {
		if err := wal.RemoveState(walDir); err != nil {
			return out, err
		}
		out = append(out, mvcc.Problem{Kind: mvcc.ProblemStore, Path: filepath.Join(dir, mvcc.StoreFile), Detail: oneLineErr(rerr),
			Repaired: "accepted the store as it is (removed " + wal.StatePath(walDir) + "); the commits it no longer holds are lost"})
	}
	lost, err := wal.Salvage(walDir, filepath.Join(dir, mvcc.QuarantineDir))
	for _, l := range lost {
		detail := fmt.Sprintf("%d bytes from offset %d", l.Bytes, l.Offset)
		if l.Reason != "" {
			detail = fmt.Sprintf("damaged record at offset %d (%s); %d bytes from there on", l.Offset, l.Reason, l.Bytes)
		}
		var commits []string
		for _, op := range l.Ops {
			if c, ok := mvcc.DescribeEventRecord(op.Key, op.Value, op.Delete); ok {
				commits = append(commits, c)
			}
		}
		p := mvcc.Problem{Kind: mvcc.ProblemWAL, Path: l.Segment, Detail: detail, Lost: commits,
			Repaired: fmt.Sprintf("moved to %s; %d intact log records after the damage are lost (%d commits)", l.Quarantine, l.Records, len(commits))}
		if len(commits) > 0 {
			shown := commits[:min(len(commits), 5)]
			p.Repaired += ": " + strings.Join(shown, ", ")
			if len(commits) > len(shown) {
				p.Repaired += fmt.Sprintf(" and %d more (--json lists them all)", len(commits)-len(shown))
			}
		}
		out = append(out, p)
	}
	return out, err
}

func oneLineErr(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// LeaseMount takes the writer's lease for a read-write mount of session
// sid (nil: of every session) if st is shared (PostgreSQL): every commit
// of this process then checks that it still holds it. A store of its own
// (bbolt) needs none: its file lock already admits one process. The
// error, if another process holds the lease, is one line naming it. A
// holder that stops renewing (kill -9, a pause, a partition) loses the
// lease ttl after its last renewal (0: postgres.DefaultTTL, 15 s).
func LeaseMount(st *mvcc.Store, sid *mvcc.SessionID, ttl time.Duration) (release func() error, err error) {
	pg, ok := Postgres(st)
	if !ok {
		return func() error { return nil }, nil
	}
	name, what := postgres.AllNames, "all sessions"
	var key []byte
	if sid != nil {
		// A session's lease also guards its keys: this process's reads of
		// them need no round trip (postgres/localread.go).
		name, what, key = sid.String(), "session "+sid.String(), sid[:]
	}
	host, _ := os.Hostname()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ttl <= 0 {
		ttl = postgres.DefaultTTL
	}
	l, err := pg.Acquire(ctx, name, postgres.LeaseOptions{Host: host, Pid: os.Getpid(), TTL: ttl, Session: key})
	var he *postgres.HeldError
	switch {
	case errors.As(err, &he):
		holder := "it is"
		if he.Name != name {
			holder = "session " + he.Name + " is"
			if he.Name == postgres.AllNames {
				holder = "all sessions are"
			}
		}
		return nil, fmt.Errorf("cannot mount %s read-write: %s mounted by pid %d on host %s since %s (%w; a crashed holder's lease expires %s after it stopped; --asof mounts read-only anywhere)",
			what, holder, he.Pid, he.Host, he.Since.UTC().Format(time.RFC3339), postgres.ErrHeld, ttl)
	case err != nil:
		return nil, fmt.Errorf("cannot mount %s: take its lease: %w", what, err)
	}
	return l.Release, nil
}

// HeldElsewhere returns who holds session sid's lease if st is shared and
// another process holds it (a read-write mount on another host): only
// that process may commit to the session (postgres/localread.go).
func HeldElsewhere(st *mvcc.Store, sid mvcc.SessionID) (*postgres.HeldError, error) {
	pg, ok := Postgres(st)
	if !ok || pg.Holds(sid.String()) {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pg.Holder(ctx, sid.String())
}

// TakeOverLease takes session sid's lease from whoever holds it, for an
// override that must commit to the session anyway (forget --force): the
// holder's commits fail from then on, and it returns once the holder's
// lease has run out (up to its TTL), so that the holder reads nothing
// stale. It returns the holder (nil if another process held none) and
// the release of the lease.
func TakeOverLease(st *mvcc.Store, sid mvcc.SessionID, taking func(*postgres.HeldError)) (*postgres.HeldError, func() error, error) {
	pg, ok := Postgres(st)
	if !ok || pg.Holds(sid.String()) {
		return nil, func() error { return nil }, nil
	}
	host, _ := os.Hostname()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, h, err := pg.TakeOver(ctx, sid.String(), postgres.LeaseOptions{Host: host, Pid: os.Getpid(), Session: sid[:], OnTakeOver: taking})
	if err != nil {
		return nil, nil, fmt.Errorf("session %s: take its lease: %w", sid, err)
	}
	return h, l.Release, nil
}
