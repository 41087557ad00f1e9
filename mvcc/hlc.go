package mvcc

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
)

// HLC is a hybrid logical clock timestamp: nanoseconds since the Unix epoch
// with the logical counter folded into the low digits. A commit takes
// max(wall clock, last HLC + 1), so HLCs are strictly increasing even when
// many commits fall in one nanosecond or the wall clock steps backwards, and
// they stay within a few nanoseconds of real time while the clock behaves.
// The high-water mark is persisted with every commit, so the order holds
// across restarts too.
type HLC uint64

// Latest reads the newest version of everything.
const Latest HLC = ^HLC(0)

// hlcLayout is the canonical text form: RFC 3339 in UTC with exactly nine
// fractional digits, so that plain string order is time order and the text
// round-trips to the same HLC.
const hlcLayout = "2006-01-02T15:04:05.000000000Z"

// String returns the canonical text form, e.g. 2026-11-29T14:03:00.123456789Z.
func (h HLC) String() string {
	if h == Latest {
		return "latest"
	}
	return time.Unix(0, int64(h)).UTC().Format(hlcLayout)
}

// Time returns the wall time the HLC stands for.
func (h HLC) Time() time.Time { return time.Unix(0, int64(h)).UTC() }

// ErrHLCRange: a time an HLC cannot stand for (before the epoch, or past
// the int64 nanoseconds it counts in). Errors wrapping it also wrap
// ErrInvalid.
var ErrHLCRange = errors.New("time out of range")

// MaxHLC is the latest instant an HLC can stand for,
// 2262-04-11T23:47:16.854775807Z.
const MaxHLC HLC = math.MaxInt64

// ParseHLC parses the canonical form or any RFC 3339 time (with or without
// fraction, any offset); the result names the latest state at or before that
// instant. Errors say what is wrong with the text.
func ParseHLC(s string) (HLC, error) {
	if strings.TrimSpace(s) != s || s == "" {
		return 0, fmt.Errorf("%w: %q is not an HLC (want RFC 3339, e.g. 2026-11-29T14:03:00Z)", ErrInvalid, s)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not an HLC (want RFC 3339, e.g. 2026-11-29T14:03:00Z)", ErrInvalid, s)
	}
	// UnixNano is undefined outside int64 nanoseconds: compare times.
	if t.Before(time.Unix(0, 0)) || t.After(MaxHLC.Time()) {
		return 0, fmt.Errorf("%w: %w: %q is not in %s..%s", ErrInvalid, ErrHLCRange, s, HLC(0), MaxHLC)
	}
	return HLC(t.UnixNano()), nil
}

// Clock issues strictly increasing HLCs.
type Clock struct {
	mu   sync.Mutex
	last HLC
	wall func() time.Time // replaced in tests to step the clock backwards
}

// NewClock returns a clock that never issues an HLC at or below last.
func NewClock(last HLC) *Clock { return &Clock{last: last, wall: time.Now} }

// Tick returns a new HLC greater than every HLC it returned before.
func (c *Clock) Tick() HLC {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := HLC(c.wall().UnixNano())
	if now <= c.last {
		now = c.last + 1
	}
	c.last = now
	return now
}

// Last returns the newest HLC issued so far.
func (c *Clock) Last() HLC {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}
