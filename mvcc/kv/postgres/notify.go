package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Following other processes' commits. A process that commits NOTIFYs
// notifyChannel, with its id as payload, within notifyEvery of each of its
// commits that wrote, in a transaction of its own that begins after that
// commit returned (notifyLater): every commit is followed by a
// notification that commits after it, so a follower that polls the log
// when it hears one sees the commit; commits within notifyEvery of each
// other share one notification. (A NOTIFY in every commit cost about a
// fifth of the server's CPU per commit, and woke every listener, this
// process's own too, once per commit.) A process that follows the store
// LISTENs on a connection of its own and calls its poll function (mvcc's
// PollOthers) on each notification from another process. While that
// connection is down it polls every PollInterval instead, polls once when
// it is back (for what it missed), and while it is up it still polls every
// safetyPoll, in case the connection died without telling (a partition).
// Reads never depend on notifications: every transaction reads the log of
// changes in its first round trip (cache.go).

const notifyChannel = "padfs_commit"

// notifyEvery is how long after a commit its notification may wait for the
// commits that follow it: how much later than its commit another host's
// index may hear of it.
const notifyEvery = 10 * time.Millisecond

// notifier coalesces a process's notifications (notifyLater).
type notifier struct {
	mu     sync.Mutex
	armed  bool // a notification is due: its timer is running
	closed bool
}

// notifyLater makes sure a notification is sent within notifyEvery; call it
// after a commit that wrote has committed.
func (s *Store) notifyLater() { s.notifyAfter(notifyEvery) }

// notifyAfter sends a notification after d, unless one is due already.
func (s *Store) notifyAfter(d time.Duration) {
	n := &s.notes
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.armed || n.closed {
		return
	}
	n.armed = true
	time.AfterFunc(d, func() { s.sendNotify(false) })
}

// notifyRetryAfter is how long a notification that could not be sent waits
// before it is tried again.
const notifyRetryAfter = time.Second

// sendNotify sends the due notification (last: the store is closing, and
// no timer may send one after it). A notification that cannot be sent is
// retried; the followers also poll when their listening connection comes
// back, and every safetyPoll.
func (s *Store) sendNotify(last bool) {
	n := &s.notes
	n.mu.Lock()
	due := n.armed && !n.closed
	n.closed = n.closed || last
	n.armed = false // commits from now on need a notification after this one
	n.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ctxTimeout)
	defer cancel()
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", notifyChannel, s.id); err != nil {
		slog.Debug("notify the other processes of our commits", "store", s.desc, "err", err)
		if !last {
			s.notifyAfter(notifyRetryAfter)
		}
	}
}

// safetyPoll is how often a process polls while it is listening.
const safetyPoll = 10 * time.Second

// Follow calls poll whenever another process may have committed, from a
// goroutine of its own, until Close. Call it once.
func (s *Store) Follow(poll func() error) {
	s.bg.Add(2)
	go s.listen()
	go func() {
		defer s.bg.Done()
		for {
			wait := s.opts.PollInterval
			if s.listening.Load() {
				wait = safetyPoll
			}
			t := time.NewTimer(wait)
			select {
			case <-s.stopBg:
				t.Stop()
				return
			case <-s.wake:
			case <-t.C:
			}
			t.Stop()
			if err := poll(); err != nil {
				slog.Debug("follow the store", "store", s.desc, "err", err)
			}
		}
	}()
}

// Listening reports whether the store hears other processes' commits
// (Follow's connection is up).
func (s *Store) Listening() bool { return s.listening.Load() }

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// listen keeps a connection LISTENing, reconnecting after a failure.
func (s *Store) listen() {
	defer s.bg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-s.stopBg
		cancel()
	}()
	for {
		err := s.listenOnce(ctx)
		s.listening.Store(false)
		select {
		case <-s.stopBg:
			return
		default:
		}
		slog.Debug("listen for other processes' commits; polling meanwhile", "store", s.desc, "err", err)
		t := time.NewTimer(min(s.opts.PollInterval, time.Second))
		select {
		case <-s.stopBg:
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (s *Store) listenOnce(ctx context.Context) error {
	cfg := s.connCfg.Copy()
	cfg.RuntimeParams["application_name"] = "padfs-listen"
	c, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return err
	}
	s.listening.Store(true)
	s.signal() // what committed while nobody listened
	for {
		n, err := c.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload != s.id {
			s.signal()
		}
	}
}
