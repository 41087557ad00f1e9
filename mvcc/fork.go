package mvcc

import (
	"context"
	"fmt"
)

// ForkOptions tune Fork.
type ForkOptions struct {
	// Name of the new session (optional).
	Name string
	// ID of the new session; zero: a fresh ULID. An id that already exists
	// is refused with ErrExist.
	ID SessionID
	// Uid and Gid are unused: the fork keeps the source's owners.
}

// Fork creates a new session whose tree is src's tree as of at (Latest:
// now) and returns its header, which records the parent and the HLC forked
// from.
//
// It is one commit in the new session (event session.fork; the source id
// in Path2, the HLC forked from in Detail) and does not touch src. Only
// metadata is copied: every inode gets a NEW number (inode numbers are
// unique across the store; two names of one source inode get one new inode,
// so hard links survive), the entries are written in the new session, and
// each chunk the new inodes use gains a reference from the new session; the
// chunk bytes themselves are shared, so forking a 1 GB session copies no
// file bytes. Only the state as of at is copied, not its history: the new
// session's .asof/ starts at the fork.
//
// ctx ends the copy early (nothing is committed) with ctx.Err().
func (s *Store) Fork(ctx context.Context, src SessionID, at HLC, opt ForkOptions) (*SessionHeader, error) {
	if opt.Name != "" {
		if err := ValidSessionName(opt.Name); err != nil {
			return nil, err
		}
	}
	id := opt.ID
	if id == (SessionID{}) {
		var err error
		if id, err = NewSessionID(); err != nil {
			return nil, err
		}
	}
	h := &SessionHeader{ID: id, Name: opt.Name}
	_, err := s.commit(id, commitNew, func(t *WriteTx) error {
		if err := t.checkNameFree(opt.Name, id); err != nil {
			return err
		}
		sh, err := t.Header(src)
		if err != nil {
			return err
		}
		_, last, err := t.LastEvent(src)
		if err != nil {
			return err
		}
		from := at
		if from == Latest || from >= t.hlc {
			from = last // the newest state: this commit holds the writer lock
		}
		if from < sh.Created {
			return fmt.Errorf("%w: session %s did not exist yet at %s (created %s)", ErrNotFound, src, from, sh.Created)
		}
		if gone, when, err := t.Forgotten(src, from); err != nil {
			return err
		} else if gone {
			return fmt.Errorf("%w: %s was forgotten at %s; fork it as of an earlier time", ErrForgotten, src, when)
		}
		h.Created, h.Parent, h.ForkedAt = t.hlc, &src, from
		return t.copyTree(ctx, src, sh.Root, from, h)
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// copyTree writes src's tree as of at into the commit's (new) session and
// its header, state and event.
func (t *WriteTx) copyTree(ctx context.Context, src SessionID, srcRoot Ino, at HLC, h *SessionHeader) error {
	// Walk first: every inode of the tree, with the names it has.
	type link struct {
		parent Ino // source inode numbers
		name   string
		typ    uint32
	}
	rootNode, err := t.Inode(src, srcRoot, at)
	if err != nil {
		return fmt.Errorf("root of %s: %w", src, err)
	}
	nodes := map[Ino]*Inode{srcRoot: rootNode}
	links := map[Ino][]link{}
	var order []Ino // first-seen order: parents before children
	subdirs := map[Ino]uint32{}
	if err := t.WalkTree(src, at, func(e TreeEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ino := e.Node.Ino
		if _, seen := nodes[ino]; !seen {
			nodes[ino] = e.Node
			order = append(order, ino)
		}
		links[ino] = append(links[ino], link{e.Parent, e.Name, e.Node.Mode & sIFMT})
		if e.Node.IsDir() {
			subdirs[e.Parent]++
		}
		return nil
	}); err != nil {
		return err
	}

	// New numbers, allocated in tree order.
	newIno := map[Ino]Ino{}
	root, err := t.AllocIno()
	if err != nil {
		return err
	}
	newIno[srcRoot] = root
	for _, ino := range order {
		if newIno[ino], err = t.AllocIno(); err != nil {
			return err
		}
	}
	h.Root = root
	if err := t.put(headerKey(h.ID), h); err != nil {
		return err
	}
	if err := t.put(stateKey(h.ID, t.hlc), &sessionState{}); err != nil {
		return err
	}

	put := func(n *Inode, ls []link) error {
		c := *n
		c.Ino = newIno[n.Ino]
		c.ContentHLC = t.hlc
		// The attribute set as of at, inline (format 1) or keyed, becomes
		// keyed versions of the new inode.
		xs, err := t.xattrsOf(src, n, at)
		if err != nil {
			return err
		}
		c.Xattrs = nil
		for _, name := range sortedNames(xs) {
			if err := t.putXattr(c.Ino, name, xs[name]); err != nil {
				return err
			}
		}
		if n.IsDir() {
			c.Nlink = 2 + subdirs[n.Ino]
		} else {
			c.Nlink = uint32(len(ls))
		}
		c.Parent, c.Name = 0, ""
		if len(ls) > 0 {
			// Keep the source's primary link if it is one of the names
			// copied; else the first name in tree order.
			primary := ls[0]
			for _, l := range ls {
				if l.parent == n.Parent && l.name == n.Name {
					primary = l
				}
			}
			c.Parent, c.Name = newIno[primary.parent], primary.name
		}
		return t.PutInode(&c)
	}
	if err := put(rootNode, nil); err != nil {
		return err
	}
	for _, ino := range order {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := nodes[ino]
		ls := links[ino]
		if err := put(n, ls); err != nil {
			return err
		}
		for _, l := range ls {
			if err := t.PutDentry(newIno[l.parent], l.name, newIno[ino], l.typ); err != nil {
				return err
			}
		}
	}
	t.SetEvent(Event{Op: OpFork, Path: ".", Path2: src.String(), Detail: at.String()})
	return nil
}
