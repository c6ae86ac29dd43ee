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

// Reserve spends cost units at now as [PeriodWindow.Spend] does, and
// returns the mark of the period they counted in ([Decision.Mark]): its
// start, Unix nanoseconds.
func (p *PeriodWindow) Reserve(now time.Time, cal Calendar, cost int64) int64 {
	p.Spend(now, cal, cost)
	return p.start
}

// Adjust settles delta units (negative: given back) in the period whose
// mark is mark, at now: while it is the period of now, its count moves
// by delta (never below zero; past the limit when delta takes it
// there), and once it has ended, nothing changes. A mark of 0 charges
// delta in the period of now.
func (p *PeriodWindow) Adjust(now time.Time, cal Calendar, mark, delta int64) {
	if mark == 0 {
		if delta > 0 {
			p.Spend(now, cal, delta)
		}
		return
	}
	if p.Live(now, cal, mark) {
		p.count = max(p.count+delta, 0)
	}
}

// Live reports whether the period whose mark is mark is the period of
// now.
func (p *PeriodWindow) Live(now time.Time, cal Calendar, mark int64) bool {
	t := now.UnixNano()
	return mark != 0 && p.start == mark && t >= p.start && t < p.end
}
