package mvcc

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Held creates. A regular file made by CreateHeld is not committed at
// once: it is kept in this Store's memory and committed with the file's
// first content (WriteSparseAttr and the other content writes of the same
// inode), so a small file written by one process costs one commit, not
// two. Anything else that reads or writes the store through this Store
// (View, every commit) commits the held create first, as a commit of its
// own: everyone in the process sees it at once, as if it had been
// committed when CreateHeld returned. Other processes see it after its
// commit; a crash before that loses it, as it loses writes not yet closed
// (the fs layer commits it at the file's close or fsync, or after its
// dirty delay). One create is held at a time.
//
// Its inode number comes from a block that an earlier create's commit
// reserved (inoPool): a held create needs no commit to be numbered.
type heldState struct {
	cur atomic.Pointer[heldCreate] // set while held or being committed
	mu  sync.Mutex                 // held across the commit that ends cur

	poolMu   sync.Mutex
	poolNext Ino // reserved inode numbers [poolNext, poolEnd)
	poolEnd  Ino
}

type heldCreate struct {
	sid   SessionID
	n     Inode // HLC and ContentHLC are 0 until committed
	since time.Time
}

// inoBlock is how many inode numbers a create's commit reserves for the
// held creates after it.
const inoBlock = 64

func (h *heldState) takeIno() (Ino, bool) {
	h.poolMu.Lock()
	defer h.poolMu.Unlock()
	if h.poolNext >= h.poolEnd {
		return 0, false
	}
	h.poolNext++
	return h.poolNext - 1, true
}

func (h *heldState) poolEmpty() bool {
	h.poolMu.Lock()
	defer h.poolMu.Unlock()
	return h.poolNext >= h.poolEnd
}

func (h *heldState) addPool(first, end Ino) {
	h.poolMu.Lock()
	defer h.poolMu.Unlock()
	h.poolNext, h.poolEnd = first, end
}

// lockFor returns the held create of (sid, ino) with h.mu locked (the
// caller commits it and calls release), or nil.
func (h *heldState) lockFor(sid SessionID, ino Ino) *heldCreate {
	if c := h.cur.Load(); c == nil || c.sid != sid || c.n.Ino != ino {
		return nil
	}
	h.mu.Lock()
	if c := h.cur.Load(); c != nil && c.sid == sid && c.n.Ino == ino {
		return c
	}
	h.mu.Unlock()
	return nil
}

// release unlocks h.mu and ends the held create if its commit succeeded
// or can never succeed (the session or the directory is gone, the name
// taken); after an error that may pass (an I/O error) it stays held, to
// be committed by the next try.
func (h *heldState) release(err error) {
	if err == nil || errors.Is(err, ErrForgotten) || errors.Is(err, ErrNoSession) ||
		errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotDir) || errors.Is(err, ErrExist) {
		h.cur.Store(nil)
	}
	h.mu.Unlock()
}

// heldInode returns a copy of the held inode ino of sid, if held.
func (s *Store) heldInode(sid SessionID, ino Ino) (*Inode, bool) {
	if c := s.held.cur.Load(); c != nil && c.sid == sid && c.n.Ino == ino {
		n := c.n
		return &n, true
	}
	return nil, false
}

// heldEntry returns a copy of the held inode named name in parent.
func (s *Store) heldEntry(sid SessionID, parent Ino, name string) (*Inode, bool) {
	if c := s.held.cur.Load(); c != nil && c.sid == sid && c.n.Parent == parent && c.n.Name == name {
		n := c.n
		return &n, true
	}
	return nil, false
}

// CreateHeld is Create of a regular file whose commit is held until its
// first content is written (see heldState); held says whether it was.
// Without a reserved inode number it commits at once, reserving a block
// for the next ones.
func (s *Store) CreateHeld(sid SessionID, parent Ino, name string, a Attr) (n *Inode, held bool, err error) {
	if a.Mode&sIFMT != sIFREG && a.Mode&sIFMT != 0 {
		n, err = s.Create(sid, parent, name, a, "")
		return n, false, err
	}
	if err := ValidName(name); err != nil {
		return nil, false, err
	}
	if err := s.FlushHeld(); err != nil {
		return nil, false, err
	}
	ino, ok := s.held.takeIno()
	if !ok {
		n, err = s.Create(sid, parent, name, a, "")
		return n, false, err
	}
	err = s.view(func(t *ReadTx) error {
		if _, err := t.Header(sid); err != nil {
			return err
		}
		if gone, at, err := t.Forgotten(sid, Latest); err != nil {
			return err
		} else if gone {
			return fmt.Errorf("%w: %s was forgotten at %s", ErrForgotten, sid, at)
		}
		p, err := t.Inode(sid, parent, Latest)
		if err != nil {
			return err
		}
		if err := liveDir(p, parent); err != nil {
			return err
		}
		if _, err := t.Lookup(sid, parent, name, Latest); err == nil {
			return fmt.Errorf("%w: %q", ErrExist, name)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	now := nowNs()
	c := &heldCreate{sid: sid, since: time.Now(), n: Inode{Ino: ino, Mode: a.Mode | sIFREG, Uid: a.Uid, Gid: a.Gid, Nlink: 1,
		Atime: now, Mtime: now, Ctime: now, Parent: parent, Name: name}}
	s.held.mu.Lock()
	if s.held.cur.Load() != nil {
		// Another create was held meanwhile: this one commits now.
		err := s.commitCreateLocked(c)
		if err != nil {
			return nil, false, err
		}
		cp := c.n
		return &cp, false, nil
	}
	s.held.cur.Store(c)
	s.held.mu.Unlock()
	cp := c.n
	return &cp, true, nil
}

// FlushHeldIno commits the held create if it is ino of sid (the fs
// layer's last release of a file never written).
func (s *Store) FlushHeldIno(sid SessionID, ino Ino) error {
	if _, ok := s.heldInode(sid, ino); !ok {
		return nil
	}
	return s.FlushHeld()
}

// FlushHeldOlder commits the held create if it was made more than age
// ago (the fs layer's ticker: a file created and left open unwritten).
func (s *Store) FlushHeldOlder(age time.Duration) error {
	if c := s.held.cur.Load(); c == nil || time.Since(c.since) < age {
		return nil
	}
	return s.FlushHeld()
}

// FlushHeld commits the held create, if any, as a commit of its own. A
// create that cannot be committed is lost (the error says why).
func (s *Store) FlushHeld() error {
	if s.held.cur.Load() == nil {
		return nil
	}
	s.held.mu.Lock()
	c := s.held.cur.Load()
	if c == nil {
		s.held.mu.Unlock()
		return nil
	}
	err := s.commitCreateLocked(c)
	if err != nil {
		slog.Warn("padfs: commit of a created file failed", "name", c.n.Name, "ino", c.n.Ino, "err", err)
		return fmt.Errorf("commit the create of %q: %w", c.n.Name, err)
	}
	return nil
}

// commitCreateLocked commits create c on its own; s.held.mu is locked and
// is unlocked (release) once the transaction ends. If c is the held
// create, release decides whether it stays held.
func (s *Store) commitCreateLocked(c *heldCreate) error {
	done := func(err error) {
		if s.held.cur.Load() == c {
			s.held.release(err)
			return
		}
		s.held.mu.Unlock()
	}
	_, err := s.commitThen(c.sid, commitLive, func(t *WriteTx) error {
		n := c.n
		if err := t.putHeldLocked(&n); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpCreate, Path: t.pathOf(n.Parent, n.Name), Ino: n.Ino})
		return nil
	}, done)
	return err
}

// putHeldLocked writes the held inode n, its entry and its directory's
// change, checking again what CreateHeld checked.
func (t *WriteTx) putHeldLocked(n *Inode) error {
	if n.ContentHLC == 0 {
		n.ContentHLC = t.hlc
	}
	return t.putNew(n, 0)
}

// commitHeldWrite commits held create c together with its first content
// (apply changes n as commitWrite does): one version, one event, a
// "create" that carries the content's size and hash.
func (s *Store) commitHeldWrite(c *heldCreate, apply func(t *WriteTx, n *Inode) ([]string, error), out **Inode) error {
	var n *Inode
	_, err := s.commitThen(c.sid, commitLive, func(t *WriteTx) error {
		n = new(Inode)
		*n = c.n
		attrs, err := apply(t, n)
		if err != nil {
			return err
		}
		if err := t.putHeldLocked(n); err != nil {
			return err
		}
		ev := Event{Op: OpCreate, Path: t.pathOf(n.Parent, n.Name), Ino: n.Ino, Size: int64(n.Size), Hash: n.HashHex(),
			Detail: "with content"}
		if len(attrs) > 0 {
			ev.Detail += ", " + strings.Join(attrs, ",")
		}
		t.SetEvent(ev)
		return nil
	}, s.held.release)
	if err == nil {
		*out = n
	}
	return err
}
