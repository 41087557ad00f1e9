package session

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/padfs/padfs/grep"
	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/search"
	"golang.org/x/sys/unix"
)

const (
	dirMode  = unix.S_IFDIR | 0o755
	fileMode = unix.S_IFREG | 0o644
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

// Hit is one matching line (Grep) or one ranked file (Search).
type Hit struct {
	Path string `json:"path"`
	Line int    `json:"line"` // 1-based
	// Text is the matching line without its newline (Grep), or a snippet
	// around the best match (Search).
	Text string `json:"text"`
	// Score ranks hits, higher first (BM25 for Search; 1 for Grep).
	Score float64 `json:"score"`
	// Degraded is set when the index lagged behind the store, so the hit
	// was found by reading the file (Grep: still exact; Search: a rougher
	// score), or when there is no index.
	Degraded bool `json:"degraded"`
}

// Grep returns up to k lines (k <= 0: all) of the session's current files
// that match pattern, a GNU extended regular expression (grep -E, with
// GNU grep's semantics as padfs grep implements them), in path order then
// line order. It is exact and never stale: the search index narrows the
// files to read (files it has not caught up with are read anyway), then the
// pattern runs over each candidate's current content. Binary files are
// skipped. Without an index (Wrap with nil) every file is read. ctx ends
// it early (between files) with ctx.Err().
func (p *Session) Grep(ctx context.Context, pattern string, k int) ([]Hit, error) {
	m, err := grep.Compile([]string{pattern}, grep.MatchOptions{Syntax: grep.Extended}, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: pattern %q: %v", mvcc.ErrInvalid, pattern, err)
	}
	var files []string
	degraded := true
	if ix := p.s.ix; ix != nil {
		var out, errb bytes.Buffer
		stats, err := ix.Grep(ctx, search.GrepRequest{
			Session: p.h.ID, Out: &out, Err: &errb,
			Options: grep.Options{Patterns: []string{pattern}, Match: grep.MatchOptions{Syntax: grep.Extended},
				Mode: grep.OutFilesWith, Filename: 1, Silent: true},
		})
		if err != nil {
			return nil, fmt.Errorf("grep %q: %w", pattern, err)
		}
		degraded = stats.Degraded
		for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if l != "" {
				files = append(files, l)
			}
		}
	} else if files, err = p.Ls(""); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // the index's answer may be cut short
	}
	var hits []Hit
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var data []byte
		err := p.s.st.View(func(t *mvcc.ReadTx) error {
			n, err := t.Walk(p.h.ID, f, mvcc.Latest)
			if err != nil || !n.IsRegular() {
				return err
			}
			data, err = t.Content(n)
			return err
		})
		if errors.Is(err, mvcc.ErrNotFound) {
			continue // removed since
		} else if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if IsBinary(data) {
			continue
		}
		res, err := m.Grep(data, grep.ModeLines)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if res.Binary {
			continue
		}
		for _, l := range res.Lines {
			hits = append(hits, Hit{Path: f, Line: l.Num, Text: string(l.Text), Score: 1, Degraded: degraded})
			if k > 0 && len(hits) >= k {
				return hits, nil
			}
		}
	}
	return hits, nil
}

// Search returns up to k files (k <= 0: 10) ranked by BM25 relevance to the
// words of query, each with its best line and a snippet: the seed's
// "hybrid recall" grep. It needs the search index (Open provides it).
// ctx ends it early with ctx.Err().
func (p *Session) Search(ctx context.Context, query string, k int) ([]Hit, error) {
	if p.s.ix == nil {
		return nil, errors.New("search: this store was opened without an index")
	}
	res, err := p.s.ix.Search(ctx, p.h.ID, query, k)
	if err != nil {
		return nil, err
	}
	hits := make([]Hit, len(res))
	for i, r := range res {
		hits[i] = Hit{Path: r.Path, Line: r.Line, Text: r.Snippet, Score: r.Score, Degraded: r.Degraded}
	}
	return hits, nil
}

// IsBinary reports whether content counts as binary: a NUL byte in its
// first 8000 bytes (git's rule; GNU diff and grep look for NUL too).
func IsBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
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
// is purged). Cancelling ctx stops it between two batches; FinishJob (or
// Purge with the same token) finishes it.
func (s *Store) Purge(ctx context.Context, id, token string, progress mvcc.Progress) (*mvcc.PurgeReceipt, error) {
	sid, err := mvcc.ParseSessionID(id)
	if err != nil {
		return nil, err
	}
	r, err := s.st.Purge(ctx, sid, token, progress)
	if err != nil {
		return r, err
	}
	return r, s.dropIndex(sid)
}

// dropIndex removes a purged session's search index.
func (s *Store) dropIndex(sid mvcc.SessionID) error {
	if s.ix != nil {
		// The session's index is one directory: removing it removes
		// every byte of it.
		if err := s.ix.DropSession(sid); err != nil {
			return fmt.Errorf("session %s purged from the store, but not from the search index: %w", sid, err)
		}
	}
	return nil
}

// FinishJob finishes a purge or redaction of session sid that was cut short
// (mvcc.Store.Jobs lists them), in the store and then in the index, and
// returns its receipt (*mvcc.PurgeReceipt or *mvcc.RedactReceipt).
func (s *Store) FinishJob(ctx context.Context, sid mvcc.SessionID, progress mvcc.Progress) (any, error) {
	r, err := s.st.FinishJob(ctx, sid, progress)
	if err != nil {
		return r, err
	}
	switch r.(type) {
	case *mvcc.PurgeReceipt:
		err = s.dropIndex(sid)
	case *mvcc.RedactReceipt:
		if s.ix != nil {
			if err = s.ix.Rebuild(ctx, sid, nil); err != nil {
				err = fmt.Errorf("session %s redacted in the store, but re-indexing it failed: %w", sid, err)
			}
		}
	}
	return r, err
}

// PlanRedact returns the receipt of redacting needle (replaced by repl) in
// every version of the session. It changes nothing.
func (p *Session) PlanRedact(needle, repl string) (*mvcc.RedactReceipt, error) {
	return p.s.st.PlanRedact(p.h.ID, needle, repl)
}

// Redact rewrites every version of the session containing needle, replacing
// it with repl, keeping the history's structure; then it re-indexes the
// session and compacts store and index. token must be the one PlanRedact
// returned for the same needle, replacement and state. Cancelling ctx
// stops it between two batches; Store.FinishJob finishes it.
func (p *Session) Redact(ctx context.Context, needle, repl, token string, progress mvcc.Progress) (*mvcc.RedactReceipt, error) {
	r, err := p.s.st.Redact(ctx, p.h.ID, needle, &repl, token, progress)
	if err != nil {
		return r, err
	}
	if ix := p.s.ix; ix != nil && r.Versions > 0 {
		// Rebuild drops the session's index directory (old segments and
		// all) and builds it again from the redacted content.
		if err := ix.Rebuild(context.Background(), p.h.ID, nil); err != nil {
			return r, fmt.Errorf("session %s redacted in the store, but re-indexing it failed: %w", p.h.ID, err)
		}
	}
	return r, nil
}
