package mvcc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"syscall"
	"testing"

	"github.com/padfs/padfs/internal/rawscan"
)

// Tests of the session lifecycle (issue 4) on a real store: bolt in a
// t.TempDir() through OpenDir.

type lcEnv struct {
	t   *testing.T
	dir string
	st  *Store
}

func lcOpen(t *testing.T) *lcEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &lcEnv{t, dir, st}
}

func (e *lcEnv) session(name string) SessionID {
	e.t.Helper()
	h, err := e.st.CreateSession(name, 0, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return h.ID
}

// mkdirs creates the directories of path (like mkdir -p) and returns the
// parent inode of its last component.
func (e *lcEnv) parent(sid SessionID, path string) (Ino, string) {
	e.t.Helper()
	h, err := e.st.Header(sid)
	if err != nil {
		e.t.Fatal(err)
	}
	dir := h.Root
	parts := strings.Split(path, "/")
	for _, p := range parts[:len(parts)-1] {
		n, err := e.st.Lookup(sid, dir, p, Latest)
		if errors.Is(err, ErrNotFound) {
			n, err = e.st.Create(sid, dir, p, Attr{Mode: sIFDIR | 0o755}, "")
		}
		if err != nil {
			e.t.Fatal(err)
		}
		dir = n.Ino
	}
	return dir, parts[len(parts)-1]
}

func (e *lcEnv) write(sid SessionID, path string, data []byte) *Inode {
	e.t.Helper()
	dir, name := e.parent(sid, path)
	n, err := e.st.Lookup(sid, dir, name, Latest)
	if errors.Is(err, ErrNotFound) {
		n, err = e.st.Create(sid, dir, name, Attr{Mode: sIFREG | 0o644}, "")
	}
	if err != nil {
		e.t.Fatal(err)
	}
	if n, err = e.st.WriteContent(context.Background(), sid, n.Ino, bytes.NewReader(data), nowNs()); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *lcEnv) read(sid SessionID, path string, at HLC) (string, error) {
	n, err := e.st.Walk(sid, path, at)
	if err != nil {
		return "", err
	}
	if n.IsSymlink() {
		return n.Target, nil
	}
	b, err := e.st.ReadAll(n)
	return string(b), err
}

func (e *lcEnv) mustRead(sid SessionID, path string, at HLC) string {
	e.t.Helper()
	s, err := e.read(sid, path, at)
	if err != nil {
		e.t.Fatalf("read %s as of %s: %v", path, at, err)
	}
	return s
}

func (e *lcEnv) now() HLC {
	e.t.Helper()
	h, err := e.st.Now()
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

func (e *lcEnv) events(sid SessionID, f LogFilter) []Event {
	e.t.Helper()
	evs, err := e.st.Log(sid, f)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// bigText is incompressible-looking text of n bytes with marker at the
// given offsets (so the file is chunked and the marker sits in chunks).
func bigText(seed int64, n int, marker string, at ...int) []byte {
	r := rand.New(rand.NewSource(seed))
	const letters = "abcdefghijklmnopqrstuvwxyz     \n"
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.Intn(len(letters))]
	}
	for _, off := range at {
		copy(b[off:], marker)
	}
	return b
}

func TestCheckpointNamesAndDuplicates(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("cp")
	for _, bad := range []string{"", ".", "..", "a/b", "2026-11-29T14:03:00Z", "2026-11-29T14:03:00.123456789Z",
		"1234", "latest", "now", " pad", "pad ", "tab\there", "nul\x00", strings.Repeat("x", CheckpointNameMax+1), "\xff\xfe"} {
		if _, err := e.st.CreateCheckpoint(sid, bad); err == nil {
			t.Errorf("checkpoint name %q accepted", bad)
		} else if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrNameTooLong) {
			t.Errorf("checkpoint name %q: %v is not ErrInvalid", bad, err)
		}
	}
	e.write(sid, "a.txt", []byte("one"))
	at, err := e.st.CreateCheckpoint(sid, "before-refactor")
	if err != nil {
		t.Fatal(err)
	}
	e.write(sid, "a.txt", []byte("two"))
	if _, err := e.st.CreateCheckpoint(sid, "before-refactor"); !errors.Is(err, ErrExist) {
		t.Fatalf("duplicate checkpoint: %v", err)
	}
	var got HLC
	var ok bool
	if err := e.st.View(func(tx *ReadTx) error {
		got, ok, err = tx.Checkpoint(sid, "before-refactor")
		return err
	}); err != nil || !ok || got != at {
		t.Fatalf("checkpoint = %v %v %v, want %v", got, ok, err, at)
	}
	if s := e.mustRead(sid, "a.txt", at); s != "one" {
		t.Fatalf("as of checkpoint: %q", s)
	}
	cps, err := e.st.ListCheckpoints(sid)
	if err != nil || len(cps) != 1 || cps[0].Name != "before-refactor" {
		t.Fatalf("ListCheckpoints = %v, %v", cps, err)
	}
	evs := e.events(sid, LogFilter{})
	var cpEv *Event
	for i := range evs {
		if evs[i].Op == OpCheckpoint {
			cpEv = &evs[i]
		}
	}
	if cpEv == nil || cpEv.Detail != "before-refactor" || cpEv.HLC != at {
		t.Fatalf("checkpoint event = %+v", cpEv)
	}
}

func TestLogSinceIsExclusiveAndFiltersPaths(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("log")
	e.write(sid, "src/main.go", []byte("package main\n"))
	e.write(sid, "README", []byte("hi\n"))
	e.write(sid, "src/main.go", []byte("package main // v2\n"))
	all := e.events(sid, LogFilter{})
	for i, ev := range all {
		if ev.Seq != uint64(i+1) {
			t.Fatalf("event %d has seq %d: gaps or disorder", i, ev.Seq)
		}
		if i > 0 && ev.HLC <= all[i-1].HLC {
			t.Fatalf("HLCs not increasing at seq %d", ev.Seq)
		}
	}
	if all[0].Op != OpSessionCreate {
		t.Fatalf("first event %q", all[0].Op)
	}
	for k := range all {
		bySeq := e.events(sid, LogFilter{AfterSeq: all[k].Seq})
		byHLC := e.events(sid, LogFilter{AfterHLC: all[k].HLC})
		if len(bySeq) != len(all)-k-1 || len(byHLC) != len(all)-k-1 {
			t.Fatalf("since seq/HLC of event %d: %d/%d events, want %d", all[k].Seq, len(bySeq), len(byHLC), len(all)-k-1)
		}
		if len(bySeq) > 0 && (bySeq[0].Seq != all[k].Seq+1 || byHLC[0].Seq != all[k].Seq+1) {
			t.Fatal("since is not exclusive")
		}
	}
	// An HLC between two events keeps the later one.
	mid := all[2].HLC + (all[3].HLC-all[2].HLC)/2
	if got := e.events(sid, LogFilter{AfterHLC: mid}); got[0].Seq != all[3].Seq && all[3].HLC > mid {
		t.Fatalf("since %s starts at %d", mid, got[0].Seq)
	}
	src := e.events(sid, LogFilter{Path: "src"})
	for _, ev := range src {
		if !strings.HasPrefix(ev.Path, "src") {
			t.Fatalf("path filter let %+v through", ev)
		}
	}
	if len(src) < 3 { // mkdir src, create, write, write
		t.Fatalf("path filter src: %d events", len(src))
	}
	if got := e.events(sid, LogFilter{Path: "./src/main.go"}); len(got) != 3 {
		t.Fatalf("path filter src/main.go: %+v", got)
	}
	// JSON lines.
	b, err := e.st.LogJSONL(sid)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(all) {
		t.Fatalf("%d JSON lines for %d events", len(lines), len(all))
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if last["op"] != "write" || last["path"] != "src/main.go" || last["hlc"] != all[len(all)-1].HLC.String() ||
		last["sha256"] == nil || last["size"].(float64) != float64(len("package main // v2\n")) {
		t.Fatalf("last JSON line: %s", lines[len(lines)-1])
	}
}

func TestForkCopiesMetadataSharesChunksKeepsLinks(t *testing.T) {
	e := lcOpen(t)
	src := e.session("src")
	big := bigText(1, 600<<10, "", 0)
	e.write(src, "dir/big.bin", big)
	e.write(src, "dir/small.txt", []byte("small\n"))
	e.write(src, "notes.md", []byte("v1\n"))
	at := e.now()
	e.write(src, "notes.md", []byte("v2\n"))
	e.write(src, "later.txt", []byte("later\n"))
	h, _ := e.st.Header(src)
	small, err := e.st.Walk(src, "dir/small.txt", Latest)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Link(src, small.Ino, h.Root, "hard.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Create(src, h.Root, "link", Attr{Mode: sIFLNK | 0o777}, "dir/small.txt"); err != nil {
		t.Fatal(err)
	}
	if err := e.st.SetXattr(src, small.Ino, "user.tag", []byte("blue"), 0); err != nil {
		t.Fatal(err)
	}
	srcEvents := len(e.events(src, LogFilter{}))
	chunksBefore := lcCount(t, e.st, pChunk)

	f, err := e.st.Fork(t.Context(), src, Latest, ForkOptions{Name: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if f.Parent == nil || *f.Parent != src || f.ForkedAt == 0 || f.Name != "copy" {
		t.Fatalf("fork header %+v", f)
	}
	if got := lcCount(t, e.st, pChunk); got != chunksBefore {
		t.Fatalf("fork stored chunks: %d -> %d", chunksBefore, got)
	}
	if n := len(e.events(src, LogFilter{})); n != srcEvents {
		t.Fatalf("fork touched the source log: %d -> %d events", srcEvents, n)
	}
	fev := e.events(f.ID, LogFilter{})
	if len(fev) != 1 || fev[0].Op != OpFork || fev[0].Path2 != src.String() {
		t.Fatalf("fork log: %+v", fev)
	}
	for _, p := range []string{"dir/big.bin", "dir/small.txt", "notes.md", "later.txt", "hard.txt", "link"} {
		if a, b := e.mustRead(src, p, Latest), e.mustRead(f.ID, p, Latest); a != b {
			t.Fatalf("%s differs in the fork", p)
		}
	}
	// New inode numbers, hard links kept, xattrs and link counts right.
	fs, _ := e.st.Walk(f.ID, "dir/small.txt", Latest)
	fh, _ := e.st.Walk(f.ID, "hard.txt", Latest)
	if fs.Ino == small.Ino || fs.Ino != fh.Ino || fs.Nlink != 2 {
		t.Fatalf("fork inode %d (src %d), hard link %d, nlink %d", fs.Ino, small.Ino, fh.Ino, fs.Nlink)
	}
	if v, ok, err := e.st.Xattr(f.ID, fs.Ino, "user.tag", Latest); err != nil || string(v) != "blue" || !ok {
		t.Fatalf("xattr in the fork: %q %v %v", v, ok, err)
	}
	if p, err := lcPath(e.st, f.ID, fs.Ino); err != nil || (p != "dir/small.txt" && p != "hard.txt") {
		t.Fatalf("path of forked inode: %q %v", p, err)
	}
	// Edits on each side stay on that side.
	e.write(f.ID, "notes.md", []byte("fork edit\n"))
	e.write(src, "dir/small.txt", []byte("src edit\n"))
	if e.mustRead(src, "notes.md", Latest) != "v2\n" || e.mustRead(f.ID, "dir/small.txt", Latest) != "small\n" ||
		e.mustRead(f.ID, "hard.txt", Latest) != "small\n" {
		t.Fatal("an edit crossed between fork and source")
	}
	// Fork as of an earlier time, into a given id; an existing id is refused.
	id := testID()
	old, err := e.st.Fork(t.Context(), src, at, ForkOptions{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if old.ID != id || old.ForkedAt != at {
		t.Fatalf("fork as of: %+v", old)
	}
	if e.mustRead(id, "notes.md", Latest) != "v1\n" {
		t.Fatal("fork as of T does not show T's state")
	}
	if _, err := e.read(id, "later.txt", Latest); !errors.Is(err, ErrNotFound) {
		t.Fatalf("later.txt in a fork of an earlier state: %v", err)
	}
	if _, err := e.st.Fork(t.Context(), src, Latest, ForkOptions{ID: id}); !errors.Is(err, ErrExist) {
		t.Fatalf("fork into an existing id: %v", err)
	}
	if _, err := e.st.Fork(t.Context(), testID(), Latest, ForkOptions{}); !errors.Is(err, ErrNoSession) {
		t.Fatalf("fork of an unknown session: %v", err)
	}
}

// lcPath is the path of ino in the latest tree.
func lcPath(s *Store, sid SessionID, ino Ino) (string, error) {
	var p string
	err := s.View(func(t *ReadTx) error {
		var err error
		p, err = t.Path(sid, ino, Latest)
		return err
	})
	return p, err
}

func lcCount(t *testing.T, st *Store, prefix byte) int {
	t.Helper()
	n := 0
	if err := st.View(func(tx *ReadTx) error {
		return scanKeys(tx.r, []byte{prefix}, func(_, _ []byte) error { n++; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestSoftForget(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("gone")
	e.write(sid, "a.txt", []byte("kept in history\n"))
	before := e.now()
	at, err := e.st.Forget(sid)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.LiveHeader(sid); !errors.Is(err, ErrForgotten) {
		t.Fatalf("LiveHeader of a forgotten session: %v", err)
	}
	if _, err := e.st.HeaderAt(sid, before); err != nil {
		t.Fatalf("HeaderAt before the forget: %v", err)
	}
	if _, err := e.st.HeaderAt(sid, at); !errors.Is(err, ErrForgotten) {
		t.Fatalf("HeaderAt at the forget: %v", err)
	}
	if s := e.mustRead(sid, "a.txt", before); s != "kept in history\n" {
		t.Fatalf("as-of read after forget: %q", s)
	}
	h, _ := e.st.Header(sid)
	if _, err := e.st.Create(sid, h.Root, "b", Attr{Mode: sIFREG | 0o644}, ""); !errors.Is(err, ErrForgotten) {
		t.Fatalf("write to a forgotten session: %v", err)
	}
	if _, err := e.st.Forget(sid); !errors.Is(err, ErrForgotten) {
		t.Fatalf("second forget: %v", err)
	}
	evs := e.events(sid, LogFilter{})
	if last := evs[len(evs)-1]; last.Op != OpForget || last.HLC != at {
		t.Fatalf("last event %+v", last)
	}
	infos, _ := e.st.Sessions()
	if len(infos) != 1 || !infos[0].Forgotten || infos[0].ForgottenAt != at {
		t.Fatalf("Sessions: %+v", infos)
	}
	if _, err := e.st.Fork(t.Context(), sid, Latest, ForkOptions{}); !errors.Is(err, ErrForgotten) {
		t.Fatalf("fork of a forgotten session now: %v", err)
	}
	if _, err := e.st.Fork(t.Context(), sid, before, ForkOptions{}); err != nil {
		t.Fatalf("fork of a forgotten session as of before: %v", err)
	}
}

func TestHardForgetLeavesNoByteOnDisk(t *testing.T) {
	t.Parallel() // its own store; no package state
	e := lcOpen(t)
	const inline, chunked, other = "MARKER-inline-7f3a9c", "MARKER-chunked-51e2d0", "MARKER-other-0b77e4"
	keep := e.session("keep")
	e.write(keep, "keep.txt", []byte("this stays: "+other+"\n"))
	e.write(keep, "shared.bin", bigText(9, 300<<10, "", 0)) // chunks equal to the purged session's
	sid := e.session("secret")
	e.write(sid, "notes.txt", []byte("v1 "+inline+"\n"))
	e.write(sid, "notes.txt", []byte("v2 without it\n"))
	e.write(sid, "deep/big.txt", bigText(2, 900<<10, chunked, 100, 300<<10, 800<<10))
	e.write(sid, "shared.bin", bigText(9, 300<<10, "", 0))
	e.write(sid, "dir-"+inline+"/name-"+inline, []byte("x")) // names are purged too
	if n, err := e.st.Walk(sid, "notes.txt", Latest); err != nil {
		t.Fatal(err)
	} else if err := e.st.SetXattr(sid, n.Ino, "user."+inline, []byte("value "+inline), 0); err != nil {
		t.Fatal(err) // an xattr chain (X keys) goes too
	}
	if _, err := e.st.CreateCheckpoint(sid, "cp-"+inline); err != nil {
		t.Fatal(err)
	}
	e.settle()
	if len(rawscan.Hits(t, e.dir, chunked)) == 0 || len(rawscan.Hits(t, e.dir, inline)) == 0 {
		t.Fatal("markers not on disk before the purge: the test proves nothing")
	}

	r, err := e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	if r.Files != 4 || r.Chunks == 0 || r.SharedChunks == 0 || r.Versions < 6 || r.Bytes < 900<<10 {
		t.Fatalf("receipt %+v", r)
	}
	// Wrong token: refused, nothing changed.
	if _, err := e.st.Purge(t.Context(), sid, "forget-000000000000000000000000", nil); !errors.Is(err, ErrToken) {
		t.Fatalf("wrong token: %v", err)
	}
	// Stale token: a commit after the receipt.
	e.write(sid, "notes.txt", []byte("v3\n"))
	if _, err := e.st.Purge(t.Context(), sid, r.Token, nil); !errors.Is(err, ErrToken) {
		t.Fatalf("stale token: %v", err)
	}
	if s := e.mustRead(sid, "notes.txt", Latest); s != "v3\n" {
		t.Fatalf("refused purge changed the session: %q", s)
	}
	r, err = e.st.PlanPurge(sid)
	if err != nil {
		t.Fatal(err)
	}
	var stages []string
	done, err := e.st.Purge(t.Context(), sid, r.Token, func(stage string, d, total int64) {
		if len(stages) == 0 || stages[len(stages)-1] != stage {
			stages = append(stages, stage)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if done.Token != r.Token || fmt.Sprint(stages) != "[purge compact]" {
		t.Fatalf("purge receipt %+v, stages %v", done, stages)
	}
	if _, err := e.st.Header(sid); !errors.Is(err, ErrNoSession) {
		t.Fatalf("header after purge: %v", err)
	}
	for _, p := range sessionPrefixes(sid) {
		n := 0
		e.st.View(func(tx *ReadTx) error {
			return scanKeys(tx.r, p, func(_, _ []byte) error { n++; return nil })
		})
		if n != 0 {
			t.Fatalf("%d keys left under %q", n, p)
		}
	}
	for _, m := range []string{inline, chunked} {
		if hits := rawscan.Hits(t, e.dir, m); len(hits) > 0 {
			t.Fatalf("marker %q still on disk in %v", m, hits)
		}
	}
	if len(rawscan.Hits(t, e.dir, other)) == 0 {
		t.Fatal("the other session's content went too")
	}
	if e.mustRead(keep, "shared.bin", Latest) != string(bigText(9, 300<<10, "", 0)) {
		t.Fatal("shared chunks of the other session were purged")
	}
	// Survives a reopen.
	e.st.Close()
	st, err := OpenDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	e.st = st
	t.Cleanup(func() { st.Close() })
	if e.mustRead(keep, "keep.txt", Latest) != "this stays: "+other+"\n" {
		t.Fatal("other session damaged")
	}
}

func TestRedactRewritesHistoryInPlace(t *testing.T) {
	t.Parallel() // its own store; no package state
	e := lcOpen(t)
	const needle = "sk-live-SECRET-4242"
	sid := e.session("red")
	e.write(sid, "plain.txt", []byte("nothing here\n"))
	v1 := e.write(sid, "cfg.env", []byte("TOKEN="+needle+"\n"))
	t1 := e.now()
	v2 := e.write(sid, "cfg.env", []byte("TOKEN="+needle+"\nOTHER="+needle+"\n"))
	e.write(sid, "cfg.env", []byte("TOKEN=rotated\n"))
	big := bigText(3, 700<<10, needle, 10, 200<<10, 650<<10)
	e.write(sid, "logs/big.log", big)
	h, _ := e.st.Header(sid)
	if _, err := e.st.Create(sid, h.Root, "lnk", Attr{Mode: sIFLNK | 0o777}, "/tmp/"+needle); err != nil {
		t.Fatal(err)
	}
	pl, _ := e.st.Walk(sid, "plain.txt", Latest)
	if err := e.st.SetXattr(sid, pl.Ino, "user.note", []byte("x"+needle), 0); err != nil {
		t.Fatal(err)
	}
	other := e.session("other")
	e.write(other, "o.txt", []byte("other "+needle+"\n"))
	logBefore := e.events(sid, LogFilter{})
	if len(rawscan.Hits(t, e.dir, needle)) == 0 {
		t.Fatal("needle not on disk before: the test proves nothing")
	}

	if _, err := e.st.PlanRedact(sid, "abc", "x"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("short needle: %v", err)
	}
	if _, err := e.st.PlanRedact(sid, needle, "<"+needle+">"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("replacement containing the needle: %v", err)
	}
	r, err := e.st.PlanRedact(sid, needle, DefaultRedaction)
	if err != nil {
		t.Fatal(err)
	}
	// cfg.env v1 and v2, big.log, the symlink, plain.txt's xattr version.
	if r.Files != 4 || r.Versions != 5 || r.Occurrences != 8 || r.Chunks == 0 {
		t.Fatalf("receipt %+v", r)
	}
	if _, err := e.st.Redact(t.Context(), sid, needle, nil, "redact-bogus", nil); !errors.Is(err, ErrToken) {
		t.Fatalf("wrong token: %v", err)
	}
	if _, err := e.st.Redact(t.Context(), sid, needle, ptr("[X]"), r.Token, nil); !errors.Is(err, ErrToken) {
		t.Fatalf("token for another replacement: %v", err)
	}
	if _, err := e.st.Redact(t.Context(), sid, needle, nil, r.Token, nil); err != nil {
		t.Fatal(err)
	}

	// Same versions, same HLCs, redacted bytes.
	if s := e.mustRead(sid, "cfg.env", t1); s != "TOKEN=[REDACTED]\n" {
		t.Fatalf("v1 as of t1: %q", s)
	}
	n2, err := e.st.InodeAt(sid, v2.Ino, v2.HLC)
	if err != nil || n2.HLC != v2.HLC {
		t.Fatalf("v2 version: %+v %v", n2, err)
	}
	if b, _ := e.st.ReadAll(n2); string(b) != "TOKEN=[REDACTED]\nOTHER=[REDACTED]\n" {
		t.Fatalf("v2: %q", b)
	}
	if n1, _ := e.st.InodeAt(sid, v1.Ino, v1.HLC); n1.HLC != v1.HLC || n1.Size != uint64(len("TOKEN=[REDACTED]\n")) {
		t.Fatalf("v1 version %+v", n1)
	}
	wantBig := strings.ReplaceAll(string(big), needle, DefaultRedaction)
	if e.mustRead(sid, "logs/big.log", Latest) != wantBig {
		t.Fatal("big.log not redacted exactly")
	}
	if e.mustRead(sid, "lnk", Latest) != "/tmp/"+DefaultRedaction {
		t.Fatal("symlink target not redacted")
	}
	pl, _ = e.st.Walk(sid, "plain.txt", Latest)
	if v, _, err := e.st.Xattr(sid, pl.Ino, "user.note", Latest); err != nil || string(v) != "x"+DefaultRedaction {
		t.Fatalf("xattr %q %v", v, err)
	}
	// The log keeps its structure plus one redaction event without the needle.
	logAfter := e.events(sid, LogFilter{})
	if len(logAfter) != len(logBefore)+1 {
		t.Fatalf("log %d -> %d events", len(logBefore), len(logAfter))
	}
	for i, ev := range logBefore {
		if logAfter[i].Seq != ev.Seq || logAfter[i].HLC != ev.HLC || logAfter[i].Op != ev.Op || logAfter[i].Path != ev.Path {
			t.Fatalf("event %d changed shape: %+v -> %+v", ev.Seq, ev, logAfter[i])
		}
	}
	last := logAfter[len(logAfter)-1]
	if last.Op != OpRedact || !strings.Contains(last.Detail, "5 versions") {
		t.Fatalf("redaction event %+v", last)
	}
	jl, _ := e.st.LogJSONL(sid)
	if bytes.Contains(jl, []byte(needle)) {
		t.Fatal("needle in the log")
	}
	// The other session keeps its own copy; nothing of this session's does.
	hits := rawscan.Hits(t, e.dir, needle)
	if len(hits) != 1 {
		t.Fatalf("needle on disk in %v; want only the other session's copy", hits)
	}
	e.write(other, "o.txt", []byte("gone\n"))
	r2, err := e.st.PlanRedact(other, needle, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Redact(t.Context(), other, needle, ptr(""), r2.Token, nil); err != nil {
		t.Fatal(err)
	}
	if hits := rawscan.Hits(t, e.dir, needle); len(hits) != 0 {
		t.Fatalf("needle still on disk in %v", hits)
	}
	if e.mustRead(other, "o.txt", Latest) != "gone\n" {
		t.Fatal("other session latest changed")
	}
}

func ptr(s string) *string { return &s }

func TestRedactRefusesNeedleInNames(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("names")
	e.write(sid, "dir/has-SECRETNAME-in-it.txt", []byte("content SECRETNAME\n"))
	if _, err := e.st.PlanRedact(sid, "SECRETNAME", ""); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "names") {
		t.Fatalf("needle in a file name: %v", err)
	}
}

func TestChunkHashesMatchPutContent(t *testing.T) {
	e := lcOpen(t)
	for _, size := range []int{100, InlineMax, InlineMax + 1, 300 << 10, 1 << 20} {
		data := bigText(int64(size), size, "", 0)
		if size == 1<<20 {
			clear(data[200<<10 : 600<<10]) // a hole
		}
		c, err := e.st.PutContent(t.Context(), bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		var want []Hash
		for _, x := range c.Extents {
			if x.Chunk != nil {
				want = append(want, Hash(x.Chunk))
			}
		}
		if got := chunkHashes(data); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("size %d: chunkHashes %d chunks, PutContent %d", size, len(got), len(want))
		}
	}
}

func TestDiffStatuses(t *testing.T) {
	e := lcOpen(t)
	sid := e.session("diff")
	e.write(sid, "keep.txt", []byte("same\n"))
	e.write(sid, "mod.txt", []byte("old\n"))
	e.write(sid, "del.txt", []byte("bye\n"))
	e.write(sid, "mv-src.txt", []byte("moving\n"))
	e.write(sid, "d/a.txt", []byte("a\n"))
	e.write(sid, "d/b.txt", []byte("b\n"))
	e.write(sid, "exec.sh", []byte("#!/bin/sh\n"))
	from := e.now()
	h, _ := e.st.Header(sid)
	e.write(sid, "mod.txt", []byte("new\n"))
	if err := e.st.Remove(sid, h.Root, "del.txt", false); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Rename(sid, h.Root, "mv-src.txt", h.Root, "mv-dst.txt", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Rename(sid, h.Root, "d", h.Root, "e", 0); err != nil {
		t.Fatal(err)
	}
	e.write(sid, "e/b.txt", []byte("b changed\n"))
	e.write(sid, "new.txt", []byte("hello\n"))
	ex, _ := e.st.Walk(sid, "exec.sh", Latest)
	mode := uint32(0o755)
	if _, err := e.st.SetAttr(sid, ex.Ino, SetAttr{Mode: &mode}); err != nil {
		t.Fatal(err)
	}
	to := e.now()
	ch, err := e.st.Diff(t.Context(), sid, from, to)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range ch {
		s := string(c.Status) + " " + c.Path
		if c.From != "" {
			s = string(c.Status) + " " + c.From + " -> " + c.Path
		}
		got = append(got, s)
	}
	want := []string{"D del.txt", "R d -> e", "M d/b.txt -> e/b.txt", "M exec.sh", "M mod.txt", "R mv-src.txt -> mv-dst.txt", "A new.txt"}
	sortChanges := func(s []string) string {
		c := append([]string(nil), s...)
		for i := range c {
			for j := i + 1; j < len(c); j++ {
				if c[j] < c[i] {
					c[i], c[j] = c[j], c[i]
				}
			}
		}
		return strings.Join(c, "\n")
	}
	if sortChanges(got) != sortChanges(want) {
		t.Fatalf("diff:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if ch, _ := e.st.Diff(t.Context(), sid, to, to); len(ch) != 0 {
		t.Fatalf("diff of a state with itself: %v", ch)
	}
	// Rename over an existing file is one R; a type change is D + A.
	e.write(sid, "x.txt", []byte("x\n"))
	from = e.now()
	if err := e.st.Rename(sid, h.Root, "new.txt", h.Root, "x.txt", 0); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Remove(sid, h.Root, "keep.txt", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.Create(sid, h.Root, "keep.txt", Attr{Mode: sIFDIR | 0o755}, ""); err != nil {
		t.Fatal(err)
	}
	ch, _ = e.st.Diff(t.Context(), sid, from, e.now())
	got = nil
	for _, c := range ch {
		got = append(got, fmt.Sprintf("%c %s %s", c.Status, c.From, c.Path))
	}
	if strings.Join(got, ",") != "D  keep.txt,A  keep.txt,R new.txt x.txt" {
		t.Fatalf("diff: %q", got)
	}
	_ = syscall.S_IFREG
}
