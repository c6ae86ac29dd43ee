package domain_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, on a machine without zoneinfo

	"github.com/tollgate/tollgate/domain"
)

// Calendars without a zone, for the tables.
var (
	daily   = domain.Calendar{Unit: domain.PeriodDay}
	weekly  = domain.Calendar{Unit: domain.PeriodWeek}
	monthly = domain.Calendar{Unit: domain.PeriodMonth}
)

// monthOn returns a month calendar anchored on day.
func monthOn(day int) domain.Calendar {
	return domain.Calendar{Unit: domain.PeriodMonth, AnchorDay: day}
}

// yearOn returns a year calendar anchored on day of month.
func yearOn(month time.Month, day int) domain.Calendar {
	return domain.Calendar{Unit: domain.PeriodYear, AnchorMonth: month, AnchorDay: day}
}

// zone loads the IANA zone name or fails t.
func zone(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

// utc returns the instant y-m-d h:mi in UTC.
func utc(y int, m time.Month, d, h, mi int) time.Time {
	return time.Date(y, m, d, h, mi, 0, 0, time.UTC)
}

// instant formats t in its zone and in UTC, for failure messages.
func instant(t time.Time) string {
	return t.Format("2006-01-02 15:04:05.999999999 -07:00") + " (" + t.UTC().Format("15:04:05.999999999Z") + ")"
}

// checkPeriod fails t unless c.Period(at) is [start, end), both in loc.
func checkPeriod(t *testing.T, name string, c domain.Calendar, loc *time.Location, at, start, end time.Time) {
	t.Helper()
	c.Location = loc
	gotStart, gotEnd := c.Period(at)
	if !gotStart.Equal(start) || !gotEnd.Equal(end) {
		t.Errorf("%s: %s Period(%s) = [%s, %s), want [%s, %s)", name, c.Unit, instant(at.In(loc)),
			instant(gotStart), instant(gotEnd), instant(start.In(loc)), instant(end.In(loc)))
	}
	if gotStart.Location() != loc || gotEnd.Location() != loc {
		t.Errorf("%s: Period(%s) in zones %v and %v, want %v", name, instant(at), gotStart.Location(), gotEnd.Location(), loc)
	}
}

// periodCase is one period at a fixed instant: the calendar, its zone,
// an instant, and the period's start and real length.
type periodCase struct {
	name   string
	cal    domain.Calendar
	zone   string
	at     time.Time
	start  time.Time
	length time.Duration
}

// runPeriods checks every case in tests.
func runPeriods(t *testing.T, tests []periodCase) {
	t.Helper()
	for _, tt := range tests {
		checkPeriod(t, tt.name, tt.cal, zone(t, tt.zone), tt.at, tt.start, tt.start.Add(tt.length))
	}
}

const (
	hour = time.Hour
	day  = 24 * time.Hour
)

func TestParsePeriodUnit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s    string
		want domain.PeriodUnit
	}{
		{"day", domain.PeriodDay},
		{"week", domain.PeriodWeek},
		{"month", domain.PeriodMonth},
		{"year", domain.PeriodYear},
	}
	for _, tt := range tests {
		got, err := domain.ParsePeriodUnit(tt.s)
		if err != nil || got != tt.want {
			t.Errorf("ParsePeriodUnit(%q) = %v, %v, want %v", tt.s, got, err, tt.want)
		}
		if got.String() != tt.s {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tt.s)
		}
	}
	for _, s := range []string{"", "none", "Day", "MONTH", "days", "weekly", " year", "hour", "quarter"} {
		got, err := domain.ParsePeriodUnit(s)
		if !errors.Is(err, domain.ErrInvalidCalendar) || got != 0 {
			t.Errorf("ParsePeriodUnit(%q) = %v, %v, want 0 and an ErrInvalidCalendar", s, got, err)
		} else if !strings.Contains(err.Error(), fmt.Sprintf("period=%q", s)) {
			t.Errorf("ParsePeriodUnit(%q) error %q does not name the value", s, err)
		}
	}
}

func TestPeriodUnitString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		u    domain.PeriodUnit
		want string
	}{
		{0, "none"},
		{domain.PeriodDay, "day"},
		{domain.PeriodWeek, "week"},
		{domain.PeriodMonth, "month"},
		{domain.PeriodYear, "year"},
		{5, "PeriodUnit(5)"},
		{255, "PeriodUnit(255)"},
	}
	for _, tt := range tests {
		if got := tt.u.String(); got != tt.want {
			t.Errorf("PeriodUnit(%d).String() = %q, want %q", uint8(tt.u), got, tt.want)
		}
	}
}

func TestCalendarValidate(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	tests := []struct {
		cal  domain.Calendar
		want []string // the parts of the error message; none when valid
	}{
		{daily, nil},
		{weekly, nil},
		{monthly, nil},
		{domain.Calendar{Unit: domain.PeriodYear}, nil},
		{domain.Calendar{Unit: domain.PeriodDay, Location: berlin}, nil},
		{monthOn(1), nil},
		{monthOn(31), nil},
		{yearOn(time.February, 29), nil},
		{yearOn(time.December, 31), nil},
		{yearOn(time.July, 0), nil},
		{yearOn(0, 15), nil},
		{domain.Calendar{}, []string{"no period unit"}},
		{domain.Calendar{AnchorDay: 3}, []string{"no period unit"}},
		{domain.Calendar{Unit: 5}, []string{"period=PeriodUnit(5)"}},
		{monthOn(32), []string{"anchor_day=32", "1 to 31"}},
		{monthOn(-1), []string{"anchor_day=-1", "1 to 31"}},
		{yearOn(time.March, 32), []string{"anchor_day=32"}},
		{yearOn(13, 1), []string{"anchor_month=13", "1 to 12"}},
		{yearOn(-1, 1), []string{"anchor_month=-1", "1 to 12"}},
		{yearOn(13, 40), []string{"anchor_day=40", "anchor_month=13"}},
		{domain.Calendar{Unit: domain.PeriodDay, AnchorDay: 1}, []string{"anchor_day=1", "day period"}},
		{domain.Calendar{Unit: domain.PeriodWeek, AnchorDay: 15}, []string{"anchor_day=15", "week period"}},
		{domain.Calendar{Unit: domain.PeriodDay, AnchorMonth: time.January}, []string{"anchor_month=1", "day period"}},
		{domain.Calendar{Unit: domain.PeriodWeek, AnchorMonth: time.March}, []string{"anchor_month=3", "week period"}},
		{domain.Calendar{Unit: domain.PeriodMonth, AnchorMonth: time.January}, []string{"anchor_month=1", "month period"}},
		{domain.Calendar{Unit: domain.PeriodMonth, AnchorDay: 40, AnchorMonth: 2}, []string{"anchor_day=40", "anchor_month=2"}},
	}
	for _, tt := range tests {
		err := tt.cal.Validate()
		if tt.want == nil {
			if err != nil {
				t.Errorf("%+v.Validate() = %v, want nil", tt.cal, err)
			}
			continue
		}
		if !errors.Is(err, domain.ErrInvalidCalendar) {
			t.Errorf("%+v.Validate() = %v, want an ErrInvalidCalendar", tt.cal, err)
			continue
		}
		for _, part := range tt.want {
			if !strings.Contains(err.Error(), part) {
				t.Errorf("%+v.Validate() = %q, want it to say %q", tt.cal, err, part)
			}
		}
	}
}

// TestCalendarPeriodLengths checks that periods have their real length
// when the clocks change inside them.
func TestCalendarPeriodLengths(t *testing.T) {
	t.Parallel()
	runPeriods(t, []periodCase{
		{"Berlin autumn day", daily, "Europe/Berlin", utc(2027, 10, 31, 12, 0), utc(2027, 10, 30, 22, 0), 90000 * time.Second},
		{"Berlin spring day", daily, "Europe/Berlin", utc(2027, 3, 28, 12, 0), utc(2027, 3, 27, 23, 0), 23 * hour},
		{"Berlin summer day", daily, "Europe/Berlin", utc(2027, 6, 15, 12, 0), utc(2027, 6, 14, 22, 0), day},
		{"New York spring day", daily, "America/New_York", utc(2027, 3, 14, 12, 0), utc(2027, 3, 14, 5, 0), 23 * hour},
		{"New York autumn day", daily, "America/New_York", utc(2027, 11, 7, 12, 0), utc(2027, 11, 7, 4, 0), 25 * hour},
		{"Chatham spring day", daily, "Pacific/Chatham", utc(2027, 9, 26, 0, 0), utc(2027, 9, 25, 11, 15), 23 * hour},
		{"Chatham autumn day", daily, "Pacific/Chatham", utc(2027, 4, 4, 0, 0), utc(2027, 4, 3, 10, 15), 25 * hour},
		{"Lord Howe spring day (30 min)", daily, "Australia/Lord_Howe", utc(2027, 10, 3, 0, 0), utc(2027, 10, 2, 13, 30), 23*hour + 30*time.Minute},
		{"Lord Howe autumn day (30 min)", daily, "Australia/Lord_Howe", utc(2027, 4, 4, 0, 0), utc(2027, 4, 3, 13, 0), 24*hour + 30*time.Minute},
		{"Kwajalein's doubled 1969-09-30", daily, "Pacific/Kwajalein", utc(1969, 9, 30, 12, 0), utc(1969, 9, 29, 13, 0), 47 * hour},
		{"February 2027", monthly, "UTC", utc(2027, 2, 14, 0, 0), utc(2027, 2, 1, 0, 0), 28 * day},
		{"leap February 2028", monthly, "UTC", utc(2028, 2, 29, 12, 0), utc(2028, 2, 1, 0, 0), 29 * day},
		{"April 2027", monthly, "UTC", utc(2027, 4, 30, 23, 59), utc(2027, 4, 1, 0, 0), 30 * day},
		{"January 2027", monthly, "UTC", utc(2027, 1, 1, 0, 0), utc(2027, 1, 1, 0, 0), 31 * day},
		{"Berlin leap February 2028", monthly, "Europe/Berlin", utc(2028, 2, 10, 0, 0), utc(2028, 1, 31, 23, 0), 29 * day},
		{"Berlin March 2027", monthly, "Europe/Berlin", utc(2027, 3, 10, 0, 0), utc(2027, 2, 28, 23, 0), 31*day - hour},
		{"Berlin October 2027", monthly, "Europe/Berlin", utc(2027, 10, 10, 0, 0), utc(2027, 9, 30, 22, 0), 31*day + hour},
		{"Berlin autumn week", weekly, "Europe/Berlin", utc(2027, 10, 31, 12, 0), utc(2027, 10, 24, 22, 0), 7*day + hour},
		{"New York spring week", weekly, "America/New_York", utc(2027, 3, 14, 12, 0), utc(2027, 3, 8, 5, 0), 7*day - hour},
		{"year 2027", yearOn(0, 0), "UTC", utc(2027, 6, 1, 0, 0), utc(2027, 1, 1, 0, 0), 365 * day},
		{"leap year 2028", yearOn(0, 0), "UTC", utc(2028, 6, 1, 0, 0), utc(2028, 1, 1, 0, 0), 366 * day},
		{"Berlin leap year 2028", yearOn(time.January, 1), "Europe/Berlin", utc(2028, 6, 1, 0, 0), utc(2027, 12, 31, 23, 0), 366 * day},
		{"Casey 2012, the longest year since 1970", yearOn(0, 0), "Antarctica/Casey", utc(2012, 6, 1, 0, 0), utc(2011, 12, 31, 13, 0), 366*day + 3*hour},
	})
}

// TestCalendarPeriodFooterRuleLeapYear checks the periods around the end
// of a leap year after a zone's last listed clock change, where
// ZoneBounds reports an end before the instant (golang/go#81583).
func TestCalendarPeriodFooterRuleLeapYear(t *testing.T) {
	t.Parallel()
	runPeriods(t, []periodCase{
		{"Berlin 2040-12-31", daily, "Europe/Berlin", utc(2040, 12, 31, 12, 0), utc(2040, 12, 30, 23, 0), day},
		{"Berlin 2041-01-01", daily, "Europe/Berlin", utc(2040, 12, 31, 23, 30), utc(2040, 12, 31, 23, 0), day},
		{"New York 2041-01-01", daily, "America/New_York", utc(2041, 1, 1, 12, 0), utc(2041, 1, 1, 5, 0), day},
		{"New York week", weekly, "America/New_York", utc(2040, 12, 31, 12, 0), utc(2040, 12, 31, 5, 0), 7 * day},
		{"Berlin December 2040", monthOn(31), "Europe/Berlin", utc(2041, 1, 1, 0, 0), utc(2040, 12, 30, 23, 0), 31 * day},
		{"Chatham year 2041", yearOn(0, 0), "Pacific/Chatham", utc(2041, 6, 1, 0, 0), utc(2040, 12, 31, 10, 15), 365 * day},
	})
}

// TestCalendarPeriodSkippedMidnight checks periods whose local midnight
// does not exist: they start at the first instant of the day, the moment
// the clocks jump (01:00 local time), and the period before them ends
// there.
func TestCalendarPeriodSkippedMidnight(t *testing.T) {
	t.Parallel()
	runPeriods(t, []periodCase{
		{"Santiago day", daily, "America/Santiago", utc(2027, 9, 5, 12, 0), utc(2027, 9, 5, 4, 0), 23 * hour},
		{"Santiago day before", daily, "America/Santiago", utc(2027, 9, 5, 3, 59), utc(2027, 9, 4, 4, 0), day},
		{"Havana day", daily, "America/Havana", utc(2028, 3, 12, 12, 0), utc(2028, 3, 12, 5, 0), 23 * hour},
		{"Beirut day", daily, "Asia/Beirut", utc(2027, 3, 28, 12, 0), utc(2027, 3, 27, 22, 0), 23 * hour},
		{"Cairo day", daily, "Africa/Cairo", utc(2027, 4, 30, 12, 0), utc(2027, 4, 29, 22, 0), 23 * hour},
		{"Azores day", daily, "Atlantic/Azores", utc(2027, 3, 28, 12, 0), utc(2027, 3, 28, 1, 0), 23 * hour},
		{"Santiago month anchored on the 5th", monthOn(5), "America/Santiago", utc(2027, 9, 20, 0, 0), utc(2027, 9, 5, 4, 0), 30*day - hour},
		{"Santiago month before it", monthOn(5), "America/Santiago", utc(2027, 9, 5, 3, 59), utc(2027, 8, 5, 4, 0), 31 * day},
		{"Asuncion month", monthly, "America/Asuncion", utc(2023, 10, 1, 12, 0), utc(2023, 10, 1, 4, 0), 31*day - hour},
		{"Tehran week (a Monday)", weekly, "Asia/Tehran", utc(2021, 3, 25, 0, 0), utc(2021, 3, 21, 20, 30), 7*day - hour},
		{"Damascus day, 2002-04-01", daily, "Asia/Damascus", utc(2002, 4, 1, 12, 0), utc(2002, 3, 31, 22, 0), 23 * hour},
		{"Damascus week (a Monday)", weekly, "Asia/Damascus", utc(2002, 4, 1, 12, 0), utc(2002, 3, 31, 22, 0), 7*day - hour},
		{"Damascus month", monthly, "Asia/Damascus", utc(2002, 4, 1, 12, 0), utc(2002, 3, 31, 22, 0), 30*day - hour},
		{"Damascus year anchored on April 1", yearOn(time.April, 1), "Asia/Damascus", utc(2002, 4, 1, 12, 0), utc(2002, 3, 31, 22, 0), 365 * day},
		{"Lima year 1990", yearOn(0, 0), "America/Lima", utc(1990, 6, 1, 0, 0), utc(1990, 1, 1, 5, 0), 365 * day},
		{"Lima week 1990 (a Monday)", weekly, "America/Lima", utc(1990, 1, 3, 0, 0), utc(1990, 1, 1, 5, 0), 7*day - hour},
		// Samoa skipped December 30, 2011 for the other side of the
		// date line: the day before ends where December 31 starts.
		{"Apia December 29, 2011", daily, "Pacific/Apia", utc(2011, 12, 30, 9, 59), utc(2011, 12, 29, 10, 0), day},
		{"Apia December 31, 2011", daily, "Pacific/Apia", utc(2011, 12, 30, 10, 0), utc(2011, 12, 30, 10, 0), day},
		{"Apia week without its Friday", weekly, "Pacific/Apia", utc(2011, 12, 30, 10, 0), utc(2011, 12, 26, 10, 0), 6 * day},
		{"Apia December 2011", monthly, "Pacific/Apia", utc(2011, 12, 30, 10, 0), utc(2011, 12, 1, 10, 0), 30 * day},
	})
}

// TestCalendarPeriodRepeatedMidnight checks periods whose local midnight
// happens twice: they start at the first one, and the hour of clock time
// that repeats belongs to one period.
func TestCalendarPeriodRepeatedMidnight(t *testing.T) {
	t.Parallel()
	runPeriods(t, []periodCase{
		{"Havana, first midnight", daily, "America/Havana", utc(2027, 11, 7, 4, 0), utc(2027, 11, 7, 4, 0), 25 * hour},
		{"Havana, second midnight", daily, "America/Havana", utc(2027, 11, 7, 5, 0), utc(2027, 11, 7, 4, 0), 25 * hour},
		{"Havana, the day before", daily, "America/Havana", utc(2027, 11, 7, 3, 59), utc(2027, 11, 6, 4, 0), day},
		// time.Date returns the second of these two midnights.
		{"Berlin 1916-10-01, first midnight", daily, "Europe/Berlin", utc(1916, 9, 30, 22, 0), utc(1916, 9, 30, 22, 0), 25 * hour},
		{"Berlin 1916-10-01, second midnight", daily, "Europe/Berlin", utc(1916, 9, 30, 23, 0), utc(1916, 9, 30, 22, 0), 25 * hour},
		{"Berlin 1916-09-30", daily, "Europe/Berlin", utc(1916, 9, 30, 21, 59), utc(1916, 9, 29, 22, 0), day},
		{"Azores, first midnight", daily, "Atlantic/Azores", utc(2027, 10, 31, 0, 0), utc(2027, 10, 31, 0, 0), 25 * hour},
		{"Azores, second midnight", daily, "Atlantic/Azores", utc(2027, 10, 31, 1, 0), utc(2027, 10, 31, 0, 0), 25 * hour},
		{"Azores October", monthly, "Atlantic/Azores", utc(2027, 10, 31, 1, 30), utc(2027, 10, 1, 0, 0), 31*day + hour},
		// At 00:01 the clocks went back to 23:01 the day before: the
		// second 23:01-23:59 of November 6 belongs to November 7.
		{"Goose Bay, November 7 at 00:00", daily, "America/Goose_Bay", utc(2010, 11, 7, 3, 0), utc(2010, 11, 7, 3, 0), 25 * hour},
		{"Goose Bay, November 6 at 23:30 again", daily, "America/Goose_Bay", utc(2010, 11, 7, 3, 30), utc(2010, 11, 7, 3, 0), 25 * hour},
		{"Goose Bay, November 6", daily, "America/Goose_Bay", utc(2010, 11, 7, 2, 59), utc(2010, 11, 6, 3, 0), day},
		{"Kwajalein, September 30 again", daily, "Pacific/Kwajalein", utc(1969, 9, 30, 13, 0), utc(1969, 9, 29, 13, 0), 47 * hour},
	})
}

// TestCalendarPeriodWeek checks that weeks start on Monday 00:00 local
// time, across a year boundary and in zones whose Monday starts on a UTC
// Sunday.
func TestCalendarPeriodWeek(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"UTC", "Europe/Berlin", "Pacific/Auckland", "America/Los_Angeles"} {
		loc := zone(t, name)
		local := func(y int, m time.Month, d int) time.Time { return time.Date(y, m, d, 0, 0, 0, 0, loc) }
		mondays := []time.Time{
			local(2027, 12, 27), // Friday December 31 to Saturday January 1
			local(2028, 12, 25), // ends on Monday January 1, 2029
			local(2029, 12, 31), // starts on December 31
			local(2028, 2, 28),  // holds February 29
		}
		for _, monday := range mondays {
			start, end := monday, monday.AddDate(0, 0, 7)
			if start.Weekday() != time.Monday {
				t.Fatalf("%s: %s is not a Monday", name, instant(start))
			}
			for d := range 7 {
				midnight := monday.AddDate(0, 0, d)
				for _, at := range []time.Time{midnight, midnight.Add(12 * hour), midnight.AddDate(0, 0, 1).Add(-time.Nanosecond)} {
					checkPeriod(t, name+" "+at.Weekday().String(), weekly, loc, at, start, end)
				}
			}
		}
	}
	// The same UTC instant is in different weeks in different zones:
	// Monday 01:00 in Auckland, Sunday 12:00 in UTC.
	sunday := utc(2027, 12, 26, 12, 0)
	checkPeriod(t, "Auckland Monday", weekly, zone(t, "Pacific/Auckland"), sunday, utc(2027, 12, 26, 11, 0), utc(2028, 1, 2, 11, 0))
	checkPeriod(t, "UTC Sunday", weekly, time.UTC, sunday, utc(2027, 12, 20, 0, 0), utc(2027, 12, 27, 0, 0))
}

// monthDays holds the length of each month of 2026 to 2030, written out
// rather than computed.
var monthDays = map[int][12]int{
	2026: {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31},
	2027: {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31},
	2028: {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31},
	2029: {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31},
	2030: {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31},
}

// anchoredStart returns local midnight of the anchor day in month m of
// year y, or of the month's last day when it is shorter, from
// monthDays. The zones it is used with have every midnight.
func anchoredStart(y int, m time.Month, anchor int, loc *time.Location) time.Time {
	return time.Date(y, m, min(anchor, monthDays[y][m-1]), 0, 0, 0, 0, loc)
}

// checkTiled checks that consecutive starts are the periods of c: at a
// start, 1 ns before the next one, and in between.
func checkTiled(t *testing.T, name string, c domain.Calendar, loc *time.Location, starts []time.Time) {
	t.Helper()
	for i := range len(starts) - 1 {
		start, end := starts[i], starts[i+1]
		mid := start.Add(end.Sub(start) / 2)
		for _, at := range []time.Time{start, mid, end.Add(-time.Nanosecond)} {
			checkPeriod(t, name, c, loc, at, start, end)
		}
	}
}

// TestCalendarPeriodMonthAnchors checks every anchor day over 2027 to
// 2029: the clamped months, and the return to the anchor day after them.
func TestCalendarPeriodMonthAnchors(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"UTC", "Europe/Berlin", "America/New_York"} {
		loc := zone(t, name)
		for anchor := 1; anchor <= 31; anchor++ {
			var starts []time.Time
			for y := 2026; y <= 2030; y++ {
				for m := time.January; m <= time.December; m++ {
					if (y == 2026 && m < time.December) || (y == 2030 && m > time.January) {
						continue
					}
					starts = append(starts, anchoredStart(y, m, anchor, loc))
				}
			}
			checkTiled(t, fmt.Sprintf("%s anchor %d", name, anchor), monthOn(anchor), loc, starts)
		}
	}
	// Written out: anchor 31 and its neighbours through the leap year.
	d := func(y int, m time.Month, day int) time.Time { return time.Date(y, m, day, 0, 0, 0, 0, time.UTC) }
	tests := []struct {
		anchor int
		starts []time.Time
	}{
		{31, []time.Time{d(2027, 12, 31), d(2028, 1, 31), d(2028, 2, 29), d(2028, 3, 31), d(2028, 4, 30), d(2028, 5, 31), d(2028, 6, 30)}},
		{31, []time.Time{d(2027, 1, 31), d(2027, 2, 28), d(2027, 3, 31)}},
		{30, []time.Time{d(2028, 1, 30), d(2028, 2, 29), d(2028, 3, 30), d(2028, 4, 30), d(2028, 5, 30)}},
		{29, []time.Time{d(2027, 1, 29), d(2027, 2, 28), d(2027, 3, 29)}},
		{29, []time.Time{d(2028, 1, 29), d(2028, 2, 29), d(2028, 3, 29)}},
		{0, []time.Time{d(2028, 1, 1), d(2028, 2, 1), d(2028, 3, 1)}},
		{15, []time.Time{d(2026, 12, 15), d(2027, 1, 15), d(2027, 2, 15)}},
	}
	for _, tt := range tests {
		checkTiled(t, fmt.Sprintf("anchor %d", tt.anchor), monthOn(tt.anchor), time.UTC, tt.starts)
	}
}

// TestCalendarPeriodYearAnchors checks every anchor month and day over
// 2027 to 2029, February 29 of the leap year included.
func TestCalendarPeriodYearAnchors(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"UTC", "Europe/Berlin"} {
		loc := zone(t, name)
		for m := time.January; m <= time.December; m++ {
			for anchor := 1; anchor <= 31; anchor++ {
				var starts []time.Time
				for y := 2026; y <= 2030; y++ {
					starts = append(starts, anchoredStart(y, m, anchor, loc))
				}
				checkTiled(t, fmt.Sprintf("%s anchor %s %d", name, m, anchor), yearOn(m, anchor), loc, starts)
			}
		}
	}
	runPeriods(t, []periodCase{
		{"February 29, 2027", yearOn(time.February, 29), "UTC", utc(2027, 3, 1, 0, 0), utc(2027, 2, 28, 0, 0), 366 * day},
		{"February 29, 2028", yearOn(time.February, 29), "UTC", utc(2028, 2, 29, 0, 0), utc(2028, 2, 29, 0, 0), 365 * day},
		{"February 29, 2029", yearOn(time.February, 29), "UTC", utc(2029, 2, 28, 0, 0), utc(2029, 2, 28, 0, 0), 365 * day},
		{"February 29, before 2028's", yearOn(time.February, 29), "UTC", utc(2028, 2, 28, 23, 59), utc(2027, 2, 28, 0, 0), 366 * day},
		{"January 1, on December 31", yearOn(time.January, 1), "UTC", utc(2028, 1, 1, 0, 0).Add(-time.Nanosecond), utc(2027, 1, 1, 0, 0), 365 * day},
		{"January 1, on January 1", yearOn(time.January, 1), "UTC", utc(2028, 1, 1, 0, 0), utc(2028, 1, 1, 0, 0), 366 * day},
		{"July 15, on December 31", yearOn(time.July, 15), "UTC", utc(2028, 1, 1, 0, 0).Add(-time.Nanosecond), utc(2027, 7, 15, 0, 0), 366 * day},
		{"July 15, on January 1", yearOn(time.July, 15), "UTC", utc(2028, 1, 1, 0, 0), utc(2027, 7, 15, 0, 0), 366 * day},
		{"July 15, on July 14", yearOn(time.July, 15), "UTC", utc(2027, 7, 14, 12, 0), utc(2026, 7, 15, 0, 0), 365 * day},
		{"Chatham July 15", yearOn(time.July, 15), "Pacific/Chatham", utc(2028, 1, 1, 0, 0), utc(2027, 7, 14, 11, 15), 366 * day},
		{"America/Adak from March 1867, October 18 twice", yearOn(time.March, 1), "America/Adak", utc(1867, 10, 18, 0, 0), time.Date(1867, 3, 1, 0, 0, 0, 0, time.FixedZone("LMT", 12*3600+13*60+22)), domain.MaxPeriod},
		{"Pacific/Apia 1892, a leap year with July 4 twice", yearOn(0, 0), "Pacific/Apia", utc(1892, 7, 4, 0, 0), time.Date(1892, 1, 1, 0, 0, 0, 0, time.FixedZone("LMT", 12*3600+33*60+4)), domain.MaxPeriod},
	})
}

// TestCalendarPeriodBoundaries checks that an instant at a boundary
// belongs to the period it starts and one 1 ns before it to the period it
// ends.
func TestCalendarPeriodBoundaries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		cal      domain.Calendar
		zone     string
		boundary time.Time
	}{
		{"UTC leap day", daily, "UTC", utc(2028, 2, 29, 0, 0)},
		{"Berlin autumn day", daily, "Europe/Berlin", utc(2027, 10, 30, 22, 0)},
		{"Berlin after the autumn day", daily, "Europe/Berlin", utc(2027, 10, 31, 23, 0)},
		{"Chatham spring day", daily, "Pacific/Chatham", utc(2027, 9, 25, 11, 15)},
		{"Santiago skipped midnight", daily, "America/Santiago", utc(2027, 9, 5, 4, 0)},
		{"Havana first of two midnights", daily, "America/Havana", utc(2027, 11, 7, 4, 0)},
		{"Goose Bay before the clocks went back", daily, "America/Goose_Bay", utc(2010, 11, 7, 3, 0)},
		{"Apia, the day after the skipped one", daily, "Pacific/Apia", utc(2011, 12, 30, 10, 0)},
		{"New York week at the new year", weekly, "America/New_York", utc(2028, 1, 3, 5, 0)},
		{"Auckland week", weekly, "Pacific/Auckland", utc(2027, 12, 26, 11, 0)},
		{"Tehran week at a skipped midnight", weekly, "Asia/Tehran", utc(2021, 3, 21, 20, 30)},
		{"Berlin month anchored 31, leap February", monthOn(31), "Europe/Berlin", utc(2028, 2, 28, 23, 0)},
		{"Berlin month anchored 31, back to March 31", monthOn(31), "Europe/Berlin", utc(2028, 3, 30, 22, 0)},
		{"New York month", monthly, "America/New_York", utc(2028, 1, 1, 5, 0)},
		{"Chatham year anchored July 15", yearOn(time.July, 15), "Pacific/Chatham", utc(2028, 7, 14, 11, 15)},
		{"UTC year", yearOn(0, 0), "UTC", utc(2028, 1, 1, 0, 0)},
		{"Lima year at a skipped midnight", yearOn(0, 0), "America/Lima", utc(1990, 1, 1, 5, 0)},
	}
	for _, tt := range tests {
		c := tt.cal
		c.Location = zone(t, tt.zone)
		if start, _ := c.Period(tt.boundary); !start.Equal(tt.boundary) {
			t.Errorf("%s: Period(%s) starts at %s, want the boundary", tt.name, instant(tt.boundary), instant(start))
		}
		before := tt.boundary.Add(-time.Nanosecond)
		if start, end := c.Period(before); !end.Equal(tt.boundary) || !start.Before(before) {
			t.Errorf("%s: Period(%s) = [%s, %s), want it to end at the boundary", tt.name, instant(before), instant(start), instant(end))
		}
	}
}

// tilingZones are zones with every kind of clock change: none, an hour,
// half and three quarters of an hour, at midnight, across midnight
// backwards, negative summer time, two hours, and across the date line.
var tilingZones = []string{
	"UTC", "Europe/Berlin", "America/New_York", "Pacific/Chatham", "Australia/Lord_Howe",
	"Asia/Kathmandu", "America/Santiago", "America/Havana", "Asia/Beirut", "Africa/Cairo",
	"Atlantic/Azores", "America/Goose_Bay", "America/St_Johns", "Asia/Tehran", "Asia/Damascus",
	"America/Lima", "Europe/Dublin", "Antarctica/Troll", "Pacific/Apia", "Pacific/Kwajalein",
	"Pacific/Kiritimati", "America/Juneau", "Asia/Manila",
}

// tilingCalendars are calendars of every unit and the anchors that clamp.
var tilingCalendars = []domain.Calendar{
	daily, weekly, monthly, monthOn(15), monthOn(29), monthOn(30), monthOn(31),
	yearOn(0, 0), yearOn(time.February, 29), yearOn(time.July, 15), yearOn(time.December, 31), yearOn(time.April, 1),
}

// TestCalendarPeriodTiling walks consecutive periods of every calendar in
// every zone and checks, at the period's start, its last nanosecond and a
// random instant inside, that the periods tile time: each starts where the
// one before ends, holds every instant in between, starts at the first
// instant of its local date (the previous instant is on an earlier date),
// on a Monday or on its clamped anchor day, and lasts its dates' length
// give or take the zone's offset change, never more than MaxPeriod.
// Months and years are walked from 1840 to 2045; days and weeks over
// 2026 to 2030 and around every clock change of the zone in that range.
func TestCalendarPeriodTiling(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(2027, 2028))
	from, to := utc(1840, 1, 1, 0, 0), utc(2045, 1, 1, 0, 0)
	for _, name := range tilingZones {
		loc := zone(t, name)
		changes := clockChanges(loc, from, to)
		for _, c := range tilingCalendars {
			c.Location = loc
			label := fmt.Sprintf("%s %s %d/%d", name, c.Unit, c.AnchorMonth, c.AnchorDay)
			if c.Unit == domain.PeriodMonth || c.Unit == domain.PeriodYear {
				walkPeriods(t, label, c, rng, from, to)
				continue
			}
			walkPeriods(t, label, c, rng, utc(2026, 1, 1, 0, 0), utc(2031, 1, 1, 0, 0))
			for _, change := range changes {
				walkPeriods(t, label, c, rng, change.Add(-8*day), change.Add(8*day))
			}
		}
	}
}

// clockChanges returns the instants in [from, to) at which loc's offset
// changes.
func clockChanges(loc *time.Location, from, to time.Time) []time.Time {
	var changes []time.Time
	for at := from.In(loc); at.Before(to); {
		_, end := at.ZoneBounds()
		switch {
		case end.IsZero():
			return changes
		case !end.After(at): // golang/go#81583: look again a day later
			at = at.Add(day)
			continue
		}
		_, before := end.Add(-time.Second).Zone()
		if _, after := end.Zone(); after != before {
			changes = append(changes, end)
		}
		at = end
	}
	return changes
}

// walkPeriods checks the periods of c from the one holding from to the
// one holding to: see TestCalendarPeriodTiling.
func walkPeriods(t *testing.T, label string, c domain.Calendar, rng *rand.Rand, from, to time.Time) {
	t.Helper()
	start, end := c.Period(from)
	if start.After(from) || !from.Before(end) {
		t.Fatalf("%s: Period(%s) = [%s, %s) does not hold it", label, instant(from), instant(start), instant(end))
	}
	for start.Before(to) {
		checkPeriodShape(t, label, c, start, end)
		inside := []time.Time{end.Add(-time.Nanosecond), start.Add(time.Duration(rng.Int64N(int64(end.Sub(start)))))}
		for _, at := range inside {
			if s, e := c.Period(at); !s.Equal(start) || !e.Equal(end) {
				t.Fatalf("%s: Period(%s) = [%s, %s), want [%s, %s)", label, instant(at), instant(s), instant(e), instant(start), instant(end))
			}
		}
		nextStart, nextEnd := c.Period(end)
		if !nextStart.Equal(end) {
			t.Fatalf("%s: period after [%s, %s) starts at %s", label, instant(start), instant(end), instant(nextStart))
		}
		start, end = nextStart, nextEnd
	}
}

// checkPeriodShape checks one period of c in isolation: see
// TestCalendarPeriodTiling.
func checkPeriodShape(t *testing.T, label string, c domain.Calendar, start, end time.Time) {
	t.Helper()
	fail := func(what string) {
		t.Helper()
		t.Fatalf("%s: [%s, %s) %s", label, instant(start), instant(end), what)
	}
	if start.Location() != c.Location || end.Location() != c.Location {
		fail(fmt.Sprintf("not in %v", c.Location))
	}
	startDate, endDate := dateOf(start), dateOf(end)
	if !dateBefore(start).Before(startDate) {
		fail("does not start at the first instant of its date")
	}
	if h, mi, s := start.Clock(); h+mi+s != 0 {
		// Only a jump of the clocks over midnight may start a period
		// after 00:00: the zone changed at that very instant.
		if zoneStart, _ := start.ZoneBounds(); !zoneStart.Equal(start) {
			fail("starts after midnight with no clock change")
		}
	}
	// The date a period is for lies between the date after the instant
	// before it and its own date: they differ when the zone skipped a
	// date. Its end is the first instant of the next period's date.
	first := dateBefore(start).AddDate(0, 0, 1)
	anchored := func(y int, m time.Month) time.Time {
		if m > time.December {
			y, m = y+1, time.January
		}
		return civilDate(y, m, min(max(c.AnchorDay, 1), monthLen(y, m)))
	}
	var from, to time.Time
	for _, date := range []time.Time{startDate, first} {
		y, m, _ := date.Date()
		switch c.Unit {
		case domain.PeriodDay:
			from, to = date, date.AddDate(0, 0, 1)
		case domain.PeriodWeek:
			monday := date.AddDate(0, 0, -int((date.Weekday()+6)%7))
			from, to = monday, monday.AddDate(0, 0, 7)
		case domain.PeriodMonth:
			from, to = anchored(y, m), anchored(y, m+1)
		case domain.PeriodYear:
			am := max(c.AnchorMonth, time.January)
			from, to = anchored(y, am), anchored(y+1, am)
		}
		if !from.Before(first) && !from.After(startDate) {
			break
		}
	}
	if !startsOn(start, from) || !startsOn(end, to) {
		fail("is not from " + from.Format(time.DateOnly) + " to " + to.Format(time.DateOnly))
	}
	if c.Unit == domain.PeriodDay && !dateBefore(end).Equal(startDate) {
		// Its last instant is on its date: it also holds any second
		// pass through the evening before, and the next date may be
		// one the zone skipped.
		fail("is not one date")
	}
	// Offsets differ by less than 26 hours (the date line crossed), and
	// no period may outlast MaxPeriod.
	span := endDate.Sub(startDate)
	if length := end.Sub(start); length < span-26*hour || length > span+26*hour || length > domain.MaxPeriod {
		fail(fmt.Sprintf("lasts %s over %s of dates", length, span))
	}
}

// civilDate returns the date y-m-d as UTC midnight, for comparing dates.
func civilDate(y int, m time.Month, d int) time.Time {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// dateOf returns t's local date as UTC midnight.
func dateOf(t time.Time) time.Time {
	y, m, d := t.Date()
	return civilDate(y, m, d)
}

// dateBefore returns the local date of the instant 1 ns before t.
func dateBefore(t time.Time) time.Time {
	return dateOf(t.Add(-time.Nanosecond))
}

// startsOn reports whether start is the first instant whose local date
// is date or later: on date itself, or on the next date that exists in
// its zone when the zone skipped date.
func startsOn(start, date time.Time) bool {
	return !dateOf(start).Before(date) && dateBefore(start).Before(date)
}

// monthLen returns the number of days in month m of year y, from the
// Gregorian rule.
func monthLen(y int, m time.Month) int {
	switch m {
	case time.February:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case time.April, time.June, time.September, time.November:
		return 30
	}
	return 31
}

// TestCalendarPeriodNilLocationIsUTC checks that a Calendar without a
// Location follows UTC, whatever the process's local zone. It sets
// time.Local, so it does not run in parallel (the parallel tests wait
// until it has finished).
func TestCalendarPeriodNilLocationIsUTC(t *testing.T) {
	saved := time.Local
	t.Cleanup(func() { time.Local = saved })
	time.Local = zone(t, "Pacific/Chatham")
	at := utc(2027, 12, 31, 20, 0) // January 1, 09:45 in Chatham
	for _, c := range []domain.Calendar{daily, weekly, monthly, yearOn(0, 0)} {
		start, end := c.Period(at)
		c.Location = time.UTC
		wantStart, wantEnd := c.Period(at)
		if !start.Equal(wantStart) || !end.Equal(wantEnd) || start.Location() != time.UTC || end.Location() != time.UTC {
			t.Errorf("nil-zone %s Period(%s) = [%s, %s) in %v, want [%s, %s) in UTC", c.Unit, instant(at), instant(start), instant(end), start.Location(), instant(wantStart), instant(wantEnd))
		}
		c.Location = time.Local
		if localStart, _ := c.Period(at); localStart.Equal(start) {
			t.Errorf("%s: the test cannot tell UTC from time.Local (%v)", c.Unit, time.Local)
		}
	}
}

// TestCalendarPeriodOutOfRangeAnchors checks what Period does with the
// anchors Validate refuses: each acts as the nearest valid one.
func TestCalendarPeriodOutOfRangeAnchors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		bad, like domain.Calendar
	}{
		{monthOn(-3), monthOn(1)},
		{monthOn(40), monthOn(31)},
		{yearOn(13, 15), yearOn(time.January, 15)},
		{yearOn(-1, 0), yearOn(time.January, 1)},
		{yearOn(time.February, 99), yearOn(time.February, 29)},
	}
	for _, tt := range tests {
		for _, at := range []time.Time{utc(2027, 1, 10, 0, 0), utc(2028, 2, 29, 12, 0), utc(2028, 4, 30, 0, 0), utc(2029, 12, 31, 0, 0)} {
			start, end := tt.bad.Period(at)
			wantStart, wantEnd := tt.like.Period(at)
			if !start.Equal(wantStart) || !end.Equal(wantEnd) {
				t.Errorf("%+v.Period(%s) = [%s, %s), want [%s, %s) as for %+v", tt.bad, instant(at), instant(start), instant(end), instant(wantStart), instant(wantEnd), tt.like)
			}
		}
	}
}

func TestCalendarPeriodWithoutUnitPanics(t *testing.T) {
	t.Parallel()
	for _, c := range []domain.Calendar{{}, {Unit: 9}} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "Validate") {
					t.Errorf("%+v.Period: recovered %v, want a panic that says to Validate", c, r)
				}
			}()
			c.Period(utc(2027, 1, 1, 0, 0))
		}()
	}
}

// TestCalendarPeriodAllocs checks that Period does not allocate. AllocsPerRun
// may not run in a parallel test.
func TestCalendarPeriodAllocs(t *testing.T) {
	santiago := zone(t, "America/Santiago")
	at := utc(2027, 9, 5, 12, 0)
	for _, c := range tilingCalendars {
		c.Location = santiago
		if n := testing.AllocsPerRun(100, func() { c.Period(at) }); n != 0 {
			t.Errorf("%s Period allocates %v times, want 0", c.Unit, n)
		}
	}
}

func BenchmarkCalendarPeriod(b *testing.B) {
	berlin := zone(b, "Europe/Berlin")
	// Instants spread over a year, so that zone look-ups do not all hit
	// the cache of the current zone.
	ats := make([]time.Time, 1024)
	for i := range ats {
		ats[i] = utc(2027, 1, 1, 0, 0).Add(time.Duration(i) * 8 * hour)
	}
	for _, c := range []domain.Calendar{daily, weekly, monthOn(31), yearOn(time.July, 15)} {
		c.Location = berlin
		b.Run(c.Unit.String(), func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				c.Period(ats[i%len(ats)])
				i++
			}
		})
	}
}
