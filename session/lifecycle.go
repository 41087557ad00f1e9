package session

import (
	"bytes"
	"fmt"
	"regexp"
	"sort"
	"syscall"
	"time"

	"github.com/padfs/padfs/mvcc"
)

const (
	dirMode  = syscall.S_IFDIR | 0o755
	fileMode = syscall.S_IFREG | 0o644
)

func timeNow() int64 { return time.Now().UnixNano() }

// Lookup returns any existing session, live or forgotten, e.g. to read a
// forgotten session's history with AsOf. Writes to a forgotten session fail
// with mvcc.ErrForgotten.
func (s *Store) Lookup(id string) (*Session, error) {
	sid, err := mvcc.ParseSessionID(id)
	if err != nil {
		return nil, err
	}
	h, err := s.st.Header(sid)
	if err != nil {
		return nil, err
	}
	return &Session{s: s, h: h}, nil
}

// Hit is one matching line.
type Hit struct {
	Path string `json:"path"`
	Line int    `json:"line"` // 1-based
	Text string `json:"text"` // the line, without its newline
	// Score ranks hits (higher first); Degraded is set when the hit was
	// found without the index (it lagged, or there is none).
	Score    float64 `json:"score"`
	Degraded bool    `json:"degraded"`
}

// Grep returns up to k lines (k <= 0: all) of the session's current files
// that match pattern, a Go regular expression (RE2 syntax), in path order.
//
// It scans the session's files directly, skipping binary files (a NUL byte
// in the first 8000 bytes, as git and GNU grep decide), so it is exact and
// never stale; every hit is marked Degraded because no index narrowed it.
// TODO(search): narrow the candidates through the search index once it
// exposes a Go API for one session.
func (p *Session) Grep(pattern string, k int) ([]Hit, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("%w: pattern: %v", mvcc.ErrInvalid, err)
	}
	var hits []Hit
	type file struct {
		path string
		n    *mvcc.Inode
	}
	var files []file
	if err := p.s.st.View(func(t *mvcc.ReadTx) error {
		return t.WalkTree(p.h.ID, mvcc.Latest, func(e mvcc.TreeEntry) error {
			if e.Node.IsRegular() {
				files = append(files, file{e.Path, e.Node})
			}
			return nil
		})
	}); err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].path < files[j].path })
	for _, f := range files {
		data, err := p.s.st.ReadAll(f.n)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.path, err)
		}
		if IsBinary(data) {
			continue
		}
		line := 0
		for len(data) > 0 {
			line++
			end := bytes.IndexByte(data, '\n')
			var l []byte
			if end < 0 {
				l, data = data, nil
			} else {
				l, data = data[:end], data[end+1:]
			}
			if re.Match(l) {
				hits = append(hits, Hit{Path: f.path, Line: line, Text: string(l), Score: 1, Degraded: true})
				if k > 0 && len(hits) >= k {
					return hits, nil
				}
			}
		}
	}
	return hits, nil
}

// IsBinary reports whether content counts as binary: a NUL byte in its
// first 8000 bytes (git's rule; GNU diff and grep look for NUL too).
func IsBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}

// Index is what hard forget and redaction need from a search index kept
// beside the store, so that no copy of purged or redacted content survives
// there. The search package implements it; Store.Index may be nil (no
// index).
type Index interface {
	// DeleteSession removes every entry of a session.
	DeleteSession(sid mvcc.SessionID) error
	// ReindexSession rebuilds a session's entries from the store (after a
	// redaction rewrote content in place, with unchanged HLCs).
	ReindexSession(sid mvcc.SessionID) error
	// Compact rewrites the index's files so that no deleted entry's bytes
	// remain on disk.
	Compact() error
}

// PlanPurge returns the receipt of an irreversible purge of session id:
// files, versions, bytes and chunks that would go, and the confirmation
// token Purge needs. It changes nothing.
func (s *Store) PlanPurge(id string) (*mvcc.PurgeReceipt, error) {
	sid, err := mvcc.ParseSessionID(id)
	if err != nil {
		return nil, err
	}
	return s.st.PlanPurge(sid)
}

// Purge irreversibly removes session id, its chunks no other session uses,
// and its index entries, then compacts the store and the index so that no
// byte of it remains in the data directory. token must be the one PlanPurge
// returned for the session's current state (else mvcc.ErrToken and nothing
// is purged).
func (s *Store) Purge(id, token string, progress mvcc.Progress) (*mvcc.PurgeReceipt, error) {
	sid, err := mvcc.ParseSessionID(id)
	if err != nil {
		return nil, err
	}
	r, err := s.st.Purge(sid, token, progress)
	if err != nil {
		return r, err
	}
	if s.Index != nil {
		if err := s.Index.DeleteSession(sid); err != nil {
			return r, fmt.Errorf("session %s purged from the store, but not from the search index: %w", sid, err)
		}
		if err := s.Index.Compact(); err != nil {
			return r, fmt.Errorf("session %s purged, but compacting the search index failed: %w", sid, err)
		}
	}
	return r, nil
}

// PlanRedact returns the receipt of redacting needle (replaced by repl) in
// every version of the session. It changes nothing.
func (p *Session) PlanRedact(needle, repl string) (*mvcc.RedactReceipt, error) {
	return p.s.st.PlanRedact(p.h.ID, needle, repl)
}

// Redact rewrites every version of the session containing needle, replacing
// it with repl, keeping the history's structure; then it re-indexes the
// session and compacts store and index. token must be the one PlanRedact
// returned for the same needle, replacement and state.
func (p *Session) Redact(needle, repl, token string, progress mvcc.Progress) (*mvcc.RedactReceipt, error) {
	r, err := p.s.st.Redact(p.h.ID, needle, &repl, token, progress)
	if err != nil {
		return r, err
	}
	if idx := p.s.Index; idx != nil {
		if err := idx.ReindexSession(p.h.ID); err != nil {
			return r, fmt.Errorf("session %s redacted in the store, but re-indexing it failed: %w", p.h.ID, err)
		}
		if err := idx.Compact(); err != nil {
			return r, fmt.Errorf("session %s redacted, but compacting the search index failed: %w", p.h.ID, err)
		}
	}
	return r, nil
}
