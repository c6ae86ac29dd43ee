package redis

import (
	"fmt"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// verdict maps a script's reply to the Verdict of req: r[0] is 1 when the
// request was admitted, then per limit ok, remaining, reset and retry
// (µs), and the window (µs; for a concurrency limit, the slots held),
// then per Reserve limit what it spent and its mark, or in a peek its
// reservations in flight. A reply whose verdict disagrees with its own decisions is a
// defect, reported rather than guessed at. The decisions are written
// into dst[:0] when it has room for them.
func verdict(req domain.Request, dst []domain.Decision, r []int64, peek bool) (domain.Verdict, error) {
	n := len(req.Limits)
	if cap(dst) < n {
		dst = make([]domain.Decision, 0, n)
	}
	v := domain.Verdict{Allowed: r[0] == 1, Decisions: dst[:0]}
	shadowDenied := false
	for i, lim := range req.Limits {
		x := r[1+replyStride*i:]
		d := domain.Decision{
			Allowed:    x[0] == 1,
			Limit:      lim.Rule.Limit,
			Remaining:  x[1],
			ResetAfter: usDur(x[2]),
			RetryAfter: usDur(x[3]),
			Window:     usDur(x[4]),
			Shadow:     lim.Shadow,
			Quota:      lim.Quota,
		}
		if lim.Concurrency { // a slot's fifth value is the slots held
			d.Held, d.Window = x[4], 0
		}
		shadowDenied = shadowDenied || (d.Shadow && !d.Allowed)
		v.Decisions = append(v.Decisions, d)
	}
	if rest := r[1+replyStride*n:]; len(rest) > 0 {
		for i, lim := range req.Limits {
			if !lim.Reserve {
				continue
			}
			d := &v.Decisions[i]
			if peek {
				d.Reserved = rest[2]
			} else {
				d.Spent, d.Mark = rest[0], rest[1]
			}
			rest = rest[reserveStride:]
		}
	}
	switch {
	case v.Allowed != domain.Admits(v.Decisions):
		return domain.Verdict{}, fmt.Errorf("redis: %q: the script's verdict %v disagrees with its decisions %v", req.Limits[0].Key, v.Allowed, r)
	case !v.Allowed:
		v.Outcome = domain.OutcomeDenied
	case shadowDenied:
		v.Outcome = domain.OutcomeShadowDenied
	}
	return v, nil
}

func b2i(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// micros returns d in whole µs, at least 1: the scripts' resolution.
func micros(d time.Duration) int64 { return max(int64(d/time.Microsecond), 1) }

// usDur returns n µs as a Duration.
func usDur(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// windowMillis returns window in whole milliseconds, rounded up, at least 1.
func windowMillis(window time.Duration) int64 {
	return max(int64((window+time.Millisecond-1)/time.Millisecond), 1)
}
