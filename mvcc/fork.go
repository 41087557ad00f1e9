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
	rootNode, err := t.Inode(src, srcRoot, at)
	if err != nil {
		return fmt.Errorf("root of %s: %w", src, err)
	}
	c := &treeCopy{src: src, at: at, nodes: map[Ino]*Inode{srcRoot: rootNode}, links: map[Ino][]copyLink{},
		subdirs: map[Ino]uint32{}, newIno: map[Ino]Ino{}}
	if err := c.walk(ctx, t); err != nil {
		return err
	}

	// New numbers, allocated in tree order.
	root, err := t.AllocIno()
	if err != nil {
		return err
	}
	c.newIno[srcRoot] = root
	for _, ino := range c.order {
		if c.newIno[ino], err = t.AllocIno(); err != nil {
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
	if err := c.put(t, rootNode, nil); err != nil {
		return err
	}
	for _, ino := range c.order {
		if err := ctx.Err(); err != nil {
			return err
		}
		ls := c.links[ino]
		if err := c.put(t, c.nodes[ino], ls); err != nil {
			return err
		}
		for _, l := range ls {
			if err := t.PutDentry(c.newIno[l.parent], l.name, c.newIno[ino], l.typ); err != nil {
				return err
			}
		}
	}
	t.SetEvent(Event{Op: OpFork, Path: ".", Path2: src.String(), Detail: at.String()})
	return nil
}

// treeCopy is a fork's copy of a tree: what the walk found, then the new
// inode numbers.
type treeCopy struct {
	src     SessionID
	at      HLC
	nodes   map[Ino]*Inode
	links   map[Ino][]copyLink
	order   []Ino // first-seen order: parents before children
	subdirs map[Ino]uint32
	newIno  map[Ino]Ino
}

// copyLink is one name of a source inode (source numbers).
type copyLink struct {
	parent Ino
	name   string
	typ    uint32
}

// walk finds every inode of the tree, with the names it has.
func (c *treeCopy) walk(ctx context.Context, t *WriteTx) error {
	return t.WalkTree(c.src, c.at, func(e TreeEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		ino := e.Node.Ino
		if _, seen := c.nodes[ino]; !seen {
			c.nodes[ino] = e.Node
			c.order = append(c.order, ino)
		}
		c.links[ino] = append(c.links[ino], copyLink{e.Parent, e.Name, e.Node.Mode & sIFMT})
		if e.Node.IsDir() {
			c.subdirs[e.Parent]++
		}
		return nil
	})
}

// put writes the copy of n, whose names are ls, under its new number.
func (c *treeCopy) put(t *WriteTx, n *Inode, ls []copyLink) error {
	cp := *n
	cp.Ino = c.newIno[n.Ino]
	cp.ContentHLC = t.hlc
	// The attribute set as of at, inline (format 1) or keyed, becomes
	// keyed versions of the new inode.
	xs, err := t.xattrsOf(c.src, n, c.at)
	if err != nil {
		return err
	}
	cp.Xattrs = nil
	for _, name := range sortedNames(xs) {
		if err := t.putXattr(cp.Ino, name, xs[name]); err != nil {
			return err
		}
	}
	if n.IsDir() {
		cp.Nlink = 2 + c.subdirs[n.Ino]
	} else {
		cp.Nlink = uint32(len(ls))
	}
	cp.Parent, cp.Name = 0, ""
	if len(ls) > 0 {
		// Keep the source's primary link if it is one of the names
		// copied; else the first name in tree order.
		primary := ls[0]
		for _, l := range ls {
			if l.parent == n.Parent && l.name == n.Name {
				primary = l
			}
		}
		cp.Parent, cp.Name = c.newIno[primary.parent], primary.name
	}
	return t.PutInode(&cp)
}
