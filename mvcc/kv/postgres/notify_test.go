package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/padfs/padfs/internal/pgtest"
	"github.com/padfs/padfs/mvcc/kv/postgres"
)

// Follow hears another process's commits through LISTEN/NOTIFY (with a
// poll interval of an hour, nothing else would wake it), not its own; when
// its listening connection is killed it reconnects and polls for what it
// missed.
func TestFollowNotify(t *testing.T) {
	url := pgtest.DB(t)
	a, err := postgres.Open(context.Background(), url, postgres.Options{PollInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b := open(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	polls := make(chan struct{}, 100)
	a.Follow(func() error {
		polls <- struct{}{}
		return nil
	})
	waitPoll := func(what string) {
		t.Helper()
		select {
		case <-polls:
		case <-time.After(time.Minute):
			t.Fatalf("no poll a minute after %s", what)
		}
	}
	waitPoll("Follow began listening") // the catch-up poll
	for !a.Listening() {
		time.Sleep(10 * time.Millisecond)
	}
	putKV(t, b, "k", "1")
	waitPoll("another process's commit")
	// Our own commit wakes nobody: the next poll is b's commit after it.
	putKV(t, a, "k", "2")
	putKV(t, b, "k", "3")
	waitPoll("another process's commit")
	select {
	case <-polls:
		t.Errorf("a polled for its own commit")
	default:
	}
	// Kill the listening connection: a reconnects and polls.
	if _, err := b.Pool().Exec(context.Background(),
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'padfs-listen' AND datname = current_database()"); err != nil {
		t.Fatal(err)
	}
	waitPoll("its listening connection was killed")
	for !a.Listening() {
		time.Sleep(10 * time.Millisecond)
	}
	putKV(t, b, "k", "4")
	waitPoll("another process's commit, after the reconnection")
}

// A process's commits in a burst share notifications, but each is followed
// by one that commits after it: also the last commits before Close.
func TestNotifyCoalesced(t *testing.T) {
	url := pgtest.DB(t)
	ctx := context.Background()
	l, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(ctx)
	if _, err := l.Exec(ctx, "LISTEN padfs_commit"); err != nil {
		t.Fatal(err)
	}
	b := open(t, url)
	// The payload of b's notifications: b's id, unknown to the test; the
	// test's own end marker is told apart by its payload.
	const n = 50
	for i := range n {
		putKV(t, b, "k", fmt.Sprint(i))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Notifications come in commit order: b's come before the marker.
	if _, err := l.Exec(ctx, "SELECT pg_notify('padfs_commit', 'end')"); err != nil {
		t.Fatal(err)
	}
	got := 0
	for {
		note, err := l.WaitForNotification(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if note.Payload == "end" {
			break
		}
		got++
	}
	if got == 0 || got > n {
		t.Errorf("%d commits then Close sent %d notifications; want 1 to %d", n, got, n)
	}
	t.Logf("%d commits, %d notifications", n, got)
}
