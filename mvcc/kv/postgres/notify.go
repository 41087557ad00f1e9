package postgres

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// Following other processes' commits. Every commit that writes NOTIFYs
// notifyChannel, with the committing process's id as payload, in its own
// transaction (so the notification is delivered when, and only if, it
// commits). A process that follows the store LISTENs on a connection of
// its own and calls its poll function (mvcc's PollOthers) on each
// notification from another process. While that connection is down it
// polls every PollInterval instead, polls once when it is back (for what it
// missed), and while it is up it still polls every safetyPoll, in case the
// connection died without telling (a partition).

const notifyChannel = "padfs_commit"

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
