package timetravel_test

import (
	"slices"
	"testing"
	"time"

	"github.com/padfs/padfs/mvcc"
	"github.com/padfs/padfs/timetravel"
)

func at(t time.Time) mvcc.HLC { return mvcc.HLC(t.UnixNano()) }

// TestListedRule: .asof/ lists the first and last commits and one point
// per window: the window's last commit before a pause of a minute, else
// its last commit; windows grow with age.
func TestListedRule(t *testing.T) {
	t0 := time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)
	var commits []mvcc.HLC
	add := func(d time.Duration) mvcc.HLC {
		h := at(t0.Add(d))
		commits = append(commits, h)
		return h
	}
	first := add(0)
	// 09:01-09:03 a burst every second, a pause, 09:05 a burst without
	// a pause until the window ends: the window's point is the end of
	// the first burst (the settled one), not its last commit.
	var burstEnd mvcc.HLC
	for s := 60; s <= 180; s++ {
		burstEnd = add(time.Duration(s) * time.Second)
	}
	for s := 300; s < 600; s += 10 {
		add(time.Duration(s) * time.Second)
	}
	// 09:10-09:20: commits every 20 s, never a pause: the last one.
	var busyEnd mvcc.HLC
	for s := 600; s < 1200; s += 20 {
		busyEnd = add(time.Duration(s) * time.Second)
	}
	// A gap, then two settled points in one window: the later one; the
	// last commit stands for its own window (the commit before it in
	// that window is not listed).
	add(2 * time.Hour)
	second := add(2*time.Hour + 5*time.Minute)
	add(2*time.Hour + 11*time.Minute)
	last := add(2*time.Hour + 15*time.Minute)
	got := timetravel.Listed(commits)
	want := []mvcc.HLC{first, burstEnd, busyEnd, second, last}
	if !slices.Equal(got, want) {
		t.Errorf("Listed =\n%v\nwant\n%v", got, want)
	}
	for _, short := range [][]mvcc.HLC{nil, {first}, {first, last}} {
		if got := timetravel.Listed(short); !slices.Equal(got, short) {
			t.Errorf("Listed(%v) = %v", short, got)
		}
	}
}

// TestListedBounded: a month of commits every 30 s, with a pause of two
// minutes every quarter hour, lists a few hundred points, in order, each
// one of the commits: every 10 minutes for the last day, every hour for
// the week before, every day before that.
func TestListedBounded(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var commits []mvcc.HLC
	for d := time.Duration(0); d < 30*24*time.Hour; d += 30 * time.Second {
		if d%(15*time.Minute) < 2*time.Minute && d%(15*time.Minute) != 0 {
			continue
		}
		commits = append(commits, at(t0.Add(d)))
	}
	got := timetravel.Listed(commits)
	if len(got) < 300 || len(got) > 340 {
		t.Errorf("a month of commits lists %d points; want 300-340", len(got))
	}
	if !slices.IsSorted(got) || len(slices.Compact(slices.Clone(got))) != len(got) {
		t.Errorf("points not strictly in order")
	}
	for _, h := range got {
		if _, ok := slices.BinarySearch(commits, h); !ok {
			t.Fatalf("listed %s is not a commit", h)
		}
	}
	if got[0] != commits[0] || got[len(got)-1] != commits[len(commits)-1] {
		t.Errorf("the first and last commits are not listed")
	}
	// The last day: 6 an hour (each the commit before a pause).
	lastDay := 0
	for _, h := range got {
		if commits[len(commits)-1].Time().Sub(h.Time()) < 24*time.Hour {
			lastDay++
		}
	}
	if lastDay < 144 || lastDay > 146 {
		t.Errorf("%d points in the last day; want 144-146", lastDay)
	}
}
