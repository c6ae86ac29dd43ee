package watch

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate/tollgate/internal/topk"
)

// Top is the fleet's answer about who is being limited.
type Top struct {
	// Window is how far back it covers: the current minute of the clock
	// and the whole minutes before it, at least Window and less than
	// Window plus a minute.
	Window time.Duration
	// Replicas is how many replicas it merges (this one included);
	// Partial says why the other replicas are missing, when the board
	// could not be read ("" otherwise).
	Replicas int
	Partial  string
	// Limits are the limits that denied anyone in the window, by name.
	Limits []LimitTop
	// Series are the fleet's decisions of each of the last seconds,
	// oldest first (a replica's posted ones lag by up to a post).
	Series []Second
}

// LimitTop is one limit's most denied tenants.
type LimitTop struct {
	Limit string
	// Denied is every denial the limit made in the window.
	Denied int64
	// Tenants are at most Top tenants, the most denied first.
	Tenants []TenantTop
}

// TenantTop is one tenant's denials on one limit: at least DeniedMin,
// at most Denied (equal when every sketch counted it exactly), and the
// requests the limit admitted while the sketches watched the tenant.
type TenantTop struct {
	Tenant            string
	Denied, DeniedMin int64
	Allowed           int64
}

// ValidWindow reports whether Top answers for window: whole minutes,
// from one to MaxWindow.
func ValidWindow(window time.Duration) bool {
	return window >= Slot && window <= MaxWindow && window%Slot == 0
}

// Top returns the tenants denied most on each limit over window (see
// [ValidWindow]) on every replica: this one's sketches and, with a
// board, the other replicas' last posts. A board that fails makes a
// partial answer, never an error; the error is ctx's only.
func (w *Watch) Top(ctx context.Context, window time.Duration) (Top, error) {
	if !ValidWindow(window) {
		return Top{}, fmt.Errorf("watch: window %s: want whole minutes from 1m to %s", window, MaxWindow)
	}
	now := w.opts.Now()
	minute := minuteOf(now)
	n := int(window / Slot)
	byLimit := map[string][]topk.Summary{}
	for name, ms := range w.minutes(minute, n+1, 0) {
		for _, m := range ms {
			byLimit[name] = append(byLimit[name], m.Summary)
		}
	}
	top := Top{Window: window, Replicas: 1}
	series := map[int64]Second{}
	for _, s := range w.Series() {
		series[s.Time] = s
	}
	if w.opts.Board != nil {
		posts, err := w.opts.Board.Posts(ctx)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return Top{}, ctxErr
		}
		if err != nil {
			top.Partial = "the other replicas' sketches could not be read: " + err.Error()
		}
		for replica, data := range posts {
			if replica == w.opts.Replica {
				continue // this replica's own, fresher, are above
			}
			var p post
			if json.Unmarshal(data, &p) != nil {
				continue
			}
			top.Replicas++
			for name, ms := range p.Limits {
				for _, m := range ms {
					if m.Minute > minute-int64(n+1) && m.Minute <= minute {
						byLimit[name] = append(byLimit[name], m.Summary)
					}
				}
			}
			for _, s := range p.Series {
				t := series[s.Time]
				t.Time, t.Allowed, t.Denied = s.Time, t.Allowed+s.Allowed, t.Denied+s.Denied
				series[s.Time] = t
			}
		}
	}
	for name, sums := range byLimit {
		lt := LimitTop{Limit: name}
		for _, s := range sums {
			lt.Denied += s.N
		}
		for _, e := range topk.Merge(sums, w.opts.Top) {
			lt.Tenants = append(lt.Tenants, TenantTop{Tenant: e.Item, Denied: e.Upper, DeniedMin: e.Lower, Allowed: e.Allowed})
		}
		top.Limits = append(top.Limits, lt)
	}
	slices.SortFunc(top.Limits, func(a, b LimitTop) int { return cmp.Compare(a.Limit, b.Limit) })
	for _, s := range series {
		if s.Time > now.Unix()-SeriesLen {
			top.Series = append(top.Series, s)
		}
	}
	slices.SortFunc(top.Series, func(a, b Second) int { return cmp.Compare(a.Time, b.Time) })
	return top, nil
}

// MemoryBound is the most memory, in bytes, the sketches of limits
// limits take with top tenants kept each: per limit, Shards shards of
// top counters for each of the minutes kept, each counter
// with its entry in an index and its tenant id (at most
// [domain.MaxTenantIDLen] bytes; a subject of unresolved traffic is
// shorter).
func MemoryBound(top, limits int) int64 {
	const perCounter = 40 + // topk.Counter
		28 + // its key, its position and its place in the heap
		64 + // the tenant id it holds
		84 // its index entry and the map's room for growth
	return int64(limits) * int64(slots) * Shards * int64(top) * perCounter
}
