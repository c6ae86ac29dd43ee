package domain

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidCalendar reports a calendar period that [ParsePeriodUnit] or
// [Calendar.Validate] refuses: an unknown or missing unit, or an anchor
// outside its range or given for a unit that has none.
var ErrInvalidCalendar = errors.New("invalid calendar")

// PeriodUnit is the length of a calendar period. The zero value is no
// unit, which no valid [Calendar] has.
type PeriodUnit uint8

// The calendar period units.
const (
	// PeriodDay runs from one local midnight to the next.
	PeriodDay PeriodUnit = iota + 1
	// PeriodWeek runs from Monday 00:00 local time to the next Monday.
	PeriodWeek
	// PeriodMonth runs from the anchor day of one month to that of the next.
	PeriodMonth
	// PeriodYear runs from the anchor day of the anchor month to the same
	// day a year later.
	PeriodYear
)

// periodNames maps each unit to its name in configuration; index 0 is
// the zero unit.
var periodNames = [...]string{"none", "day", "week", "month", "year"}

// ParsePeriodUnit returns the unit named s: "day", "week", "month" or
// "year", in lower case. Any other string is an error wrapping
// [ErrInvalidCalendar].
func ParsePeriodUnit(s string) (PeriodUnit, error) {
	for u := PeriodDay; u <= PeriodYear; u++ {
		if periodNames[u] == s {
			return u, nil
		}
	}
	return 0, fmt.Errorf("%w: period=%q, want day, week, month or year", ErrInvalidCalendar, s)
}

// String returns the unit's name in configuration ("day", "week", "month",
// "year"), "none" for the zero unit and PeriodUnit(n) for any other value.
func (u PeriodUnit) String() string {
	if int(u) < len(periodNames) {
		return periodNames[u]
	}
	return fmt.Sprintf("PeriodUnit(%d)", uint8(u))
}

// MaxPeriod is the longest period a [Calendar] can have, for bounds such
// as a counter's time to live: a leap year plus a day of slack for the
// offset changes inside it. Measured over every zone of Go's tz database
// and every unit and anchor from 1840 to 2100, the longest periods are
// exactly this long: the years that hold a date twice because their zone
// crossed the date line (Alaska's 1867, Pacific/Apia's 1892). Since 1970
// the longest is 366 days and 3 hours (Antarctica/Casey's 2012), the
// longest day 31 hours (Antarctica/Vostok, 1994-01-31).
const MaxPeriod = 367 * 24 * time.Hour

// maxZoneOffset bounds the offset from UTC of every zone a Location may
// switch between. The tz database's extremes are −15:56:08 (Asia/Manila,
// local mean time until 1844) and +15:13:42 (America/Metlakatla, until
// 1867).
const maxZoneOffset = secondsPerDay

// Calendar is a calendar period: a unit, the time zone its days follow
// and, for months and years, the day (and month) each period starts on.
// The zero Location means UTC: the process's local zone is never used.
//
// A period starts on its anchored day at 00:00 local time. A month or a
// year anchored on a day the month lacks (29, 30 or 31) starts on the
// month's last day instead and returns to the anchor day in the next month
// that has it: anchor 31 gives Jan 31, Feb 28 (29 in a leap year), Mar 31,
// Apr 30, May 31. Period lengths are real: a Berlin day with the autumn
// clock change lasts 25 hours, a February 28 or 29 days.
//
// When a zone's clocks jump over that midnight (a clock change at 00:00,
// as in America/Santiago, America/Havana or Asia/Beirut in spring), the
// period starts at the first instant that exists on that day, the moment
// of the jump (01:00 local time in those zones). When midnight happens
// twice (clocks set back from 01:00 to 00:00, as in America/Havana in
// autumn), the period starts at the first one. In both cases the start is
// the first instant whose local clock reads the anchored day or later;
// [time.Date], whose choice in a gap or an overlap is unspecified, is
// never trusted with it: it returns 23:00 of the previous day for
// Santiago's skipped midnight of September 5, 2027, and the second of
// Berlin's two midnights of October 1, 1916. A day the zone skipped
// entirely (Pacific/Apia's December 30, 2011) has no period: the one
// before it ends where the one after it starts, and a month anchored on
// it starts with the next day.
//
// A Calendar is a value; it is safe for concurrent use by multiple
// goroutines.
type Calendar struct {
	// Unit is the period's length. The zero unit is invalid.
	Unit PeriodUnit
	// Location is the time zone whose local days the periods follow. Nil
	// means UTC. Loading a zone ([time.LoadLocation]) is the caller's job.
	Location *time.Location
	// AnchorDay is the day of the month a month or year period starts on,
	// 1 to 31, clamped to the month's last day; 0 means 1. It must be 0
	// for a day or a week.
	AnchorDay int
	// AnchorMonth is the month a year period starts in, January to
	// December; 0 means January. It must be 0 for any other unit.
	AnchorMonth time.Month
}

// Validate returns an error wrapping [ErrInvalidCalendar], naming each
// bad field and its value, if c has no unit or an unknown one, an
// AnchorDay outside 0 to 31 or set for a day or a week, or an AnchorMonth
// outside 0 to 12 or set for anything but a year.
func (c Calendar) Validate() error {
	var errs []error
	switch c.Unit {
	case PeriodDay, PeriodWeek, PeriodMonth, PeriodYear:
	case 0:
		return fmt.Errorf("%w: no period unit", ErrInvalidCalendar)
	default:
		return fmt.Errorf("%w: period=%s, want day, week, month or year", ErrInvalidCalendar, c.Unit)
	}
	if c.Unit == PeriodDay || c.Unit == PeriodWeek {
		if c.AnchorDay != 0 {
			errs = append(errs, fmt.Errorf("%w: anchor_day=%d on a %s period, want none (months and years only)", ErrInvalidCalendar, c.AnchorDay, c.Unit))
		}
	} else if c.AnchorDay < 0 || c.AnchorDay > 31 {
		errs = append(errs, fmt.Errorf("%w: anchor_day=%d, want 1 to 31", ErrInvalidCalendar, c.AnchorDay))
	}
	if c.Unit != PeriodYear {
		if c.AnchorMonth != 0 {
			errs = append(errs, fmt.Errorf("%w: anchor_month=%d on a %s period, want none (years only)", ErrInvalidCalendar, int(c.AnchorMonth), c.Unit))
		}
	} else if c.AnchorMonth < 0 || c.AnchorMonth > time.December {
		errs = append(errs, fmt.Errorf("%w: anchor_month=%d, want 1 to 12", ErrInvalidCalendar, int(c.AnchorMonth)))
	}
	return errors.Join(errs...)
}

// Period returns the period that holds t: start ≤ t < end, both in c's
// zone. The end of a period is exactly the start of the next, so
// consecutive periods tile time with no gap and no overlap: an instant at
// a boundary belongs to the period it starts. The length end−start is the
// real one, clock changes included.
//
// The period is found from t's local date, then moved on while t is at or
// after its end: when clocks are set back across midnight (00:01 to 23:01
// the day before, America/St_Johns until 2011), the second pass through
// the evening belongs to the day that began at the first midnight.
//
// Period does not allocate. It is meant for a Calendar that
// [Calendar.Validate] accepts: an AnchorDay below 1 counts as 1 and one
// above 31 as the month's last day, an AnchorMonth outside January to
// December counts as January, and it panics when c has no known unit, a
// programming error.
func (c Calendar) Period(t time.Time) (start, end time.Time) {
	loc := c.Location
	if loc == nil {
		loc = time.UTC
	}
	lt := t.In(loc)
	y, m, d := lt.Date()
	first := c.first(civil{y, m, d}, lt.Weekday())
	start = firstInstant(first, loc)
	for {
		next := c.next(first)
		end = firstInstant(next, loc)
		if t.Before(end) {
			return start, end
		}
		first, start = next, end
	}
}

// civil is a date on the proleptic Gregorian calendar, with no zone.
type civil struct {
	y int
	m time.Month
	d int
}

// addDays returns the date n days after c.
func (c civil) addDays(n int) civil {
	y, m, d := time.Date(c.y, c.m, c.d+n, 0, 0, 0, 0, time.UTC).Date()
	return civil{y, m, d}
}

// before reports whether c is earlier than o.
func (c civil) before(o civil) bool {
	if c.y != o.y {
		return c.y < o.y
	}
	if c.m != o.m {
		return c.m < o.m
	}
	return c.d < o.d
}

// daysIn returns the number of days in month m of year y.
func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// anchored returns the day a month or year period starts on in month m
// of year y: the anchor day, or the month's last day when the month is
// shorter.
func (c Calendar) anchored(y int, m time.Month) civil {
	return civil{y, m, min(max(c.AnchorDay, 1), daysIn(y, m))}
}

// anchorMonth returns the month a year period starts in.
func (c Calendar) anchorMonth() time.Month {
	if c.AnchorMonth < time.January || c.AnchorMonth > time.December {
		return time.January
	}
	return c.AnchorMonth
}

// first returns the date the period holding the local date day starts on;
// wd is day's weekday.
func (c Calendar) first(day civil, wd time.Weekday) civil {
	switch c.Unit {
	case PeriodDay:
		return day
	case PeriodWeek:
		return day.addDays(-int((wd + 6) % 7))
	case PeriodMonth:
		if a := c.anchored(day.y, day.m); !day.before(a) {
			return a
		}
		if day.m == time.January {
			return c.anchored(day.y-1, time.December)
		}
		return c.anchored(day.y, day.m-1)
	case PeriodYear:
		if a := c.anchored(day.y, c.anchorMonth()); !day.before(a) {
			return a
		}
		return c.anchored(day.y-1, c.anchorMonth())
	}
	panic(fmt.Sprintf("domain: Calendar.Period with period=%s; Validate the Calendar first", c.Unit))
}

// next returns the date the period after the one starting on first
// starts on.
func (c Calendar) next(first civil) civil {
	switch c.Unit {
	case PeriodDay:
		return first.addDays(1)
	case PeriodWeek:
		return first.addDays(7)
	case PeriodMonth:
		if first.m == time.December {
			return c.anchored(first.y+1, time.January)
		}
		return c.anchored(first.y, first.m+1)
	default: // PeriodYear: first has already refused any other unit.
		return c.anchored(first.y+1, c.anchorMonth())
	}
}

// firstInstant returns the first instant whose local clock in loc reads
// day at 00:00 or later: day's local midnight, the earlier one when
// midnight happens twice, or the moment the clocks jump over it when it
// does not exist.
//
// It walks loc's zones (the spans between clock changes) from a day
// before that midnight: within a zone of offset o, the first such instant
// is midnight−o, or the zone's start if that is later; the first zone
// where it falls before the zone's end holds the answer. Go's own
// normalisation in time.Date is unspecified in gaps and overlaps.
func firstInstant(day civil, loc *time.Location) time.Time {
	midnight := time.Date(day.y, day.m, day.d, 0, 0, 0, 0, time.UTC).Unix()
	probe := midnight - maxZoneOffset
	for {
		zone := time.Unix(probe, 0).In(loc)
		_, offset := zone.Zone()
		zoneStart, zoneEnd := zone.ZoneBounds()
		// A zone that began at the beginning of time starts at the zero
		// Time, far before any midnight: max keeps midnight−offset.
		at := max(midnight-int64(offset), zoneStart.Unix())
		if zoneEnd.IsZero() { // the zone goes on forever
			return time.Unix(at, 0).In(loc)
		}
		end := zoneEnd.Unix()
		if end <= probe {
			// On the last UTC day of a leap year served by a zone's
			// footer rule (after its last listed clock change),
			// ZoneBounds reports an end a day early, before the
			// instant itself (golang/go#81583). The offset is right,
			// and the clocks do not change before the next year
			// starts, at the next UTC midnight.
			end = probe - (probe%secondsPerDay+secondsPerDay)%secondsPerDay + secondsPerDay
		}
		if at < end {
			return time.Unix(at, 0).In(loc)
		}
		probe = end
	}
}

// secondsPerDay is the length of a UTC day.
const secondsPerDay = 24 * 60 * 60
