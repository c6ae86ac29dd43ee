package app

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	_ "time/tzdata" // the time-zone database in the binary: calendar limits work in a container without one

	"github.com/tollgate/tollgate/domain"
)

// calendarFields are the fields that make a limit a calendar quota, in
// the policy file (period and its options) and in a tenant's override
// (the options alone). The files' entries carry them as fields of their
// own (strict decoding reads no embedded struct).
type calendarFields struct {
	Period      *string // day, week, month, year
	Timezone    *string // an IANA zone; default UTC
	AnchorDay   *int    // month and year: 1 to 31; default 1
	AnchorMonth *int    // year: 1 to 12; default 1
}

// options reports whether f gives any option of a calendar period.
func (f calendarFields) options() bool {
	return f.Timezone != nil || f.AnchorDay != nil || f.AnchorMonth != nil
}

// calendar returns the calendar f describes: its period, with its
// options over base's (a policy limit's calendar, when f is a tenant's
// override of it; nil for a new one). Every problem is reported.
func (f calendarFields) calendar(base *domain.Calendar) (*domain.Calendar, error) {
	var cal domain.Calendar
	if base != nil {
		cal = *base
	}
	var errs []error
	if f.Period != nil {
		u, err := domain.ParsePeriodUnit(*f.Period)
		if err != nil {
			errs = append(errs, fmt.Errorf("period %q: want day, week, month or year", *f.Period))
		}
		cal.Unit = u
	}
	if f.Timezone != nil {
		loc, err := loadZone(*f.Timezone)
		switch {
		case *f.Timezone == "" || *f.Timezone == "Local" || hostOnlyZone(*f.Timezone):
			errs = append(errs, fmt.Errorf("timezone %q: want an IANA zone such as \"Europe/Berlin\" or \"UTC\"", *f.Timezone))
		case err != nil:
			errs = append(errs, fmt.Errorf("timezone %q: not in the time-zone database: want an IANA zone such as \"Europe/Berlin\"", *f.Timezone))
		default:
			cal.Location = loc
		}
	}
	if f.AnchorDay != nil {
		cal.AnchorDay = *f.AnchorDay
		if *f.AnchorDay < 1 {
			errs = append(errs, fmt.Errorf("anchor_day %d: want 1 to 31", *f.AnchorDay))
		}
	}
	if f.AnchorMonth != nil {
		cal.AnchorMonth = time.Month(*f.AnchorMonth)
		if *f.AnchorMonth < 1 {
			errs = append(errs, fmt.Errorf("anchor_month %d: want 1 to 12", *f.AnchorMonth))
		}
	}
	if len(errs) == 0 {
		if err := cal.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &cal, nil
}

// zones holds the zones loaded, by name: a tenants file whose every
// tenant names a zone shares one *time.Location per zone (each is
// kilobytes of rules), and stores that cache by calendar see one.
var zones sync.Map // string → *time.Location

// hostOnlyZone reports whether name is a file of the host's zoneinfo
// that is no IANA zone: the host's own zone (localtime, and posixrules,
// a copy of one), Factory, and the posix/ and right/ trees (right/ counts
// leap seconds: its days end seconds early), and a name spelt as a path
// (./Europe/Berlin, Europe//Berlin). The embedded database holds none of
// them, so a replica in a container without zoneinfo would
// refuse what another accepts, or count another day.
func hostOnlyZone(name string) bool {
	switch name {
	case "localtime", "posixrules", "Factory":
		return true
	}
	for seg := range strings.SplitSeq(name, "/") {
		if seg == "" || seg == "." { // ./Europe/Berlin, Europe//Berlin: a file path, not a name
			return true
		}
	}
	return strings.HasPrefix(name, "posix/") || strings.HasPrefix(name, "right/")
}

// loadZone is time.LoadLocation through zones.
func loadZone(name string) (*time.Location, error) {
	if loc, ok := zones.Load(name); ok {
		return loc.(*time.Location), nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, err
	}
	actual, _ := zones.LoadOrStore(name, loc)
	return actual.(*time.Location), nil
}
