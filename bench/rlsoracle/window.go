package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
)

// settle is how far past a window boundary a scenario starts, so that a
// server whose clock reads a hair behind ours is in the new window too.
const settle = 20 * time.Millisecond

// Units returns the window lengths, in seconds and sorted, that a
// scenario's requests count in: for each descriptor its limit override's
// unit, else the unit of the rule the configuration gives it (nothing for an
// unknown domain, an unmatched descriptor or an unlimited rule).
func Units(s Scenario, cfg *rlsconf.Config) []int64 {
	var units []int64
	for _, st := range s.Steps {
		for _, d := range st.Descriptors {
			var u int64
			if d.Limit != nil {
				u = overrideSeconds(d.Limit.Unit)
			} else if r, _ := cfg.Match(st.Domain, entriesOf(d)); r != nil {
				u = r.Unit.Seconds()
			}
			if u > 0 && !slices.Contains(units, u) {
				units = append(units, u)
			}
		}
	}
	slices.Sort(units)
	return units
}

// overrideSeconds is the length of an override's unit (SECOND…YEAR).
func overrideSeconds(unit string) int64 {
	for u := rlsconf.Second; u <= rlsconf.Year; u++ {
		if strings.EqualFold(u.String(), unit) {
			return u.Seconds()
		}
	}
	return 0
}

// entriesOf converts a descriptor's "key=value" entries.
func entriesOf(d Descriptor) []rlsconf.Entry {
	es := make([]rlsconf.Entry, 0, len(d.Entries))
	for _, e := range d.Entries {
		k, v, _ := strings.Cut(e, "=")
		es = append(es, rlsconf.Entry{Key: k, Value: v})
	}
	return es
}

// Wait returns how long to sleep from now before a scenario expected to
// last need, so that it ends at least margin before the end of the current
// window of every unit (windows are [k·u, (k+1)·u) in unix seconds, as
// envoyproxy/ratelimit aligns them). When the scenario would run too close
// to a window's end, the wait reaches the next boundary of that unit plus
// settle; every longer unit's boundary is also a boundary of the shorter
// ones, so the first start that fits is found in a few steps. It fails when
// need+margin exceeds the shortest unit: no start can fit.
func Wait(now time.Time, units []int64, need, margin time.Duration) (time.Duration, error) {
	if len(units) == 0 {
		return 0, nil
	}
	if shortest := time.Duration(units[0]) * time.Second; need+margin >= shortest {
		return 0, fmt.Errorf("expected to take %v, longer than its %v window allows", need+margin, shortest)
	}
	start := now
	for moved := true; moved; {
		moved = false
		for _, u := range units {
			if end := windowEnd(start, u); start.Add(need + margin).After(end) {
				start = end.Add(settle)
				moved = true
			}
		}
	}
	return start.Sub(now), nil
}

// windowEnd is the end of the window of u seconds that t falls in.
func windowEnd(t time.Time, u int64) time.Time {
	return time.Unix((t.Unix()/u+1)*u, 0)
}

// Straddled returns the first unit whose window changed between start and
// end, or 0.
func Straddled(start, end time.Time, units []int64) int64 {
	for _, u := range units {
		if start.Unix()/u != end.Unix()/u {
			return u
		}
	}
	return 0
}
