package mvcc

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
		t.SetEvent(Event{Op: "create", Ino: ino, Detail: "tmpfile"})
		return nil
	})
	return n, err
}
