package mvcc

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/padfs/padfs/mvcc/kv"
)

// Extended attributes have version chains of their own, one per inode and
// name, so that a setxattr writes one small record (and the inode's new
// ctime), never the inode's whole attribute set again:
//
//	X S 42 "user.tag" 0x00 ^t3  -> {value "red"}    <- newest
//	X S 42 "user.tag" 0x00 ^t2  -> {removed}         (removexattr at t2)
//	X S 42 "user.tag" 0x00 ^t1  -> {value "blue"}
//
// Format 1 stores kept the set inline in every inode version
// (Inode.Xattrs). Such sets still read: the set as of T is the inode
// version's inline set overlaid by the chains as of T. The first change of
// an inode's set moves its inline set into chains (the new inode version
// has none), and the store's first keyed xattr raises the format to 2, so
// that an older padfs refuses the store instead of missing the attributes.

// Format versions. A new store starts at formatInline; FormatVersion (the
// newest this build reads) is written when the first keyed xattr is.
const (
	formatInline      = 1
	formatXattrChains = 2
)

// xattrVersion is one version in an xattr chain.
type xattrVersion struct {
	Value   []byte `cbor:"1,keyasint,omitempty"`
	Removed bool   `cbor:"2,keyasint,omitempty"`
}

// Xattr flags, as setxattr(2).
const (
	XattrCreate  = 1
	XattrReplace = 2
)

// xattrChain is the prefix of every version of attribute name of ino.
func xattrChain(sid SessionID, ino Ino, name string) []byte {
	return key(pXattr, sid[:], u64(uint64(ino)), []byte(name), []byte{0})
}

// xattrPrefix is the prefix of every xattr chain of ino.
func xattrPrefix(sid SessionID, ino Ino) []byte {
	return key(pXattr, sid[:], u64(uint64(ino)))
}

// splitXattrKey returns the inode and attribute name of a version key.
func splitXattrKey(k []byte) (Ino, string, error) {
	const head = 1 + 16 + 8
	if len(k) < head+9 || k[len(k)-9] != 0 {
		return 0, "", fmt.Errorf("%w: xattr key %q", ErrCorrupt, k)
	}
	return Ino(binary.BigEndian.Uint64(k[17:head])), string(k[head : len(k)-9]), nil
}

// xattrIn returns attribute name of inode version n (read as of at).
func (t *ReadTx) xattrIn(sid SessionID, n *Inode, name string, at HLC) ([]byte, bool, error) {
	x, err := t.chainXattr(sid, n.Ino, name, at)
	if err != nil {
		return nil, false, err
	}
	if x != nil {
		return x.get()
	}
	val, ok := n.Xattrs[name]
	if ok && val == nil {
		val = []byte{} // nil means removed to putXattr
	}
	return val, ok, nil
}

// chainXattr returns the version of attribute name of ino in force at at,
// or nil if its chain has none.
func (t *ReadTx) chainXattr(sid SessionID, ino Ino, name string, at HLC) (*xattrVersion, error) {
	at, err := t.clampAt(sid, at)
	if err != nil {
		return nil, err
	}
	k, v, err := t.seekChain(xattrChain(sid, ino, name), at)
	if err != nil || k == nil {
		return nil, err
	}
	x := new(xattrVersion)
	if err := decode(k, v, x); err != nil {
		return nil, err
	}
	return x, nil
}

// get returns the value and whether the attribute exists (x may be nil).
func (x *xattrVersion) get() ([]byte, bool, error) {
	if x == nil || x.Removed {
		return nil, false, nil
	}
	if x.Value == nil {
		return []byte{}, true, nil
	}
	return x.Value, true, nil
}

// Xattr returns attribute name of ino as of at; ok is false when ino has no
// such attribute (ErrNotFound when ino itself does not exist).
func (t *ReadTx) Xattr(sid SessionID, ino Ino, name string, at HLC) (val []byte, ok bool, err error) {
	n, err := t.Inode(sid, ino, at)
	if err != nil {
		return nil, false, err
	}
	return t.xattrIn(sid, n, name, at)
}

// xattrsOf returns the attribute set of inode version n as of at.
func (t *ReadTx) xattrsOf(sid SessionID, n *Inode, at HLC) (map[string][]byte, error) {
	out := make(map[string][]byte, len(n.Xattrs))
	for k, v := range n.Xattrs {
		if v == nil {
			v = []byte{}
		}
		out[k] = v
	}
	prefix := xattrPrefix(sid, n.Ino)
	end := kv.PrefixEnd(prefix)
	pos := prefix
	for {
		// One seek per name: the first key at or after pos is the newest
		// version of the next name.
		var k []byte
		if err := t.r.Scan(pos, end, func(kk, _ []byte) (bool, error) {
			k = append([]byte(nil), kk...)
			return false, nil
		}); err != nil || k == nil {
			return out, err
		}
		_, name, err := splitXattrKey(k)
		if err != nil {
			return nil, err
		}
		x, err := t.chainXattr(sid, n.Ino, name, at)
		if err != nil {
			return nil, err
		}
		if x != nil { // else: no version yet at at; an inline value stands
			if val, ok, _ := x.get(); ok {
				out[name] = val
			} else {
				delete(out, name)
			}
		}
		pos = append(append(append([]byte(nil), prefix...), name...), 1) // past this chain
	}
}

// Xattrs returns the attribute set of ino as of at.
func (t *ReadTx) Xattrs(sid SessionID, ino Ino, at HLC) (map[string][]byte, error) {
	n, err := t.Inode(sid, ino, at)
	if err != nil {
		return nil, err
	}
	return t.xattrsOf(sid, n, at)
}

// Xattr reads attribute name of ino as of at.
func (s *Store) Xattr(sid SessionID, ino Ino, name string, at HLC) (val []byte, ok bool, err error) {
	err = s.View(func(t *ReadTx) error {
		val, ok, err = t.Xattr(sid, ino, name, at)
		return err
	})
	return val, ok, err
}

// Xattrs reads the attribute set of ino as of at.
func (s *Store) Xattrs(sid SessionID, ino Ino, at HLC) (map[string][]byte, error) {
	var m map[string][]byte
	err := s.View(func(t *ReadTx) error {
		var err error
		m, err = t.Xattrs(sid, ino, at)
		return err
	})
	return m, err
}

// XattrNames lists the attribute names of ino as of at, sorted.
func (s *Store) XattrNames(sid SessionID, ino Ino, at HLC) ([]string, error) {
	m, err := s.Xattrs(sid, ino, at)
	if err != nil {
		return nil, err
	}
	return sortedNames(m), nil
}

func sortedNames(m map[string][]byte) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

// putXattr writes a version of attribute name of ino (value nil: removed)
// stamped with this commit's HLC, raising the store's format first if this
// is its first keyed xattr.
func (t *WriteTx) putXattr(ino Ino, name string, value []byte) error {
	if err := t.needFormat(formatXattrChains); err != nil {
		return err
	}
	x := xattrVersion{Value: value, Removed: value == nil}
	chain := xattrChain(t.sid, ino, name)
	k := append(chain, inv(t.hlc)...)
	if _, err := t.versionPut(chain, k, x.Removed); err != nil {
		return err
	}
	return t.put(k, &x)
}

// needFormat raises the store's format record to v (never lowers it).
func (t *WriteTx) needFormat(v uint64) error {
	k := metaKey("format")
	cur, err := t.w.Get(k)
	if err != nil {
		return err
	}
	if len(cur) == 8 && binary.BigEndian.Uint64(cur) >= v {
		return nil
	}
	return t.w.Put(k, u64(v))
}

// moveInlineXattrs writes n's inline (format 1) attributes, except skip,
// as chain versions and drops them from n, which the caller writes.
func (t *WriteTx) moveInlineXattrs(n *Inode, skip string) error {
	for _, k := range sortedNames(n.Xattrs) {
		if k == skip {
			continue
		}
		if err := t.putXattr(n.Ino, k, bytes.Clone(n.Xattrs[k])); err != nil {
			return err
		}
	}
	n.Xattrs = nil
	return nil
}

// SetXattr sets (value != nil) or removes (value == nil) an extended
// attribute: one version in the attribute's chain and a new inode version
// for the ctime.
func (s *Store) SetXattr(sid SessionID, ino Ino, name string, value []byte, flags uint32) error {
	_, err := s.Update(sid, func(t *WriteTx) error {
		n, err := t.Latest(ino)
		if err != nil {
			return err
		}
		_, has, err := t.xattrIn(sid, n, name, Latest)
		if err != nil {
			return err
		}
		switch {
		case value == nil && !has:
			return fmt.Errorf("%w: %q", ErrNoAttr, name)
		case flags&XattrCreate != 0 && has:
			return fmt.Errorf("%w: xattr %q", ErrExist, name)
		case flags&XattrReplace != 0 && !has:
			return fmt.Errorf("%w: %q", ErrNoAttr, name)
		}
		if err := t.moveInlineXattrs(n, name); err != nil {
			return err
		}
		op := OpSetxattr
		if value == nil {
			op = OpRemovexattr
		} else {
			value = append([]byte{}, value...) // never nil: nil removes
		}
		if err := t.putXattr(ino, name, value); err != nil {
			return err
		}
		n.Ctime = nowNs()
		if err := t.PutInode(n); err != nil {
			return err
		}
		t.SetEvent(Event{Op: op, Path: t.pathOf(n.Parent, n.Name), Ino: ino, Detail: name})
		return nil
	})
	return err
}
