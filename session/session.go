// Package session is padfs's Go API: the scratchpad recipe for programs
// that embed padfs without FUSE (an agent framework, a test harness).
//
//	st, _ := session.Open(dataDir)      // the same store a mount serves
//	pad, _ := st.Create("agent-42")     // or st.Resume(id): no load step
//	pad.Write("notes.md", "# Notes\n")  // mkdir -p of the parents, one version
//	s, ok, _ := pad.Read("notes.md")    // ok == false: absent (not "")
//	pad.Edit("notes.md", "Notes", "Plan") // exactly one occurrence, else an error
//	t, _ := st.Now()
//	pad.AsOf(t).Read("notes.md")        // any past state
//	pad.Grep("Plan", 10)                // matching lines
//	pad.Ls("")                          // every file path, sorted
//	pad.Fork("try-b")                   // a new session from this state
//	pad.Forget()                        // soft: history stays readable as of before
//
// Semantics are the mount's: paths are relative to the session root ("/" and
// "." components are ignored, ".." cannot leave the root), every Write,
// Edit and mkdir is a commit with an event in the session's log, and a
// later mount of the same data directory sees them. bbolt locks the data
// directory for one process: while a mount runs, use the CLI (it goes
// through the mount's control socket) or embed the mount's store with Wrap;
// a program that writes through Wrap inside the mount's process must then
// call the mount's InvalidateSession, as the CLI does, because the kernel
// caches a live mount's entries and attributes for up to a minute.
package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/padfs/padfs/internal/storeopen"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search"
	"github.com/padfs/padfs/timetravel"
)

// HLC is a commit stamp: a hybrid logical clock time (see mvcc.HLC).
type HLC = mvcc.HLC

// Errors of Edit, besides mvcc's sentinel errors (mvcc.ErrNotFound, ...).
var (
	// ErrNoMatch: the text to replace does not occur in the file.
	ErrNoMatch = errors.New("text to replace not found")
	// ErrAmbiguous: the text to replace occurs more than once.
	ErrAmbiguous = errors.New("text to replace occurs more than once")
	// ErrConflict: the file changed between Edit's read and its write.
	ErrConflict = errors.New("file changed during the edit")
)

// Store is an open padfs data directory.
type Store struct {
	st  *mvcc.Store
	ix  *search.Index // nil: no index
	own bool
	uid uint32
	gid uint32
}

// Open opens (creating if needed) the store in dataDir, the directory a
// mount uses (padfs mount --data DIR), and its search index, which follows
// the store in the background as in a mount. Close it when done.
func Open(dataDir string) (*Store, error) { return OpenStore(dataDir, "") }

// OpenStore is Open with a store URL (padfs --store): a postgres:// URL
// opens that PostgreSQL database, shared with padfs processes on other
// hosts; dataDir then holds only this host's search index. With storeURL
// "" it is Open.
func OpenStore(dataDir, storeURL string) (*Store, error) {
	st, err := storeopen.Open(dataDir, storeURL)
	if err != nil {
		return nil, err
	}
	ix, err := search.OpenWith(dataDir, st, search.Options{Background: true})
	if err != nil {
		st.Close()
		return nil, err
	}
	s := Wrap(st, ix)
	s.own = true
	return s, nil
}

// Wrap returns the API over an already open store and its index (nil:
// none; Grep then reads every file, Search fails), e.g. the ones a mount
// serves, in the mount's process. Close closes neither.
func Wrap(st *mvcc.Store, ix *search.Index) *Store {
	return &Store{st: st, ix: ix, uid: uint32(os.Getuid()), gid: uint32(os.Getgid())}
}

// Close closes the index and the store if Open opened them.
func (s *Store) Close() error {
	if !s.own {
		return nil
	}
	var err error
	if s.ix != nil {
		err = s.ix.Close()
	}
	return errors.Join(err, s.st.Close())
}

// MVCC returns the underlying versioned store.
func (s *Store) MVCC() *mvcc.Store { return s.st }

// Now returns an HLC later than every commit so far: AsOf(Now()) shows
// every write that returned before the call.
func (s *Store) Now() (HLC, error) { return s.st.Now() }

// Create creates an empty session. name is optional; a name another live
// session has is refused (mvcc.ErrExist, naming that session).
func (s *Store) Create(name string) (*Session, error) {
	h, err := s.st.CreateSession(name, s.uid, s.gid)
	if err != nil {
		return nil, err
	}
	return &Session{s: s, h: h}, nil
}

// Resume returns the live session with the given id (a ULID, as Session.ID
// and padfs session ls print it). There is no load step: every write of
// every earlier process is there. A forgotten session is mvcc.ErrForgotten.
func (s *Store) Resume(id string) (*Session, error) {
	sid, err := mvcc.ParseSessionID(id)
	if err != nil {
		return nil, err
	}
	h, err := s.st.LiveHeader(sid)
	if err != nil {
		return nil, err
	}
	return &Session{s: s, h: h}, nil
}

// Session is one scratchpad. It is safe for concurrent use.
type Session struct {
	s *Store
	h *mvcc.SessionHeader
}

// ID returns the session's id (a ULID).
func (p *Session) ID() string { return p.h.ID.String() }

// SID returns the session's id as the store's type.
func (p *Session) SID() mvcc.SessionID { return p.h.ID }

// Name returns the session's name.
func (p *Session) Name() string { return p.h.Name }

// Header returns the session's immutable header (created, parent, forked at).
func (p *Session) Header() mvcc.SessionHeader { return *p.h }

// clean splits a path relative to the session root into its components.
func clean(p string) ([]string, error) {
	c := strings.TrimPrefix(path.Clean("/"+p), "/")
	if c == "" {
		return nil, nil
	}
	parts := strings.Split(c, "/")
	for _, n := range parts {
		if err := mvcc.ValidName(n); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		if n == ".asof" || n == ".log" || n == ".grep" {
			return nil, fmt.Errorf("%s: %w: %s is reserved at every level by the Go API", p, mvcc.ErrInvalid, n)
		}
	}
	return parts, nil
}

// Write sets the content of the file at path, creating it (mode 0644) and
// its missing parent directories (mode 0755) as mkdir -p does. Each step
// is one commit, as through the mount. ctx ends the storing of a large
// content early, with ctx.Err() and the file's content unchanged.
func (p *Session) Write(ctx context.Context, path, content string) error {
	parts, err := clean(path)
	if err != nil {
		return err
	}
	if len(parts) == 0 {
		return fmt.Errorf("%q: %w", path, mvcc.ErrIsDir)
	}
	dir := p.h.Root
	for i, name := range parts[:len(parts)-1] {
		n, err := p.s.st.Lookup(p.h.ID, dir, name, mvcc.Latest)
		if errors.Is(err, mvcc.ErrNotFound) {
			n, err = p.s.st.Create(p.h.ID, dir, name, mvcc.Attr{Mode: dirMode, Uid: p.s.uid, Gid: p.s.gid}, "")
			if errors.Is(err, mvcc.ErrExist) { // created meanwhile
				n, err = p.s.st.Lookup(p.h.ID, dir, name, mvcc.Latest)
			}
		}
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(parts[:i+1], "/"), err)
		}
		if !n.IsDir() {
			return fmt.Errorf("%s: %w", strings.Join(parts[:i+1], "/"), mvcc.ErrNotDir)
		}
		dir = n.Ino
	}
	name := parts[len(parts)-1]
	n, err := p.s.st.Lookup(p.h.ID, dir, name, mvcc.Latest)
	if errors.Is(err, mvcc.ErrNotFound) {
		n, err = p.s.st.Create(p.h.ID, dir, name, mvcc.Attr{Mode: fileMode, Uid: p.s.uid, Gid: p.s.gid}, "")
		if errors.Is(err, mvcc.ErrExist) {
			n, err = p.s.st.Lookup(p.h.ID, dir, name, mvcc.Latest)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !n.IsRegular() {
		return fmt.Errorf("%s: %w: not a regular file", path, mvcc.ErrInvalid)
	}
	if _, err := p.s.st.WriteContent(ctx, p.h.ID, n.Ino, strings.NewReader(content), timeNow()); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Read returns the content of the file at path. A path that does not exist
// (never written, removed, or below a missing directory) is ("", false,
// nil), distinct from an empty file ("", true, nil). A directory is
// mvcc.ErrIsDir; a symlink is not followed and reads as its target.
func (p *Session) Read(path string) (string, bool, error) {
	return p.read(path, mvcc.Latest)
}

func (p *Session) read(path string, at HLC) (string, bool, error) {
	parts, err := clean(path)
	if err != nil {
		return "", false, err
	}
	var content []byte
	found := false
	err = p.s.st.View(func(t *mvcc.ReadTx) error {
		n, err := t.Walk(p.h.ID, strings.Join(parts, "/"), at)
		if errors.Is(err, mvcc.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		switch {
		case n.IsDir():
			return fmt.Errorf("%s: %w", path, mvcc.ErrIsDir)
		case n.IsSymlink():
			content = []byte(n.Target)
		default:
			if content, err = t.Content(n); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		found = true
		return nil
	})
	if err != nil {
		return "", false, err
	}
	return string(content), found, nil
}

// Edit replaces the one occurrence of old in the file at path with new.
// It fails, changing nothing, if the file does not exist (mvcc.ErrNotFound),
// if old is empty or absent (ErrNoMatch), if it occurs more than once
// (ErrAmbiguous), or if the file changed between the read and the write
// (ErrConflict: the commit checks that the content it edited is still the
// latest). ctx ends it early as it does Write.
func (p *Session) Edit(ctx context.Context, path, old, new string) error {
	parts, err := clean(path)
	if err != nil {
		return err
	}
	rel := strings.Join(parts, "/")
	var n *mvcc.Inode
	var content []byte
	err = p.s.st.View(func(t *mvcc.ReadTx) error {
		var err error
		if n, err = t.Walk(p.h.ID, rel, mvcc.Latest); err != nil {
			return err
		}
		if !n.IsRegular() {
			return fmt.Errorf("%w: not a regular file", mvcc.ErrInvalid)
		}
		content, err = t.Content(n)
		return err
	})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	switch c := bytes.Count(content, []byte(old)); {
	case old == "" || c == 0:
		return fmt.Errorf("%s: %w", path, ErrNoMatch)
	case c > 1:
		return fmt.Errorf("%s: %w (%d times); include more context to make it unique", path, ErrAmbiguous, c)
	}
	edited := bytes.NewReader(bytes.Replace(content, []byte(old), []byte(new), 1))
	_, err = p.s.st.WriteContentIf(ctx, p.h.ID, n.Ino, edited, timeNow(), mvcc.SetAttr{}, func(cur *mvcc.Inode) error {
		if cur.ContentHLC != n.ContentHLC || cur.Nlink == 0 {
			return ErrConflict // changed or removed since we read it
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Ls returns the paths of every file (and symlink) in the session whose
// path starts with prefix ("" lists all), sorted. Directories are not
// listed themselves.
func (p *Session) Ls(prefix string) ([]string, error) { return p.ls(prefix, mvcc.Latest) }

func (p *Session) ls(prefix string, at HLC) ([]string, error) {
	prefix = strings.TrimLeft(prefix, "/")
	for strings.HasPrefix(prefix, "./") {
		prefix = strings.TrimLeft(prefix[2:], "/")
	}
	var out []string
	err := p.s.st.View(func(t *mvcc.ReadTx) error {
		return t.WalkTree(p.h.ID, at, func(e mvcc.TreeEntry) error {
			if !e.Node.IsDir() && strings.HasPrefix(e.Path, prefix) {
				out = append(out, e.Path)
			}
			return nil
		})
	})
	sort.Strings(out)
	return out, err
}

// Forget soft-forgets the session: it leaves live listings and can no
// longer be written or resumed, but every AsOf read of a time before the
// forget still works. (The irreversible purge is Store.PlanPurge and
// Store.Purge.)
func (p *Session) Forget() error {
	_, err := p.s.st.Forget(p.h.ID)
	return err
}

// Checkpoint names the session's current state; AsOf(Resolve(name)) and
// .asof/NAME/ in a mount show it.
func (p *Session) Checkpoint(name string) (HLC, error) {
	return p.s.st.CreateCheckpoint(p.h.ID, name)
}

// Resolve turns a checkpoint name, a canonical HLC or an RFC 3339 time into
// the HLC whose state it names.
func (p *Session) Resolve(name string) (HLC, error) {
	return timetravel.Resolve(p.s.st, p.h.ID, name)
}

// Log returns the session's events after sequence number since (0: all),
// oldest first.
func (p *Session) Log(since uint64) ([]mvcc.Event, error) {
	return p.s.st.Log(p.h.ID, mvcc.LogFilter{AfterSeq: since})
}

// Fork creates a new session (named name, optional) whose tree is this
// session's current tree; the two evolve independently from then on.
// ctx ends the copy of a large tree early, with ctx.Err() and no new
// session.
func (p *Session) Fork(ctx context.Context, name string) (*Session, error) {
	return p.fork(ctx, mvcc.Latest, name)
}

func (p *Session) fork(ctx context.Context, at HLC, name string) (*Session, error) {
	h, err := p.s.st.Fork(ctx, p.h.ID, at, mvcc.ForkOptions{Name: name})
	if err != nil {
		return nil, err
	}
	return &Session{s: p.s, h: h}, nil
}

// View is a read-only view of a session as of one HLC.
type View struct {
	p  *Session
	at HLC
}

// AsOf returns the session as it was at at (every commit with an HLC at or
// before it). Views of a forgotten session work for times before the
// forget.
func (p *Session) AsOf(at HLC) *View { return &View{p, at} }

// At returns the HLC the view shows.
func (v *View) At() HLC { return v.at }

// Read is Session.Read as of the view's HLC.
func (v *View) Read(path string) (string, bool, error) { return v.p.read(path, v.at) }

// Ls is Session.Ls as of the view's HLC.
func (v *View) Ls(prefix string) ([]string, error) { return v.p.ls(prefix, v.at) }

// Fork creates a new session whose tree is this view's state (ctx as for
// Session.Fork).
func (v *View) Fork(ctx context.Context, name string) (*Session, error) {
	return v.p.fork(ctx, v.at, name)
}
