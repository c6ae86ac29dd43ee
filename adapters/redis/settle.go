package redis

import (
	"context"

	"github.com/tollgate/tollgate/domain"
)

// Settle implements [ports.Settler] in one round trip: the algorithm's
// script in settlement mode over req's Reserve limits, each spending
// used − adm[i].Spent more where adm[i].Mark counted (its window's end,
// period's start, window's start, entry's instant or the TAT its
// admission left, on Redis's clock), or nothing once that has ended, and
// its reservation taken out of those in flight (keys.Reserved). Marks
// are Redis's, so any replica settles what another admitted. A Reserve
// limit whose admission spent nothing ([domain.NoMark]) is left alone,
// and without one to settle Settle sends nothing. The script is never
// resent ([conn.Client]), so a settlement lands at most once.
func (l *Limiter) Settle(ctx context.Context, req domain.Request, adm []domain.Decision, used int64) error {
	var lbuf [8]domain.Limit
	var abuf [8]domain.Decision
	limits, marks := lbuf[:0], abuf[:0]
	for i, lim := range req.Limits {
		if !lim.Reserve {
			continue
		}
		var d domain.Decision
		if i < len(adm) {
			d = adm[i]
		}
		if d.Mark < 0 || (d.Mark == 0 && d.Spent == 0 && used <= 0) {
			continue
		}
		limits, marks = append(limits, lim), append(marks, domain.Decision{Spent: d.Spent, Mark: d.Mark})
	}
	if len(limits) == 0 {
		return nil
	}
	if l.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, l.opts.Timeout)
		defer cancel()
	}
	req.Limits = limits
	c := call{req: req, spec: l.spec, shape: shapeOf(req, l.spec), mode: modeSettle, aligned: l.aligned, now: l.now(),
		adm: marks, used: max(used, 0)}
	b := c.encode()
	_, reusable, err := runArgs(ctx, l.spec.script, l.client, b, 1)
	if reusable {
		putArgs(b)
	}
	return err
}
