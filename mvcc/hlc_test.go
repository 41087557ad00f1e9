package mvcc

import (
	"errors"
	"sort"
	"strings"
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

// The HLC range is int64 nanoseconds since the epoch: a time past it used
// to wrap (UnixNano is undefined there) and was taken as some other time.
func TestParseHLCRange(t *testing.T) {
	for s, want := range map[string]HLC{
		"1970-01-01T00:00:00Z":           0,
		"2262-04-11T23:47:16.854775807Z": MaxHLC,
		"2262-04-12T00:47:16+01:00":      MaxHLC - 854775807,
	} {
		if got, err := ParseHLC(s); err != nil || got != want {
			t.Errorf("ParseHLC(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"2262-04-11T23:47:16.854775808Z", "2262-04-12T00:00:00Z", "9999-12-31T23:59:59Z",
		"1969-12-31T23:59:59.999999999Z", "0001-01-01T00:00:00Z", "1970-01-01T00:00:00+00:01"} {
		_, err := ParseHLC(s)
		if !errors.Is(err, ErrHLCRange) || !errors.Is(err, ErrInvalid) ||
			!strings.Contains(err.Error(), s) || !strings.Contains(err.Error(), "2262-04-11T23:47:16.854775807Z") {
			t.Errorf("ParseHLC(%q) err = %v; want a range error naming the value and the range", s, err)
		}
	}
}

// FuzzParseHLC: any text either fails with ErrInvalid or gives an HLC in
// range whose canonical text parses back to it; never a panic.
func FuzzParseHLC(f *testing.F) {
	for _, s := range []string{"2026-11-29T14:03:00.123456789Z", "2262-04-11T23:47:16.854775807Z", "2262-04-12T00:00:00Z",
		"1970-01-01T00:00:00Z", "1969-12-31T23:59:59Z", "2026-11-29T15:03:00+01:00", "yesterday", "", "9999-12-31T23:59:59-23:59"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := ParseHLC(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseHLC(%q) err %v is not ErrInvalid", s, err)
			}
			return
		}
		if h > MaxHLC {
			t.Fatalf("ParseHLC(%q) = %d, past MaxHLC", s, h)
		}
		if back, err := ParseHLC(h.String()); err != nil || back != h {
			t.Fatalf("ParseHLC(%q) = %d; its text %q parses to %d, %v", s, h, h.String(), back, err)
		}
	})
}

// FuzzHLCText: every HLC in range has a canonical text that round-trips.
func FuzzHLCText(f *testing.F) {
	for _, u := range []uint64{0, 1, uint64(MaxHLC), uint64(MaxHLC) - 1, 1_764_600_000_000_000_000} {
		f.Add(u)
	}
	f.Fuzz(func(t *testing.T, u uint64) {
		h := HLC(u % (uint64(MaxHLC) + 1))
		if back, err := ParseHLC(h.String()); err != nil || back != h {
			t.Fatalf("HLC %d: text %q parses to %d, %v", h, h.String(), back, err)
		}
	})
}
