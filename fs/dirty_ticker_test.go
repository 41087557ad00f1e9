package fs

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc"
	"golang.org/x/sys/unix"
)

// commitTries counts the commit attempts of dirty buffers per inode
// (through Options.commitHook) and fails them with fail while set.
type commitTries struct {
	mu   sync.Mutex
	n    map[mvcc.Ino]int
	fail error
}

func (c *commitTries) hook(sid mvcc.SessionID, ino mvcc.Ino) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[mvcc.Ino]int{}
	}
	c.n[ino]++
	return c.fail
}

func (c *commitTries) count(ino uint64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[mvcc.Ino(ino)]
}

func (c *commitTries) setFail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = err
}

// bufferState reports whether inode ino of session sid has a buffer, and
// its handle count and dirtiness.
func bufferState(m *Server, sid mvcc.SessionID, ino uint64) (present bool, opens int, dirty bool) {
	m.filesMu.Lock()
	f := m.files[fileKey{sid, mvcc.Ino(ino)}]
	if f != nil {
		opens = f.opens
	}
	m.filesMu.Unlock()
	if f == nil {
		return false, 0, false
	}
	dirty = f.isDirty()
	if opens == 0 && !dirty && f.isStaged() {
		return false, 0, false // an idle stage is a read cache (stage.go)
	}
	return true, opens, dirty
}

// storedContent reads name's latest content from the store directly.
func storedContent(t *testing.T, st *mvcc.Store, sid mvcc.SessionID, name string) string {
	t.Helper()
	in, err := st.Walk(sid, name, mvcc.Latest)
	if err != nil {
		t.Fatalf("store: %s: %v", name, err)
	}
	data, err := st.ReadAll(in)
	if err != nil {
		t.Fatalf("store: read %s: %v", name, err)
	}
	return string(data)
}

func fdIno(t *testing.T, fd int) uint64 {
	t.Helper()
	var s syscall.Stat_t
	if err := syscall.Fstat(fd, &s); err != nil {
		t.Fatal(err)
	}
	return s.Ino
}

// An open file unlinked with unsaved writes cannot be committed. Once a
// commit has found that out, the ticker leaves its buffer alone (it used to
// retry every tick) until it is written again; an O_TMPFILE file whose
// fsync succeeded while it had no name is committed by the ticker as soon
// as linkat names it, with the descriptor still open.
func TestTickerLeavesUnlinkedAlone(t *testing.T) {
	var tries commitTries
	mnt, st, m := mountTestOpts(t, Options{commitHook: tries.hook, manualTicks: true})
	sid := sessionOf(t, m)
	now := time.Now()
	later := func() time.Time { // past every delay of the ticker's policy
		now = now.Add(time.Hour)
		return now
	}

	p := filepath.Join(mnt, "doomed")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() { // also on failure: unmount needs it
		if !closed {
			f.Close()
		}
	})
	ino := fdIno(t, int(f.Fd()))
	if _, err := f.Write([]byte("unsaved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m.tick(later())
	}
	if n := tries.count(ino); n != 1 {
		t.Errorf("3 ticks over an unlinked dirty file: %d commit attempts, want 1", n)
	}
	// A write is a change: one more look, then quiet again.
	if _, err := f.WriteAt([]byte(" more"), 7); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		m.tick(later())
	}
	if n := tries.count(ino); n != 2 {
		t.Errorf("3 ticks after another write: %d commit attempts in all, want 2", n)
	}
	// So is a change announced by InvalidateSession (a link made
	// through the Go API would be one).
	m.invalidate(sid)
	for range 3 {
		m.tick(later())
	}
	if n := tries.count(ino); n != 3 {
		t.Errorf("3 ticks after InvalidateSession: %d commit attempts in all, want 3", n)
	}
	// The descriptor still reads what was written; nothing was stored.
	buf := make([]byte, 64)
	if n, _ := f.ReadAt(buf, 0); string(buf[:n]) != "unsaved more" {
		t.Errorf("unlinked file reads %q", buf[:n])
	}
	if n := writeEvents(t, st, sid, ino); n != 0 {
		t.Errorf("%d write versions of an unlinked file", n)
	}
	closed = true
	if err := f.Close(); err != nil {
		t.Errorf("close of an unlinked file: %v", err)
	}
	// The last release drops the buffer (RELEASE follows close(2)
	// asynchronously: polled).
	poll(t, "the last release to drop the buffer", func() (bool, string) {
		ok, opens, dirty := bufferState(m, sid, ino)
		return !ok, fmt.Sprintf("buffer present %v, %d handles, dirty %v", ok, opens, dirty)
	})

	// O_TMPFILE: written and fsynced while it has no name.
	fd, err := syscall.Open(mnt, unix.O_TMPFILE|syscall.O_RDWR, 0o640)
	if err != nil {
		t.Fatalf("O_TMPFILE: %v", err)
	}
	fdOpen := true
	t.Cleanup(func() {
		if fdOpen {
			syscall.Close(fd)
		}
	})
	tino := fdIno(t, fd)
	if _, err := syscall.Write(fd, []byte("anonymous, then named")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Fsync(fd); err != nil {
		t.Fatalf("fsync of an O_TMPFILE file: %v", err)
	}
	m.tick(later())
	m.tick(later())
	if n := tries.count(tino); n != 1 {
		t.Errorf("fsync and 2 ticks of an unnamed file: %d commit attempts, want 1 (the fsync's)", n)
	}
	if err := unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, filepath.Join(mnt, "named"), unix.AT_SYMLINK_FOLLOW); err != nil {
		t.Fatalf("linkat: %v", err)
	}
	// Named now: the next tick commits it, the descriptor still open.
	m.tick(later())
	if n := tries.count(tino); n != 2 {
		t.Errorf("a tick after linkat: %d commit attempts in all, want 2", n)
	}
	if n := writeEvents(t, st, sid, tino); n != 1 {
		t.Errorf("after linkat and a tick: %d write versions, want 1", n)
	}
	if got := storedContent(t, st, sid, "named"); got != "anonymous, then named" {
		t.Errorf("store holds %q", got)
	}
	if _, _, dirty := bufferState(m, sid, tino); dirty {
		t.Error("buffer still dirty after the tick committed it")
	}
	fdOpen = false
	if err := syscall.Close(fd); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(mnt, "named")); err != nil || string(got) != "anonymous, then named" {
		t.Errorf("mount reads %q, %v", got, err)
	}
	if n := writeEvents(t, st, sid, tino); n != 1 {
		t.Errorf("after close: %d write versions, want 1 (nothing left to commit)", n)
	}
}

// When the commits at close(2) fail (its flush, then the last release),
// the buffer stays, dirty and without handles; the ticker's retry commits
// it and drops it.
func TestTickerRetriesFailedRelease(t *testing.T) {
	var tries commitTries
	full := syscall.ENOSPC // what a full disk under the store would say
	tries.setFail(full)
	mnt, st, m := mountTestOpts(t, Options{commitHook: tries.hook, manualTicks: true})
	sid := sessionOf(t, m)
	p := filepath.Join(mnt, "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ino := fdIno(t, int(f.Fd()))
	const want = "survives a failed close"
	if _, err := f.Write([]byte(want)); err != nil {
		f.Close()
		t.Fatal(err)
	}
	// close(2) flushes (the commit fails: close says so), then releases
	// the last handle (asynchronously: the second attempt, which fails
	// too).
	if err := f.Close(); !errors.Is(err, full) {
		t.Fatalf("close whose commit failed: %v, want %v", err, full)
	}
	poll(t, "the last release's commit attempt", func() (bool, string) {
		n := tries.count(ino)
		return n >= 2, fmt.Sprintf("%d commit attempts, want 2 (flush, release)", n)
	})
	if ok, opens, dirty := bufferState(m, sid, ino); !ok || opens != 0 || !dirty {
		t.Fatalf("after the failed last release: buffer present %v, %d handles, dirty %v; want present, 0, dirty", ok, opens, dirty)
	}
	if got := storedContent(t, st, sid, "f"); got != "" {
		t.Fatalf("store holds %q before any commit succeeded", got)
	}
	// The store takes commits again; the ticker retries (after its
	// back-off) and drops the buffer.
	tries.setFail(nil)
	m.tick(time.Now().Add(retryAfter + time.Minute))
	if n := tries.count(ino); n != 3 {
		t.Errorf("%d commit attempts, want 3 (flush, release, ticker)", n)
	}
	if ok, _, _ := bufferState(m, sid, ino); ok {
		t.Error("buffer still held after the ticker committed it")
	}
	if b := m.memBytes.Load(); b != 0 {
		t.Errorf("%d bytes of buffer pages still accounted", b)
	}
	if got := storedContent(t, st, sid, "f"); got != want {
		t.Errorf("store holds %q, want %q", got, want)
	}
	if n := writeEvents(t, st, sid, ino); n != 1 {
		t.Errorf("%d write versions, want 1", n)
	}
	// A fresh open reads the committed version.
	if got, err := os.ReadFile(p); err != nil || string(got) != want {
		t.Errorf("mount reads %q, %v", got, err)
	}
	if n := tries.count(ino); n != 3 {
		t.Errorf("reading it back tried %d more commits", n-3)
	}
}

// goroutineBlocked reports whether some goroutine waits (wait reason, as
// the runtime prints it, e.g. "sync.Mutex.Lock") inside a function whose
// name contains fn; it returns all stacks for a failure message.
func goroutineBlocked(reason, fn string) (bool, string) {
	buf := make([]byte, 1<<20)
	all := string(buf[:runtime.Stack(buf, true)])
	for _, g := range strings.Split(all, "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "["+reason) && strings.Contains(g, fn) {
			return true, all
		}
	}
	return false, all
}

// A commit holds its file's lock for as long as it writes; the table of
// open files (filesMu) must not wait behind it. Here the ticker commits a
// large buffer whose last handle is gone (its commits at close failed)
// while the release path's dropIfIdle looks at the same buffer: an open of
// another file must still complete before that commit ends. It used to
// wait for it: dropIfIdle took filesMu, then the file's lock.
func TestOpenDuringTickerCommit(t *testing.T) {
	var (
		mu      sync.Mutex
		fail    error = syscall.ENOSPC
		tries         = map[mvcc.Ino]int{}
		block   mvcc.Ino
		entered = make(chan struct{})
		unblock = make(chan struct{})
	)
	hook := func(sid mvcc.SessionID, ino mvcc.Ino) error {
		mu.Lock()
		tries[ino]++
		err, b := fail, block
		mu.Unlock()
		if ino == b {
			close(entered)
			<-unblock // the commit is "large": it ends when the test says
		}
		return err
	}
	mnt, st, m := mountTestOpts(t, Options{commitHook: hook, manualTicks: true})
	var once sync.Once
	release := func() { once.Do(func() { close(unblock) }) }
	t.Cleanup(release) // before the unmount, also on failure
	sid := sessionOf(t, m)

	want := strings.Repeat("large file\n", 200<<10)
	p := filepath.Join(mnt, "big")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	ino := fdIno(t, int(f.Fd()))
	if _, err := f.Write([]byte(want)); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("close whose commit failed: %v", err)
	}
	// The last release (asynchronous) fails too: the buffer stays,
	// dirty, with no handle.
	poll(t, "the failed last release", func() (bool, string) {
		mu.Lock()
		n := tries[mvcc.Ino(ino)]
		mu.Unlock()
		ok, opens, dirty := bufferState(m, sid, ino)
		return n >= 2 && ok && opens == 0 && dirty,
			fmt.Sprintf("%d commit attempts, buffer present %v, %d handles, dirty %v; want 2, a dirty buffer with none", n, ok, opens, dirty)
	})

	mu.Lock()
	fail, block = nil, mvcc.Ino(ino)
	mu.Unlock()
	tickDone := make(chan struct{})
	go func() {
		defer close(tickDone)
		m.tick(time.Now().Add(retryAfter + time.Minute))
	}()
	<-entered // the ticker's commit holds the file's lock now
	fs := m.file(sid, mvcc.Ino(ino))
	if fs == nil {
		t.Fatal("no buffer for big")
	}
	dropDone := make(chan struct{})
	go func() {
		defer close(dropDone)
		m.dropIfIdle(fs) // what a release does after its commit
	}()
	poll(t, "dropIfIdle to wait for the committing file's lock", func() (bool, string) {
		return goroutineBlocked("sync.", "(*Server).dropIfIdle")
	})

	openDone := make(chan error, 1)
	go func() {
		g, err := os.OpenFile(filepath.Join(mnt, "other"), os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			err = g.Close()
		}
		openDone <- err
	}()
	poll(t, "the open of another file", func() (bool, string) {
		select {
		case err := <-openDone:
			if err != nil {
				t.Fatalf("open of another file: %v", err)
			}
			return true, ""
		default:
		}
		stalled, stacks := goroutineBlocked("sync.Mutex.Lock", "(*Server).acquire")
		if !stalled {
			stalled, stacks = goroutineBlocked("sync.Mutex.Lock", "(*Server).file(")
		}
		if stalled {
			t.Fatalf("an open waits for filesMu, held while a commit runs:\n%s", stacks)
		}
		return false, "neither done nor waiting for filesMu:\n" + stacks
	})
	select {
	case <-tickDone:
		t.Fatal("the ticker's commit ended before the test let it")
	default:
	}

	release()
	<-tickDone
	<-dropDone
	if got := storedContent(t, st, sid, "big"); got != want {
		t.Errorf("store holds %d bytes of big, want %d", len(got), len(want))
	}
	if ok, _, _ := bufferState(m, sid, ino); ok {
		t.Error("big's buffer still held after the ticker committed it")
	}
}

// syncBuffer is a bytes.Buffer for a logger written from FUSE requests.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The mount logs to Options.Logger, not slog's default: the cause of an
// EIO (here a commit the store refused at close) is in that log. And the
// invalidations InvalidateSession queues run on one goroutine that
// Unmount waits for.
func TestMountLoggerAndInvalidator(t *testing.T) {
	var logged syncBuffer
	var refuse atomic.Bool
	refuse.Store(true)
	hook := func(mvcc.SessionID, mvcc.Ino) error {
		if refuse.Load() {
			return errInjected
		}
		return nil
	}
	mnt, _, m := mountTestOpts(t, Options{commitHook: hook,
		Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	f, err := os.Create(filepath.Join(mnt, "f"))
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("refused"))
	if err := f.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("close whose commit failed: %v, want EIO", err)
	}
	if got := logged.String(); !strings.Contains(got, "op=flush") || !strings.Contains(got, "injected") {
		t.Errorf("the mount's logger got %q, want the flush's cause", got)
	}

	refuse.Store(false) // Unmount commits what is left
	sid := sessionOf(t, m)
	for range 100 {
		m.InvalidateSession(sid)
	}
	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.invalDone:
	default:
		t.Error("Unmount returned with the invalidator still running")
	}
	m.InvalidateSession(sid) // after the end: queued, harmless
}
