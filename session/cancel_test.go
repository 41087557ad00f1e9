package session

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCancelledContextStopsStoreWork: the Go API's long calls take the
// caller's context: a cancelled one stops a large Write (the file keeps
// its content), a Fork (no new session) and a Grep, each with
// context.Canceled.
func TestCancelledContextStopsStoreWork(t *testing.T) {
	st, p := openTest(t)
	if err := p.Write(t.Context(), "f.txt", "old\n"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := p.Write(ctx, "f.txt", strings.Repeat("a large new content\n", 1<<20)); !errors.Is(err, context.Canceled) {
		t.Errorf("Write with a cancelled context: %v, want context.Canceled", err)
	}
	if s, _, err := p.Read("f.txt"); err != nil || s != "old\n" {
		t.Errorf("after a cancelled Write: %q %v, want the old content", s, err)
	}
	if _, err := p.Fork(ctx, "copy"); !errors.Is(err, context.Canceled) {
		t.Errorf("Fork with a cancelled context: %v, want context.Canceled", err)
	}
	if ss, err := st.MVCC().Sessions(); err != nil || len(ss) != 1 {
		t.Errorf("after a cancelled Fork: sessions %v (%v), want the one", ss, err)
	}
	if _, err := p.Grep(ctx, "old", 0); !errors.Is(err, context.Canceled) {
		t.Errorf("Grep with a cancelled context: %v, want context.Canceled", err)
	}
}
