package mvcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/padfs/padfs/mvcc/kv"
)

// cancelReader reads r and cancels after the first after bytes: the
// caller's context ends while the content is being stored.
type cancelReader struct {
	r      io.Reader
	after  int
	read   int
	cancel context.CancelFunc
}

func (c *cancelReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.read += n; c.read >= c.after {
		c.cancel()
	}
	return n, err
}

// storedChunks counts the chunk records in the store.
func storedChunks(t *testing.T, st *Store) int {
	t.Helper()
	n := 0
	if err := st.kv.View(func(tx kv.Reader) error {
		p := []byte{pChunk}
		return tx.Scan(p, kv.PrefixEnd(p), func(_, _ []byte) (bool, error) { n++; return true, nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWriteContentCancelled: a context cancelled while a large content is
// being stored stops WriteContent between chunks with context.Canceled;
// the file keeps its old content and the log gains no event. (Before,
// WriteContent took no context and stored the whole 16 MiB.)
func TestWriteContentCancelled(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("c")
	n := e.write(sid, "f", []byte("old\n"))
	seq := e.seq(sid)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := &cancelReader{r: bytes.NewReader(bigText(1, 16<<20, "x")), after: 1 << 20, cancel: cancel}
	if _, err := e.st.WriteContent(ctx, sid, n.Ino, r, nowNs()); !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteContent with a cancelled context: %v, want context.Canceled", err)
	}
	if r.read >= 16<<20 {
		t.Errorf("WriteContent read all %d bytes after the cancel", r.read)
	}
	if got, err := e.read(sid, "f", Latest); err != nil || got != "old\n" {
		t.Errorf("after a cancelled write: %q %v, want the old content", got, err)
	}
	if got := e.seq(sid); got != seq {
		t.Errorf("a cancelled write committed: last event %d, was %d", got, seq)
	}
}

// TestImportTreeCancelled: a context cancelled during a host tree's import
// stops it with context.Canceled: no session, and the chunks it stored
// are deleted again.
func TestImportTreeCancelled(t *testing.T) {
	e := lcOpen(t)
	src := t.TempDir()
	for i := range 8 {
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("f%d", i)), bigText(int64(i), 2<<20, "x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	opt := ImportOptions{Name: "imp", Workers: 1, Progress: func(stage string, done, _ int64) {
		if stage == "import" && done > 0 {
			cancel() // the first megabyte is read
		}
	}}
	if _, _, err := e.st.ImportTree(ctx, src, opt); !errors.Is(err, context.Canceled) {
		t.Fatalf("ImportTree with a cancelled context: %v, want context.Canceled", err)
	}
	if ss, err := e.st.Sessions(); err != nil || len(ss) != 0 {
		t.Errorf("a cancelled import left sessions %v (%v)", ss, err)
	}
	if n := storedChunks(t, e.st); n != 0 {
		t.Errorf("a cancelled import left %d chunks", n)
	}
	// The same import, not cancelled, works.
	if _, _, err := e.st.ImportTree(t.Context(), src, ImportOptions{Name: "imp"}); err != nil {
		t.Fatal(err)
	}
}

// TestImportSessionCancelled: a context cancelled while a session archive
// is read stops ImportSession with context.Canceled: no session, no
// chunk left.
func TestImportSessionCancelled(t *testing.T) {
	a := lcOpen(t)
	sid := a.session("big")
	for i := range 4 {
		a.write(sid, fmt.Sprintf("f%d", i), bigText(int64(i), 4<<20, "x"))
	}
	arch := exportArchive(a, sid)
	b := lcOpen(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	r := &cancelReader{r: bytes.NewReader(arch), after: len(arch) / 2, cancel: cancel}
	if _, err := b.st.ImportSession(ctx, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("ImportSession with a cancelled context: %v, want context.Canceled", err)
	}
	if ss, err := b.st.Sessions(); err != nil || len(ss) != 0 {
		t.Errorf("a cancelled import left sessions %v (%v)", ss, err)
	}
	if n := storedChunks(t, b.st); n != 0 {
		t.Errorf("a cancelled import left %d chunks", n)
	}
	// ExportSession stops too.
	var out bytes.Buffer
	if _, err := a.st.ExportSession(ctx, sid, &out); !errors.Is(err, context.Canceled) {
		t.Errorf("ExportSession with a cancelled context: %v, want context.Canceled", err)
	}
	if _, err := b.st.ImportSession(t.Context(), bytes.NewReader(arch)); err != nil {
		t.Fatal(err)
	}
}

// TestExportTreeCancelled: a context cancelled while a tree is exported
// stops ExportTree with context.Canceled before the next name.
func TestExportTreeCancelled(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("x")
	for i := range 10 {
		e.write(sid, fmt.Sprintf("f%d", i), []byte("x"))
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var seen int
	err := e.st.ExportTree(ctx, sid, Latest, func(ExportEntry) error {
		if seen++; seen == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || seen != 3 {
		t.Errorf("ExportTree cancelled at the third name: %v after %d names, want context.Canceled after 3", err, seen)
	}
}
