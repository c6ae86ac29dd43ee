package redis

import (
	"hash/maphash"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
)

// periods is a calendar's period around an instant and the periods on
// either side, as a calendar limit's script arguments want them: the
// Redis clock picks one of the three (lua/prelude.lua). It is immutable.
type periods struct {
	id     calendarID
	bounds [3][2]time.Time // {start, end} of the previous, current and next period
	// args are the previous, current and next periods' starts and the
	// next one's end in ms, boxed once for every decision in the period.
	args [4]any
}

// periodCache holds the periods of recent calendars: computing them
// takes a few time.Date calls in the calendar's zone, once per period
// instead of once per decision. A slot holds one calendar; calendars that
// share a slot take turns. Calendars are told apart by their zone's name,
// not its pointer: two loads of one zone are one calendar.
var (
	periodCache [256]atomic.Pointer[periods]
	periodSeed  = maphash.MakeSeed()
)

// calendarID is what tells calendars apart in periodCache.
type calendarID struct {
	unit        domain.PeriodUnit
	anchorDay   int
	anchorMonth time.Month
	zone        string
}

func idOf(c domain.Calendar) calendarID {
	zone := "UTC"
	if c.Location != nil {
		zone = c.Location.String()
	}
	return calendarID{c.Unit, c.AnchorDay, c.AnchorMonth, zone}
}

// periodsAround returns cal's periods around now.
func periodsAround(cal domain.Calendar, now time.Time) *periods {
	id := idOf(cal)
	slot := &periodCache[maphash.Comparable(periodSeed, id)%uint64(len(periodCache))]
	if p := slot.Load(); p != nil && p.id == id && !now.Before(p.bounds[1][0]) && now.Before(p.bounds[1][1]) {
		return p
	}
	p := newPeriods(cal, now)
	slot.Store(p)
	return p
}

// newPeriods computes cal's periods around now.
func newPeriods(cal domain.Calendar, now time.Time) *periods {
	s1, e1 := cal.Period(now)
	s0, _ := cal.Period(s1.Add(-time.Nanosecond))
	_, e2 := cal.Period(e1)
	p := &periods{id: idOf(cal), bounds: [3][2]time.Time{{s0, s1}, {s1, e1}, {e1, e2}}}
	for i, ms := range [...]int64{s0.UnixMilli(), s1.UnixMilli(), e1.UnixMilli(), e2.UnixMilli()} {
		p.args[i] = ms
	}
	return p
}

// keys returns the previous, current and next periods' keys of a limit
// whose key is base ([keys.PeriodKey]), in one allocation.
func (p *periods) keys(base string) (prev, cur, next string) {
	var room [256]byte
	b := room[:0]
	var ends [3]int
	for i, bound := range p.bounds {
		b = keys.AppendPeriodKey(b, base, bound[0])
		ends[i] = len(b)
	}
	all := string(b)
	return all[:ends[0]], all[ends[0]:ends[1]], all[ends[1]:]
}
