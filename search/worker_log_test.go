package search

import (
	"log/slog"
	"strings"
	"testing"
)

// TestWorkerLogsAtTheMountsLevel: the index worker's logger takes the
// level of the mount's (padfs mount --debug): its debug lines reach the
// mount's log with a debug logger and only then. (Before, the worker
// logged at Info whatever the mount's level: no debug line ever came.)
func TestWorkerLogsAtTheMountsLevel(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		st, data := openStore(t)
		sid := loadSession(t, st, map[string][]byte{"a.txt": []byte("a needle\n")})
		var logs syncBuffer
		ix, err := OpenWith(data, st, Options{Background: true,
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: level}))})
		if err != nil {
			t.Fatal(err)
		}
		waitCovered(t, ix, st, sid)
		workerPid(t, ix)
		// Close waits for the worker to exit, so its stderr is all read.
		if err := ix.Close(); err != nil {
			t.Fatal(err)
		}
		out := logs.String()
		got := strings.Contains(out, "search worker: serving")
		if want := level == slog.LevelDebug; got != want {
			t.Errorf("mount logging at %s: the worker's debug line in its log: %v, want %v; log:\n%s", level, got, want, out)
		}
	}
}
