package domain

import "time"

// PeriodWindow is one key's state of a calendar limit: a fixed window
// over the calendar period that holds the request, whatever the store's
// algorithm: the count of the current period and the period's bounds. A
// request of cost units is admitted when the period's count plus the cost
// is at most the limit; the budget is whole again when the period ends.
//
// The zero value holds no period. A PeriodWindow is not safe for
// concurrent use.
type PeriodWindow struct {
	start, end int64 // Unix nanoseconds: the period counted
	count      int64
}

// Decide decides a request of cost units arriving at now against limit
// per period of cal, without counting it: [PeriodWindow.Spend] does. The
// decision's Window is the period's real length (a Berlin day of the
// autumn clock change is 25 h, February 28 or 29 days); ResetAfter is the
// time to the period's end, and so is a denial's RetryAfter. A cost above
// the limit is never admitted. It does not allocate.
func (p *PeriodWindow) Decide(now time.Time, cal Calendar, limit, cost int64) Decision {
	start, end := cal.Period(now)
	count := p.count
	if p.start != start.UnixNano() {
		count = 0 // a finished period is never read again
	}
	d := Decision{Limit: limit, Remaining: max(limit-count, 0), Window: end.Sub(start)}
	if cost == 0 && count == 0 {
		return d.allowed()
	}
	d.ResetAfter = end.Sub(now)
	if count+cost <= limit {
		d.Allowed, d.Remaining = true, limit-count-cost
	} else {
		d.RetryAfter = d.ResetAfter
	}
	return d
}

// allowed is d admitted with nothing spent and nothing to reset.
func (d Decision) allowed() Decision {
	d.Allowed = true
	return d
}

// Spend counts cost units at now in the period of cal that holds now.
func (p *PeriodWindow) Spend(now time.Time, cal Calendar, cost int64) {
	start, end := cal.Period(now)
	if s := start.UnixNano(); s != p.start {
		p.start, p.end, p.count = s, end.UnixNano(), 0
	}
	p.count += cost
}

// NominalWindow is the window a calendar limit's Rule carries: the
// longest its unit's period can be (a day 31 h, a week 8 days, a month 32
// days, a year MaxPeriod). Stores that sweep by window use it; decisions
// report the real period ([Decision.Window]).
func NominalWindow(u PeriodUnit) time.Duration {
	switch u {
	case PeriodDay:
		return 31 * time.Hour
	case PeriodWeek:
		return 8 * 24 * time.Hour
	case PeriodMonth:
		return 32 * 24 * time.Hour
	}
	return MaxPeriod
}
