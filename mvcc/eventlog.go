package mvcc

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/padfs/padfs/internal/jsonbytes"
)

// The commit log as padfs log and the mount's .log file show it.

// LogFilter selects events of one session. The zero value selects all.
type LogFilter struct {
	// AfterSeq keeps events with Seq > AfterSeq (exclusive).
	AfterSeq uint64
	// AfterHLC keeps events with HLC > AfterHLC (exclusive); 0: no bound.
	AfterHLC HLC
	// Path keeps events whose path or second path is Path or lies below
	// it ("" or ".": every event, session-level ones included).
	Path string
}

// Log returns the events of sid selected by f, oldest first.
func (s *Store) Log(sid SessionID, f LogFilter) ([]Event, error) {
	var out []Event
	err := s.EachEvent(sid, f, func(ev Event) bool { out = append(out, ev); return true })
	return out, err
}

// EachEvent calls fn for each event of sid selected by f, oldest first,
// until fn returns false.
func (s *Store) EachEvent(sid SessionID, f LogFilter, fn func(Event) bool) error {
	path := cleanLogPath(f.Path)
	return s.View(func(t *ReadTx) error {
		if _, err := t.Header(sid); err != nil {
			return err
		}
		after := f.AfterSeq
		if f.AfterHLC != 0 {
			seq, err := t.seqAfterHLC(sid, f.AfterHLC)
			if err != nil {
				return err
			}
			after = max(after, seq)
		}
		return t.Events(sid, after, func(ev Event) bool {
			if path != "" && !underPath(ev.Path, path) && !underPath(ev.Path2, path) {
				return true
			}
			return fn(ev)
		})
	})
}

// seqAfterHLC returns the largest Seq whose event has HLC <= at (0: none).
// A session's events have increasing HLCs, so this is a binary search of
// point reads, not a scan of the log.
func (t *ReadTx) seqAfterHLC(sid SessionID, at HLC) (uint64, error) {
	last, _, err := t.LastEvent(sid)
	if err != nil {
		return 0, err
	}
	lo, hi := uint64(0), last // invariant: event lo has HLC <= at (or lo == 0); events > hi have HLC > at
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		h, err := t.eventHLC(sid, mid)
		if err != nil {
			return 0, err
		}
		if h <= at {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, nil
}

func (t *ReadTx) eventHLC(sid SessionID, seq uint64) (HLC, error) {
	k := eventKey(sid, seq)
	v, err := t.r.Get(k)
	if err != nil {
		return 0, err
	}
	if v == nil {
		// A gap would break the binary search; the log has none.
		return 0, errCorruptf("event %d of session %s is missing", seq, sid)
	}
	var ev Event
	if err := decode(k, v, &ev); err != nil {
		return 0, err
	}
	return ev.HLC, nil
}

func cleanLogPath(p string) string {
	p = strings.Trim(p, "/")
	for strings.HasPrefix(p, "./") {
		p = strings.TrimLeft(p[2:], "/")
	}
	if p == "." {
		return ""
	}
	return p
}

// underPath reports whether p is path or lies below it.
func underPath(p, path string) bool {
	return p == path || strings.HasPrefix(p, path) && len(p) > len(path) && p[len(path)] == '/'
}

// eventJSON is an event's JSON form: the HLC in canonical text, the size
// whenever the event carries content (an empty file has size 0).
type eventJSON struct {
	Seq  uint64 `json:"seq"`
	HLC  string `json:"hlc"`
	Op   string `json:"op"`
	Path string `json:"path,omitempty"`
	To   string `json:"to,omitempty"`
	Ino  Ino    `json:"ino,omitempty"`
	// Paths are bytes: see internal/jsonbytes.
	PathB64   string `json:"path_b64,omitempty"`
	ToB64     string `json:"to_b64,omitempty"`
	Size      *int64 `json:"size,omitempty"`
	Hash      string `json:"sha256,omitempty"`
	Detail    string `json:"detail,omitempty"`
	DetailB64 string `json:"detail_b64,omitempty"`
}

// JSON returns the event as one line of JSON (no trailing newline), e.g.
//
//	{"seq":3,"hlc":"2026-11-29T14:03:00.123456789Z","op":"write","path":"a.txt","ino":5,"size":6,"sha256":"..."}
func (ev Event) JSON() []byte {
	j := eventJSON{Seq: ev.Seq, HLC: ev.HLC.String(), Op: string(ev.Op), Path: ev.Path, To: ev.Path2,
		Ino: ev.Ino, Hash: ev.Hash, Detail: ev.Detail,
		PathB64: jsonbytes.B64(ev.Path), ToB64: jsonbytes.B64(ev.Path2), DetailB64: jsonbytes.B64(ev.Detail)}
	if ev.Size != 0 || ev.Hash != "" {
		size := ev.Size
		j.Size = &size
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(j) // plain fields: cannot fail
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// LogJSONL returns a session's whole log as JSON lines, oldest first: the
// content of the mount's hidden .log file.
func (s *Store) LogJSONL(sid SessionID) ([]byte, error) {
	var b bytes.Buffer
	err := s.EachEvent(sid, LogFilter{}, func(ev Event) bool {
		b.Write(ev.JSON())
		b.WriteByte('\n')
		return true
	})
	return b.Bytes(), err
}
