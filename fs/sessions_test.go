package fs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"context"
	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
)

func TestMultiSession(t *testing.T) {
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pre, err := st.CreateSession("pre", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var forgotten []mvcc.SessionID
	mnt := filepath.Join(t.TempDir(), "mnt")
	mountAt(t, st, mnt, Options{Forget: func(id mvcc.SessionID) error {
		forgotten = append(forgotten, id)
		_, err := st.Forget(id)
		return err
	}})

	if got := sh(t, mnt, "ls"); got != pre.ID.String()+"\nby-name\n" {
		t.Errorf("root lists %q", got)
	}
	// mkdir creates a session; it is then listed by its ULID and can be
	// used by name or id.
	sh(t, mnt, "mkdir work && echo hi > work/f && mkdir -m 700 private")
	sessions, _ := st.Sessions()
	var work, private mvcc.SessionInfo
	for _, s := range sessions {
		switch s.Name {
		case "work":
			work = s
		case "private":
			private = s
		}
	}
	if work.ID == (mvcc.SessionID{}) || private.ID == (mvcc.SessionID{}) {
		t.Fatalf("sessions: %+v", sessions)
	}
	if got := sh(t, mnt, "ls | sort"); !strings.Contains(got, work.ID.String()) || strings.Contains(got, "work") {
		t.Errorf("root lists %q", got)
	}
	if got := sh(t, mnt, "cat "+work.ID.String()+"/f"); got != "hi\n" {
		t.Errorf("by id: %q", got)
	}
	if got := sh(t, mnt, "stat -c %a "+private.ID.String()); got != "700\n" {
		t.Errorf("mkdir -m 700: %q", got)
	}
	if _, err := shErr(mnt, "mkdir work"); err == nil {
		t.Errorf("mkdir of an existing session name succeeded")
	}
	// Each session has its own .asof and is isolated.
	sh(t, mnt, "test -d work/.asof && ls work/.asof | grep -q . && test ! -e "+pre.ID.String()+"/f")
	if _, err := shErr(mnt, "touch file-at-root"); err == nil {
		t.Errorf("a file at the root was created")
	}
	if err := os.Rename(filepath.Join(mnt, "work", "f"), filepath.Join(mnt, pre.ID.String(), "f")); !isErrno(err, syscall.EXDEV) {
		t.Errorf("rename across sessions: %v", err)
	}
	// rm -rf of a session directory forgets it.
	sh(t, mnt, "rm -rf "+work.ID.String())
	if len(forgotten) != 1 || forgotten[0] != work.ID {
		t.Errorf("forgotten %v", forgotten)
	}
	if got := sh(t, mnt, "ls"); strings.Contains(got, work.ID.String()) {
		t.Errorf("forgotten session still listed: %q", got)
	}
	if _, err := os.Stat(filepath.Join(mnt, "work")); !os.IsNotExist(err) {
		t.Errorf("forgotten session by name: %v", err)
	}
	if _, err := os.Stat(filepath.Join(mnt, work.ID.String())); !os.IsNotExist(err) {
		t.Errorf("forgotten session by id: %v", err)
	}
}

// TestMultiSessionByName: the root's by-name/ lists the named live
// sessions as symlinks to their id directories, follows creations,
// renames and forgets at once, and cannot be written.
func TestMultiSessionByName(t *testing.T) {
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	pre, err := st.CreateSession("pre", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	anon, err := st.CreateSession("", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	m := mountAt(t, st, mnt, Options{Forget: func(id mvcc.SessionID) error {
		_, err := st.Forget(id)
		return err
	}})

	if got := sh(t, mnt, "ls by-name"); got != "pre\n" {
		t.Errorf("ls by-name: %q", got)
	}
	if got := sh(t, mnt, "readlink by-name/pre"); got != "../"+pre.ID.String()+"\n" {
		t.Errorf("readlink by-name/pre: %q", got)
	}
	sh(t, mnt, "echo hi > by-name/pre/f")
	if got := sh(t, mnt, "cat "+pre.ID.String()+"/f"); got != "hi\n" {
		t.Errorf("written through by-name/pre: %q", got)
	}
	// find sees each session once: it does not follow the symlinks.
	if got := sh(t, mnt, "find . -name f | sort"); got != "./"+pre.ID.String()+"/f\n" {
		t.Errorf("find: %q", got)
	}
	// Created (mkdir and behind the mount's back), renamed, forgotten:
	// by-name/ follows.
	sh(t, mnt, "mkdir work")
	if err := st.RenameSession(anon.ID, "anon"); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, mnt, "ls by-name"); got != "anon\npre\nwork\n" {
		t.Errorf("ls by-name after mkdir and rename: %q", got)
	}
	if got := sh(t, mnt, "readlink by-name/anon"); got != "../"+anon.ID.String()+"\n" {
		t.Errorf("readlink by-name/anon: %q", got)
	}
	if err := st.RenameSession(pre.ID, "post"); err != nil {
		t.Fatal(err)
	}
	m.InvalidateSessionWait(pre.ID) // as padfs session rename does
	if _, err := os.Lstat(filepath.Join(mnt, "by-name", "pre")); !os.IsNotExist(err) {
		t.Errorf("by-name/pre after the rename: %v", err)
	}
	if got := sh(t, mnt, "cat by-name/post/f"); got != "hi\n" {
		t.Errorf("cat by-name/post/f: %q", got)
	}
	sh(t, mnt, "rmdir work")
	if got := sh(t, mnt, "ls by-name"); got != "anon\npost\n" {
		t.Errorf("ls by-name after rmdir work: %q", got)
	}
	if err := os.Mkdir(filepath.Join(mnt, "by-name"), 0o755); !errors.Is(err, os.ErrExist) {
		t.Errorf("mkdir by-name: %v", err)
	}
	if err := syscall.Rmdir(filepath.Join(mnt, "by-name")); err != syscall.EPERM {
		t.Errorf("rmdir by-name: %v", err)
	}
	if err := os.Symlink("x", filepath.Join(mnt, "by-name", "x")); !isErrno(err, syscall.EROFS) {
		t.Errorf("symlink in by-name: %v", err)
	}
	if err := os.Remove(filepath.Join(mnt, "by-name", "post")); !isErrno(err, syscall.EROFS) {
		t.Errorf("unlink in by-name: %v", err)
	}
}

func TestMultiSessionNoForget(t *testing.T) {
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	mnt := filepath.Join(t.TempDir(), "mnt")
	mountAt(t, st, mnt, Options{})
	sh(t, mnt, "mkdir s")
	if err := syscall.Rmdir(filepath.Join(mnt, "s")); err != syscall.EPERM {
		t.Errorf("rmdir of a session without a Forget hook: %v", err)
	}
}

func TestVirtualDir(t *testing.T) {
	data := t.TempDir()
	st, err := storeopen.OpenDir(data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := st.CreateSession("v", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	mnt := filepath.Join(t.TempDir(), "mnt")
	mountAt(t, st, mnt, Options{Session: &h.ID, Virtual: map[string]VirtualDir{
		".grep": {
			Open: func(_ context.Context, sid mvcc.SessionID, name string) ([]byte, error) {
				if name == "missing" {
					return nil, fmt.Errorf("%w: no %s", mvcc.ErrNotFound, name)
				}
				calls++
				return []byte(fmt.Sprintf("%s results for %s (%d)\n", sid, name, calls)), nil
			},
		},
		".log": {
			List: func(mvcc.SessionID) ([]string, error) { return []string{"log.jsonl"}, nil },
			Open: func(_ context.Context, sid mvcc.SessionID, name string) ([]byte, error) {
				if name != "log.jsonl" {
					return nil, mvcc.ErrNotFound
				}
				return []byte("{}\n"), nil
			},
		},
	}})
	out := sh(t, mnt, "cat .grep/TODO")
	if !strings.HasPrefix(out, h.ID.String()+" results for TODO") {
		t.Errorf("cat .grep/TODO: %q", out)
	}
	if out2 := sh(t, mnt, "cat .grep/TODO"); out2 == out {
		t.Errorf("content not regenerated on open: %q", out2)
	}
	if _, err := os.Stat(filepath.Join(mnt, ".grep", "missing")); !os.IsNotExist(err) {
		t.Errorf("missing virtual file: %v", err)
	}
	if got := sh(t, mnt, "ls .log"); got != "log.jsonl\n" {
		t.Errorf("ls .log: %q", got)
	}
	if got := sh(t, mnt, "ls -a"); strings.Contains(got, ".grep") || strings.Contains(got, ".log") {
		t.Errorf("virtual dirs listed: %q", got)
	}
	if err := os.WriteFile(filepath.Join(mnt, ".grep", "x"), nil, 0o644); !isErrno(err, syscall.EROFS) {
		t.Errorf("write in .grep: %v", err)
	}
	if err := os.Mkdir(filepath.Join(mnt, ".grep"), 0o755); !errors.Is(err, os.ErrExist) {
		t.Errorf("mkdir .grep: %v", err)
	}
}
