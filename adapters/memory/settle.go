package memory

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// reserve spends d.Spent from Reserve limit lim on e at now, sets d.Mark
// where it counted, and counts it in flight. It requires e.mu held.
func (l *limiter[S, P]) reserve(e *limiterEntry[S], now time.Time, lim domain.Limit, d *domain.Decision) {
	var mark int64
	if cal := lim.Calendar; cal != nil {
		mark = e.extra().period.Reserve(now, *cal, d.Spent)
	} else {
		mark = P(&e.state).Reserve(now, lim.Rule, l.Windows, d.Spent)
	}
	if mark == 0 { // nothing logged: a sliding log spent while it denied
		d.Mark = domain.NoMark
		return
	}
	d.Mark = mark
	x := e.extra()
	if x.reserved == nil {
		x.reserved = make(map[int64]int64)
	}
	if _, ok := x.reserved[mark]; !ok && len(x.reserved) >= max(x.pruneAt, 8) {
		for m := range x.reserved {
			if !l.live(e, now, lim, m) {
				delete(x.reserved, m) // its window ended: a request that never settled
			}
		}
		x.pruneAt = 2 * len(x.reserved)
	}
	x.reserved[mark] += d.Spent
}

// live reports whether lim's window, period or entry of mark still counts
// on e at now. It requires e.mu held.
func (l *limiter[S, P]) live(e *limiterEntry[S], now time.Time, lim domain.Limit, mark int64) bool {
	if cal := lim.Calendar; cal != nil {
		return e.extra().period.Live(now, *cal, mark)
	}
	return P(&e.state).Live(now, lim.Rule, l.Windows, mark)
}

// reservedOf returns the units of lim's reservations in flight on e
// whose window, period or entry still counts at now. It requires e.mu
// held.
func (l *limiter[S, P]) reservedOf(e *limiterEntry[S], now time.Time, lim domain.Limit) int64 {
	if e.more == nil {
		return 0
	}
	var sum int64
	for m, n := range e.more.reserved {
		if l.live(e, now, lim, m) {
			sum += n
		}
	}
	return sum
}

// Settle implements [ports.Settler]: each Reserve limit's key, locked
// alone, spends used − adm[i].Spent more where adm[i].Mark counted (the
// domain state's Adjust), and the reservation is no longer in flight. A
// key the store no longer holds (swept once its budget was whole, or
// reset) is left alone: the window it counted in has ended. A zero
// adm[i] charges used now, creating the key if need be ([ErrFull] when
// the store has no room for it). A Reserve limit whose admission spent
// nothing (Mark [domain.NoMark]) is left alone.
func (l *limiter[S, P]) Settle(_ context.Context, req domain.Request, adm []domain.Decision, used int64) error {
	if len(req.Limits) > maxLimits {
		return errTooManyLimits
	}
	used = max(used, 0)
	for i, lim := range req.Limits {
		if !lim.Reserve {
			continue
		}
		var d domain.Decision
		if i < len(adm) {
			d = adm[i]
		}
		if d.Mark < 0 {
			continue
		}
		if err := l.settle(&req, i, d, used); err != nil {
			return err
		}
	}
	return nil
}

// settle settles Reserve limit i of req, admitted as d.
func (l *limiter[S, P]) settle(req *domain.Request, i int, d domain.Decision, used int64) error {
	lim := req.Limits[i]
	report := d.Mark == 0 && d.Spent == 0
	if report && used == 0 {
		return nil
	}
	for {
		var e *limiterEntry[S]
		if report {
			var err error
			if e, err = l.entry(req, i); err != nil {
				return err
			}
		} else {
			v, ok := l.keys.Load(lim.Key)
			if !ok {
				return nil
			}
			e = v.(*limiterEntry[S])
		}
		e.mu.Lock()
		if e.idleAt == swept {
			e.mu.Unlock()
			if !report {
				return nil
			}
			if l.keys.CompareAndDelete(lim.Key, e) {
				l.forget(lim.Key)
			}
			continue
		}
		now, nanos := l.clock.read()
		mark, delta := d.Mark, used-d.Spent
		if report {
			mark, delta = 0, used
		}
		if cal := lim.Calendar; cal != nil {
			e.extra().period.Adjust(now, *cal, mark, delta)
		} else {
			P(&e.state).Adjust(now, lim.Rule, l.Windows, mark, delta)
		}
		if e.more != nil && !report {
			if left := e.more.reserved[mark] - d.Spent; left > 0 {
				e.more.reserved[mark] = left
			} else {
				delete(e.more.reserved, mark)
			}
		}
		if e.idleAt != neverIdle {
			after := l.decide(e, now, &lim, 0)
			e.idleAt = max(e.idleAt, nanos+int64(max(after.ResetAfter, after.RetryAfter)))
		}
		e.mu.Unlock()
		return nil
	}
}
