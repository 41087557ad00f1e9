package mvcc

import (
	"errors"
	"sort"
	"testing"
	"time"
)

func TestHLCTextRoundTripsAndSorts(t *testing.T) {
	base := HLC(time.Date(2026, 11, 29, 14, 3, 0, 0, time.UTC).UnixNano())
	hs := []HLC{base, base + 1, base + 999, base + 1_000_000_000, 1, HLC(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())}
	var texts []string
	for _, h := range hs {
		s := h.String()
		got, err := ParseHLC(s)
		if err != nil || got != h {
			t.Fatalf("ParseHLC(%q) = %d, %v; want %d", s, got, err, h)
		}
		texts = append(texts, s)
	}
	sorted := append([]string(nil), texts...)
	sort.Strings(sorted)
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	for i, h := range hs {
		if sorted[i] != h.String() {
			t.Fatalf("string order differs from HLC order at %d: %q vs %q", i, sorted[i], h.String())
		}
	}
	if got := base.String(); got != "2026-11-29T14:03:00.000000000Z" {
		t.Fatalf("canonical form = %q", got)
	}
}

func TestParseHLCAcceptsRFC3339(t *testing.T) {
	want := HLC(time.Date(2026, 11, 29, 14, 3, 0, 0, time.UTC).UnixNano())
	for _, s := range []string{"2026-11-29T14:03:00Z", "2026-11-29T15:03:00+01:00", "2026-11-29T14:03:00.000Z"} {
		if got, err := ParseHLC(s); err != nil || got != want {
			t.Errorf("ParseHLC(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "yesterday", "2026-11-29", "2026-11-29T14:03:00", " 2026-11-29T14:03:00Z", "1969-12-31T23:59:59Z"} {
		if _, err := ParseHLC(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseHLC(%q) err = %v; want ErrInvalid", s, err)
		}
	}
}

func TestClockIsStrictlyMonotonic(t *testing.T) {
	now := time.Date(2026, 11, 29, 14, 0, 0, 0, time.UTC)
	c := NewClock(0)
	c.wall = func() time.Time { return now }
	a := c.Tick()
	b := c.Tick() // same wall time: logical step
	now = now.Add(-time.Hour)
	d := c.Tick() // wall clock stepped back
	if !(a < b && b < d) {
		t.Fatalf("ticks not increasing: %d %d %d", a, b, d)
	}
	// A restarted clock resumes above the persisted high-water mark.
	c2 := NewClock(d)
	c2.wall = func() time.Time { return now }
	if e := c2.Tick(); e <= d {
		t.Fatalf("restarted clock issued %d <= %d", e, d)
	}
}
