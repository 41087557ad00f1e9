package mvcc

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// Helpers for the fs layer (fs/), kept out of the core files.

// LastHLC returns the newest HLC issued so far (by a commit or by Now),
// without issuing a new one. A state as of an HLC strictly below it can no
// longer change: every later commit gets a greater HLC, and commits take
// their HLC inside the serialized write transaction, so at most the one
// commit stamped LastHLC itself may still be in flight.
func (s *Store) LastHLC() HLC { return s.clock.Last() }

// CreateUnlinked makes a new regular file that is in no directory, as
// open(O_TMPFILE) does: an inode with nlink 0 (its Parent is dir, where
// the file system put it), which Link can later give a name. Until then
// it is reachable only through its open handles.
func (s *Store) CreateUnlinked(sid SessionID, dir Ino, a Attr) (*Inode, error) {
	var n *Inode
	_, err := s.Update(sid, func(t *WriteTx) error {
		if _, err := t.dirOf(dir); err != nil {
			return err
		}
		ino, err := t.AllocIno()
		if err != nil {
			return err
		}
		now := nowNs()
		n = &Inode{Ino: ino, Mode: a.Mode&^uint32(sIFMT) | sIFREG, Uid: a.Uid, Gid: a.Gid,
			Atime: now, Mtime: now, Ctime: now, Parent: dir, ContentHLC: t.hlc}
		if err := t.PutInode(n); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpCreate, Ino: ino, Detail: "tmpfile"})
		return nil
	})
	return n, err
}

// WriteContentAttr is WriteContent that also applies chmod, chown and
// utimens changes (a; a.Size is ignored) in the same commit: the fs layer
// uses it for a file whose attributes changed while it had unsaved writes
// (tar sets mode, owner and times on the open file before closing it), so
// such a file costs one version, not four. a.Mtime, when set, wins over
// mtime.
func (s *Store) WriteContentAttr(ctx context.Context, sid SessionID, ino Ino, r io.Reader, mtime int64, a SetAttr) (*Inode, error) {
	return s.WriteContentIf(ctx, sid, ino, r, mtime, a, nil)
}

// WriteContentIf is WriteContentAttr that commits only if check (when not
// nil) accepts the current version inside the commit; its error is
// returned as is. The Go API's Edit uses it to refuse a lost update.
func (s *Store) WriteContentIf(ctx context.Context, sid SessionID, ino Ino, r io.Reader, mtime int64, a SetAttr, check func(cur *Inode) error) (*Inode, error) {
	var n *Inode
	err := s.commitContent(ctx, r, s.commitWrite(sid, ino, mtime, a, check, &n))
	return n, err
}

// WriteSparseAttr is WriteContentAttr of sparse content: only sp's data is
// read (the fs layer's dirty buffers know their holes). ctx ends it early.
func (s *Store) WriteSparseAttr(ctx context.Context, sid SessionID, ino Ino, sp Sparse, mtime int64, a SetAttr) (*Inode, error) {
	var n *Inode
	err := s.commitPut(func(int) (*Content, error) { return s.putSparseContent(ctx, sp, true) },
		s.commitWrite(sid, ino, mtime, a, nil, &n))
	return n, err
}

// commitWrite returns the commit of WriteContentIf, which sets *out. The
// first content of a held create (held.go) commits the create with it.
func (s *Store) commitWrite(sid SessionID, ino Ino, mtime int64, a SetAttr, check func(cur *Inode) error, out **Inode) func(*Content) error {
	return func(c *Content) error {
		apply := func(t *WriteTx, n *Inode) ([]string, error) {
			if !n.IsRegular() {
				return nil, fmt.Errorf("%w: inode %d is not a regular file", ErrInvalid, ino)
			}
			if check != nil {
				if err := check(n); err != nil {
					return nil, err
				}
			}
			attrs, mt := applyAttr(n, a, mtime)
			if err := t.applyContent(c, n); err != nil {
				return nil, err
			}
			n.Mtime, n.Ctime, n.ContentHLC = mt, nowNs(), t.hlc
			return attrs, nil
		}
		if h := s.held.lockFor(sid, ino); h != nil {
			return s.commitHeldWrite(h, apply, out)
		}
		var n *Inode
		defer func() { *out = n }()
		_, err := s.Update(sid, func(t *WriteTx) error {
			var err error
			if n, err = t.Latest(ino); err != nil {
				return err
			}
			attrs, err := apply(t, n)
			if err != nil {
				return err
			}
			if err := t.PutInode(n); err != nil {
				return err
			}
			path := t.pathOf(n.Parent, n.Name)
			if n.Nlink == 0 {
				path = ""
			}
			ev := Event{Op: OpWrite, Path: path, Ino: ino, Size: int64(n.Size), Hash: n.HashHex()}
			if len(attrs) > 0 {
				ev.Detail = "with " + strings.Join(attrs, ",")
			}
			t.SetEvent(ev)
			return nil
		})
		return err
	}
}

// applyAttr applies the chmod, chown and utimens changes of a to n and
// returns their names and the mtime to commit (a.Mtime wins over mtime).
func applyAttr(n *Inode, a SetAttr, mtime int64) ([]string, int64) {
	var attrs []string
	if a.Mode != nil {
		n.Mode = n.Mode&sIFMT | *a.Mode&^uint32(sIFMT)
		attrs = append(attrs, "mode")
	}
	if a.Uid != nil {
		n.Uid = *a.Uid
		attrs = append(attrs, "uid")
	}
	if a.Gid != nil {
		n.Gid = *a.Gid
		attrs = append(attrs, "gid")
	}
	if a.Atime != nil {
		n.Atime = *a.Atime
		attrs = append(attrs, "atime")
	}
	if a.Mtime != nil {
		mtime = *a.Mtime
		attrs = append(attrs, "mtime")
	}
	return attrs, mtime
}
