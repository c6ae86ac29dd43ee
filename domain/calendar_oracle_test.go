package domain_test

import (
	"archive/zip"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// This file checks Calendar.Period against a deliberately naive oracle
// that shares no code and no idea with it beyond docs/policies.md
// ("Calendar periods"): it walks calendar days one at a time, tells a
// period's first day by looking at the day (a Monday; the anchor day, or
// the month's last day when the month is shorter), and finds the first
// instant of a day by reading the local date of instants, never trusting
// time.Date in a zone, ZoneBounds or any offset arithmetic.
//
// By default it compares about 80 000 instants (under 3 s with -race).
// TOLLGATE_CALENDAR_ORACLE=full compares them around every clock change of
// every zone from 1970 to 2100, with 20 times the other samples: about
// 2.3 million instants, 12 s without -race.

// oracleFull reports whether the exhaustive mode is on.
func oracleFull() bool { return os.Getenv("TOLLGATE_CALENDAR_ORACLE") == "full" }

// naiveZone finds periods in one zone the slow way. It is not safe for
// concurrent use.
type naiveZone struct {
	loc   *time.Location
	first map[time.Time]int64 // a date (as UTC midnight) → its first instant, Unix seconds
}

func newNaiveZone(loc *time.Location) *naiveZone {
	return &naiveZone{loc: loc, first: make(map[time.Time]int64)}
}

// localDate returns the local date at Unix second sec, as UTC midnight.
func (z *naiveZone) localDate(sec int64) time.Time {
	y, m, d := time.Unix(sec, 0).In(z.loc).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// offset returns the zone's offset at Unix second sec.
func (z *naiveZone) offset(sec int64) int {
	_, o := time.Unix(sec, 0).In(z.loc).Zone()
	return o
}

// firstOf returns the first instant whose local date is date or later:
// the period of a day starts there (its midnight, the first of two, or
// the instant the clocks jump over it; for a day the zone skipped, the
// next day's). No zone is ever more than 16 hours from UTC, so that
// instant lies within 17 hours of date's UTC midnight. The oracle cuts
// those 34 hours into spans of one offset (looking every 10 minutes,
// then bisecting where the offset differs): inside a span the local clock
// runs with time, so the first instant of the span on date or later is
// found by bisecting on the local date. The first span that has one holds
// the answer.
func (z *naiveZone) firstOf(date time.Time) int64 {
	if sec, ok := z.first[date]; ok {
		return sec
	}
	mid := date.Unix()
	lo, hi := mid-17*3600, mid+17*3600
	reached := func(sec int64) bool { return !z.localDate(sec).Before(date) }
	if reached(lo) || !reached(hi) {
		panic(fmt.Sprintf("oracle: %v on %s: an offset beyond 16 hours", z.loc, date.Format(time.DateOnly)))
	}
	// firstTrue returns the first second in [a, b] at which f holds,
	// for an f that holds at b and, once it holds, holds on.
	firstTrue := func(a, b int64, f func(int64) bool) int64 {
		for a < b {
			m := a + (b-a)/2
			if f(m) {
				b = m
			} else {
				a = m + 1
			}
		}
		return a
	}
	spanStart, off := lo, z.offset(lo)
	for at := lo; ; {
		next := min(at+600, hi)
		spanEnd := hi + 1 // exclusive
		if z.offset(next) != off {
			spanEnd = firstTrue(at+1, next, func(sec int64) bool { return z.offset(sec) != off })
		} else if next < hi {
			at = next
			continue
		}
		if reached(spanEnd - 1) {
			sec := firstTrue(spanStart, spanEnd-1, reached)
			z.first[date] = sec
			return sec
		}
		if spanEnd > hi {
			panic("oracle: no instant reaches " + date.Format(time.DateOnly))
		}
		spanStart, off, at = spanEnd, z.offset(spanEnd), spanEnd
	}
}

// startsPeriod reports whether a period of c starts on date, by looking
// at the date alone: every day; a Monday; the anchor day, or the last
// day of a month shorter than it (and, for a year, in the anchor month).
// c's anchors are 1 to 31 and January to December: the oracle takes no
// defaults.
func startsPeriod(c domain.Calendar, date time.Time) bool {
	_, m, d := date.Date()
	onAnchor := func() bool {
		last := date.Add(24*time.Hour).Day() == 1 // UTC: every day lasts 24 hours
		return d == c.AnchorDay || (last && d < c.AnchorDay)
	}
	switch c.Unit {
	case domain.PeriodDay:
		return true
	case domain.PeriodWeek:
		return date.Weekday() == time.Monday
	case domain.PeriodMonth:
		return onAnchor()
	case domain.PeriodYear:
		return m == c.AnchorMonth && onAnchor()
	}
	panic(fmt.Sprintf("oracle: unit %v", c.Unit))
}

// period returns the period of c that holds t, in Unix seconds: periods
// start on the first instant of their first day, and end where the next
// one starts, so a day the zone skipped starts an empty period, which
// holds no instant. The period holding t starts on t's local date or
// before it; when clocks went back across midnight t's date may be up to
// a day behind, so the walk goes on to three days after it.
func (z *naiveZone) period(c domain.Calendar, t time.Time) (start, end int64) {
	const oneDay = 24 * time.Hour // dates are UTC midnights
	date := z.localDate(t.Unix())
	from := date
	for !startsPeriod(c, from) {
		from = from.Add(-oneDay)
	}
	to := date.Add(3 * oneDay)
	for !startsPeriod(c, to) {
		to = to.Add(oneDay)
	}
	start = z.firstOf(from)
	if time.Unix(start, 0).After(t) {
		panic(fmt.Sprintf("oracle: %v: the period of %s starts after it", z.loc, t))
	}
	for d := from.Add(oneDay); !d.After(to); d = d.Add(oneDay) {
		if !startsPeriod(c, d) {
			continue
		}
		next := z.firstOf(d)
		if t.Before(time.Unix(next, 0)) {
			return start, next
		}
		start = next
	}
	panic(fmt.Sprintf("oracle: %v: no period ends after %s", z.loc, t))
}

// tzZone is one zone of Go's time-zone database: its name, and the other
// names of the same data (links such as US/Eastern).
type tzZone struct {
	name    string
	aliases []string
	loc     *time.Location
}

// goZones returns every zone of $GOROOT/lib/time/zoneinfo.zip, the
// database time/tzdata embeds, one per distinct data (a link is checked
// once, as its target), sorted by name.
func goZones(t *testing.T) []tzZone {
	t.Helper()
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	path := filepath.Join(strings.TrimSpace(string(out)), "lib", "time", "zoneinfo.zip")
	r, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("the Go time-zone database: %v", err)
	}
	defer r.Close()
	type sum struct {
		crc  uint32
		size uint64
	}
	byData := map[sum]int{}
	var zones []tzZone
	for _, f := range r.File {
		if f.FileInfo().IsDir() {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		k := sum{crc32.ChecksumIEEE(data), uint64(len(data))}
		if i, ok := byData[k]; ok {
			zones[i].aliases = append(zones[i].aliases, f.Name)
			continue
		}
		loc, err := time.LoadLocationFromTZData(f.Name, data)
		if err != nil {
			t.Fatalf("zone %s: %v", f.Name, err)
		}
		byData[k] = len(zones)
		zones = append(zones, tzZone{name: f.Name, loc: loc})
	}
	if len(zones) < 300 {
		t.Fatalf("%s holds %d distinct zones, want the whole database", path, len(zones))
	}
	slices.SortFunc(zones, func(a, b tzZone) int { return strings.Compare(a.name, b.name) })
	return zones
}

// Every anchor the oracle covers: each month anchor and each pair of a
// year's, checked in some zone at the boundary they make.
var (
	oracleMonthAnchors [32]atomic.Bool
	oracleYearAnchors  [13][32]atomic.Bool
)

// oracleRun compares Period with the oracle in one zone.
type oracleRun struct {
	t      *testing.T
	zone   string
	naive  *naiveZone
	rng    *rand.Rand
	checks int
	fails  int
}

// maxOracleFails bounds the failures reported per zone.
const maxOracleFails = 5

// check compares c.Period(at) with the oracle's period, and the decision
// a PeriodWindow makes at at with it (the window's length, the time to its
// end, and the header seconds they give: w and t), and returns the
// oracle's period.
func (o *oracleRun) check(c domain.Calendar, at time.Time) (start, end time.Time) {
	o.checks++
	ws, we := o.naive.period(c, at)
	start, end = time.Unix(ws, 0), time.Unix(we, 0)
	domainCal := c
	if c.AnchorDay == 1 && o.rng.IntN(2) == 0 {
		domainCal.AnchorDay = 0 // the default, 1
	}
	if c.AnchorMonth == time.January && o.rng.IntN(2) == 0 {
		domainCal.AnchorMonth = 0
	}
	if domainCal.Unit == domain.PeriodDay || domainCal.Unit == domain.PeriodWeek {
		domainCal.AnchorDay, domainCal.AnchorMonth = 0, 0
	} else if domainCal.Unit == domain.PeriodMonth {
		domainCal.AnchorMonth = 0
	}
	gs, ge := domainCal.Period(at)
	fail := func(format string, args ...any) {
		o.t.Helper()
		if o.fails++; o.fails <= maxOracleFails {
			o.t.Errorf("%s %s anchor %d/%d at %s: %s", o.zone, c.Unit, c.AnchorMonth, c.AnchorDay, instant(at.In(o.naive.loc)), fmt.Sprintf(format, args...))
		}
	}
	if !gs.Equal(start) || !ge.Equal(end) {
		fail("Period = [%s, %s), the oracle [%s, %s)", instant(gs), instant(ge), instant(start.In(o.naive.loc)), instant(end.In(o.naive.loc)))
		return start, end
	}
	if gs.Location() != o.naive.loc || ge.Location() != o.naive.loc {
		fail("Period in %v and %v", gs.Location(), ge.Location())
	}
	var w domain.PeriodWindow
	d := w.Decide(at, domainCal, 10, 1)
	length, left := end.Sub(start), end.Sub(at)
	if at.Year() >= 1970 && (length > domain.NominalWindow(c.Unit) || length > domain.MaxPeriod) {
		fail("the period lasts %v, longer than NominalWindow %v", length, domain.NominalWindow(c.Unit))
	}
	if d.Window != length || d.ResetAfter != left || !d.Allowed || d.RetryAfter != 0 {
		fail("Decide = %+v, want Window %v and ResetAfter %v", d, length, left)
	}
	// The headers' w and t, and the usage API's window_seconds and
	// reset_seconds: whole seconds, rounded up.
	if got, want := domain.CeilSeconds(d.Window), we-ws; got != want {
		fail("w = %d, want the period's %d s", got, want)
	}
	if got, want := domain.CeilSeconds(d.ResetAfter), we-at.Unix(); got != want {
		fail("t = %d, want %d s to the period's end", got, want)
	}
	return start, end
}

// around checks c at at, then at its period's boundaries: each start and
// end, a nanosecond and a millisecond before, a nanosecond after.
func (o *oracleRun) around(c domain.Calendar, at time.Time) {
	start, end := o.check(c, at)
	for _, b := range []time.Time{start, end} {
		for _, d := range []time.Duration{0, -time.Nanosecond, -time.Millisecond, time.Nanosecond} {
			o.check(c, b.Add(d))
		}
	}
}

// randomCalendar returns a calendar of a random unit and anchors.
func (o *oracleRun) randomCalendar() domain.Calendar {
	c := domain.Calendar{Unit: domain.PeriodUnit(1 + o.rng.IntN(4)), Location: o.naive.loc, AnchorDay: 1, AnchorMonth: time.January}
	if o.rng.IntN(2) == 0 {
		c.AnchorDay = 28 + o.rng.IntN(4) // the anchors that clamp
	} else {
		c.AnchorDay = 1 + o.rng.IntN(31)
	}
	c.AnchorMonth = time.Month(1 + o.rng.IntN(12))
	return c
}

// onDate returns the calendars whose periods start on date: a day, a
// week, a month anchored on date's day, a year anchored on its month and
// day, and the month and year anchored on a later day when date is the
// last of its month.
func onDate(loc *time.Location, date time.Time, rng *rand.Rand) []domain.Calendar {
	cals := []domain.Calendar{{Unit: domain.PeriodDay}, {Unit: domain.PeriodWeek}}
	anchor := date.Day()
	if date.AddDate(0, 0, 1).Day() == 1 {
		anchor += rng.IntN(32 - anchor)
	}
	cals = append(cals,
		domain.Calendar{Unit: domain.PeriodMonth, AnchorDay: anchor},
		domain.Calendar{Unit: domain.PeriodYear, AnchorMonth: date.Month(), AnchorDay: anchor})
	for i := range cals {
		cals[i].Location = loc
		if cals[i].AnchorDay == 0 {
			cals[i].AnchorDay, cals[i].AnchorMonth = 1, time.January
		} else if cals[i].AnchorMonth == 0 {
			cals[i].AnchorMonth = time.January
		}
	}
	return cals
}

// TestCalendarPeriodOracle compares Calendar.Period, and the decisions
// and header seconds of a PeriodWindow, with the naive oracle above in
// every zone of Go's time-zone database, from 1970 to 2100: around a
// sample of each zone's clock changes (those near midnight first), at
// the ends of random months with the anchors that clamp, for every
// month anchor 1 to 31 and every year anchor (January 1 to December 31)
// in some zone, and at random instants; each time at the instant, at its
// period's two boundaries and a nanosecond and a millisecond before them
// and a nanosecond after.
func TestCalendarPeriodOracle(t *testing.T) {
	t.Parallel()
	zones := goZones(t)
	from, to := utc(1970, 1, 1, 0, 0), utc(2100, 1, 1, 0, 0)
	full := oracleFull()
	var mu sync.Mutex // guards total
	total := 0
	t.Run("zones", func(t *testing.T) {
		for zi, z := range zones {
			t.Run(z.name, func(t *testing.T) {
				t.Parallel()
				o := &oracleRun{t: t, zone: z.name, naive: newNaiveZone(z.loc), rng: rand.New(rand.NewPCG(uint64(zi), 2100))}
				defer func() {
					mu.Lock()
					total += o.checks
					mu.Unlock()
				}()
				o.zoneSamples(zi, from, to, full)
			})
		}
	})
	for a := 1; a <= 31; a++ {
		if !oracleMonthAnchors[a].Load() {
			t.Errorf("month anchor %d never checked", a)
		}
		for m := time.January; m <= time.December; m++ {
			if !oracleYearAnchors[m][a].Load() {
				t.Errorf("year anchor %s %d never checked", m, a)
			}
		}
	}
	t.Logf("%d zones (%d names), %d instants compared", len(zones), len(zones)+aliasCount(zones), total)
}

func aliasCount(zones []tzZone) int {
	n := 0
	for _, z := range zones {
		n += len(z.aliases)
	}
	return n
}

// zoneSamples runs every sample of TestCalendarPeriodOracle in one zone,
// the zi-th.
func (o *oracleRun) zoneSamples(zi int, from, to time.Time, full bool) {
	loc := o.naive.loc
	// Clock changes: those whose local time on either side is within
	// three hours of midnight, where a period may start on one, first.
	// (ZoneBounds finds them, to choose samples; the oracle never asks.)
	changes := clockChanges(loc, from, to)
	var nearMidnight, others []time.Time
	for _, c := range changes {
		h, _, _ := c.Add(-time.Second).In(loc).Clock()
		h2, _, _ := c.In(loc).Clock()
		if h >= 21 || h < 3 || h2 >= 21 || h2 < 3 {
			nearMidnight = append(nearMidnight, c)
		} else {
			others = append(others, c)
		}
	}
	pick := func(list []time.Time, n int) []time.Time {
		if full || len(list) <= n {
			return list
		}
		out := make([]time.Time, n)
		for i := range out {
			out[i] = list[o.rng.IntN(len(list))]
		}
		return out
	}
	for _, c := range append(pick(nearMidnight, 3), pick(others, 1)...) {
		// The calendars whose period starts on the local date before
		// the change, or after it (they differ at midnight), checked
		// at the change and a nanosecond before it.
		before, after := o.naive.localDate(c.Unix()-1), o.naive.localDate(c.Unix())
		dates := []time.Time{before}
		if !after.Equal(before) {
			dates = append(dates, after)
		}
		for _, d := range dates {
			for _, cal := range onDate(loc, d, o.rng) {
				o.around(cal, c)
				o.check(cal, c.Add(-time.Nanosecond))
			}
		}
		o.check(o.randomCalendar(), c.Add(time.Nanosecond))
	}
	// Month ends, with the anchors that clamp, and every anchor: month
	// anchor (zi+k) mod 31 and year anchor (2zi+k) mod 372.
	span := int(to.Year() - from.Year())
	n := 2
	if full {
		n = 40
	}
	for k := range n {
		y := from.Year() + o.rng.IntN(span)
		m := time.Month(1 + o.rng.IntN(12))
		last := time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC) // the month's last date
		a := 28 + o.rng.IntN(4)
		cal := domain.Calendar{Unit: domain.PeriodMonth, Location: loc, AnchorDay: a, AnchorMonth: time.January}
		o.around(cal, time.Unix(o.naive.firstOf(last), 0).Add(time.Duration(o.rng.Int64N(int64(time.Hour)))))
		o.around(cal, time.Unix(o.naive.firstOf(last.AddDate(0, 0, 1)), 0))

		a = 1 + (zi+k)%31
		cal.AnchorDay = a
		oracleMonthAnchors[a].Store(true)
		at := time.Unix(o.naive.firstOf(time.Date(y, m, min(a, last.Day()), 0, 0, 0, 0, time.UTC)), 0)
		o.around(cal, at)

		ya := (2*zi + k) % 372
		cal = domain.Calendar{Unit: domain.PeriodYear, Location: loc, AnchorMonth: time.Month(1 + ya/31), AnchorDay: 1 + ya%31}
		ylast := time.Date(y, cal.AnchorMonth+1, 0, 0, 0, 0, 0, time.UTC).Day()
		oracleYearAnchors[cal.AnchorMonth][cal.AnchorDay].Store(true)
		at = time.Unix(o.naive.firstOf(time.Date(y, cal.AnchorMonth, min(cal.AnchorDay, ylast), 0, 0, 0, 0, time.UTC)), 0)
		o.around(cal, at.Add(time.Duration(o.rng.Int64N(int64(2*time.Hour)))-time.Hour))
	}
	// Random instants, random calendars.
	for range n {
		at := from.Add(time.Duration(o.rng.Int64N(int64(to.Sub(from)))))
		o.around(o.randomCalendar(), at)
	}
}
