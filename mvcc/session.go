package mvcc

import (
	"crypto/rand"
	"fmt"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/padfs/padfs/mvcc/kv"
)

var (
	entropyMu sync.Mutex
	entropy   = ulid.Monotonic(rand.Reader, 0)
)

// NewSessionID returns a fresh ULID.
func NewSessionID() (SessionID, error) {
	entropyMu.Lock()
	defer entropyMu.Unlock()
	id, err := ulid.New(ulid.Timestamp(time.Now()), entropy)
	if err != nil {
		return SessionID{}, fmt.Errorf("new session id: %w", err)
	}
	return id, nil
}

// ParseSessionID parses a ULID, naming the text in the error.
func ParseSessionID(s string) (SessionID, error) {
	id, err := ulid.ParseStrict(s)
	if err != nil {
		return SessionID{}, fmt.Errorf("%w: %q is not a session id (ULID): %v", ErrNoSession, s, err)
	}
	return id, nil
}

// CreateSession creates an empty live session with a root directory owned
// by uid:gid.
func (s *Store) CreateSession(name string, uid, gid uint32) (*SessionHeader, error) {
	if err := ValidSessionName(name); name != "" && err != nil {
		return nil, err
	}
	id, err := NewSessionID()
	if err != nil {
		return nil, err
	}
	h := &SessionHeader{ID: id, Name: name}
	_, err = s.commit(h.ID, commitNew, func(t *WriteTx) error {
		if err := t.checkNameFree(name, id); err != nil {
			return err
		}
		root, err := t.AllocIno()
		if err != nil {
			return err
		}
		h.Created, h.Root = t.hlc, root
		if err := t.put(headerKey(h.ID), h); err != nil {
			return err
		}
		if err := t.put(stateKey(h.ID, t.hlc), &sessionState{}); err != nil {
			return err
		}
		now := int64(t.hlc)
		if err := t.PutInode(&Inode{Ino: root, Mode: sIFDIR | 0o755, Uid: uid, Gid: gid, Nlink: 2,
			Atime: now, Mtime: now, Ctime: now}); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpSessionCreate, Path: ".", Detail: name})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// SessionInfo is a session as listed by `padfs session ls`.
type SessionInfo struct {
	SessionHeader
	Forgotten   bool
	ForgottenAt HLC
	LastHLC     HLC
	Events      uint64
}

// Sessions lists every session (forgotten ones flagged), oldest first.
func (s *Store) Sessions() ([]SessionInfo, error) {
	var out []SessionInfo
	err := s.View(func(t *ReadTx) error {
		prefix := []byte{pHeader}
		return t.r.Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
			var si SessionInfo
			if err := decode(k, v, &si.SessionHeader); err != nil {
				return false, err
			}
			if si.Busy != "" {
				return true, nil // being purged or redacted: invisible (Jobs lists it)
			}
			var err error
			if si.Forgotten, si.ForgottenAt, err = t.Forgotten(si.ID, Latest); err != nil {
				return false, err
			}
			ck := countersKey(si.ID)
			if cv, err := t.r.Get(ck); err != nil {
				return false, err
			} else if cv != nil {
				var c counters
				if err := decode(ck, cv, &c); err != nil {
					return false, err
				}
				si.LastHLC, si.Events = c.LastHLC, c.NextSeq
			}
			out = append(out, si)
			return true, nil
		})
	})
	return out, err
}

// Header returns a session's header.
func (s *Store) Header(sid SessionID) (*SessionHeader, error) {
	var h *SessionHeader
	err := s.View(func(t *ReadTx) error {
		var err error
		h, err = t.Header(sid)
		return err
	})
	return h, err
}

// LiveHeader returns the header of a session that exists and is not
// forgotten (what mounting it read-write requires).
func (s *Store) LiveHeader(sid SessionID) (*SessionHeader, error) {
	var h *SessionHeader
	err := s.View(func(t *ReadTx) error {
		var err error
		if h, err = t.Header(sid); err != nil {
			return err
		}
		gone, at, err := t.Forgotten(sid, Latest)
		if err == nil && gone {
			err = fmt.Errorf("%w: %s was forgotten at %s (it can still be read as of an earlier time)", ErrForgotten, sid, at)
		}
		return err
	})
	return h, err
}

// ResolveSession finds a session by id (any session, forgotten or not) or
// else by name (the live session with that name: names are unique among
// live sessions; a store written before they were may hold several, and
// then the newest wins).
func (s *Store) ResolveSession(idOrName string) (*SessionHeader, error) {
	if id, err := ParseSessionID(idOrName); err == nil {
		return s.Header(id)
	}
	all, err := s.Sessions()
	if err != nil {
		return nil, err
	}
	for i := len(all) - 1; i >= 0; i-- { // oldest first: newest wins
		if si := all[i]; !si.Forgotten && si.Name == idOrName {
			h := si.SessionHeader
			return &h, nil
		}
	}
	return nil, fmt.Errorf("%w: no live session has the id or name %q (padfs session ls lists them)", ErrNoSession, idOrName)
}

// checkNameFree refuses name when a live session other than self has it:
// a name picks one session (padfs mount --session NAME, the root of a
// mount of all sessions), so two live sessions cannot share one. A
// forgotten session's name is free again.
func (t *ReadTx) checkNameFree(name string, self SessionID) error {
	if name == "" {
		return nil
	}
	prefix := []byte{pHeader}
	var taken *SessionID
	err := t.r.Scan(prefix, kv.PrefixEnd(prefix), func(k, v []byte) (bool, error) {
		var h SessionHeader
		if err := decode(k, v, &h); err != nil {
			return false, err
		}
		if h.Name != name || h.ID == self || h.Busy == JobPurge {
			return true, nil
		}
		gone, _, err := t.Forgotten(h.ID, Latest)
		if err != nil {
			return false, err
		}
		if !gone {
			taken = &h.ID
		}
		return taken == nil, nil
	})
	if err != nil {
		return err
	}
	if taken != nil {
		return fmt.Errorf("%w: session %s is already named %q (rename or forget it first: padfs session rename / forget)",
			ErrExist, taken, name)
	}
	return nil
}

// RenameSession gives a live session a new name (unique among live
// sessions), as one commit: event session.rename. The header records the
// current name; the log keeps the old ones.
func (s *Store) RenameSession(sid SessionID, name string) error {
	if err := ValidSessionName(name); err != nil {
		return err
	}
	_, err := s.Update(sid, func(t *WriteTx) error {
		h, err := t.Header(sid)
		if err != nil {
			return err
		}
		if err := t.checkNameFree(name, sid); err != nil {
			return err
		}
		old := h.Name
		h.Name = name
		if err := t.put(headerKey(sid), h); err != nil {
			return err
		}
		t.SetEvent(Event{Op: OpSessionRename, Path: ".", Detail: old + " -> " + name})
		return nil
	})
	return err
}
