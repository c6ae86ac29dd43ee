package portstest

import (
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// CalendarHarness is what [TestCalendarBoundary] needs of a store.
type CalendarHarness struct {
	// New returns the Limiter under test, empty of the keys the test
	// uses (they are unique per run).
	New func(t *testing.T) ports.Limiter
	// Now reads the store's clock: a fake clock's, or a real store's own
	// (Redis's TIME).
	Now func() time.Time
	// Until brings the store's clock to at for the next decision: a fake
	// clock is set to at; a real store is waited for, so that a decision
	// sent next reaches it at about at.
	Until func(at time.Time)
	// Slack is how far from the instant Until was given a real store may
	// decide (round trips, scheduling). Zero for a fake clock, which
	// makes every check exact.
	Slack time.Duration
	// ExpireAt, if set, returns when the store's key expires (Redis:
	// PEXPIRETIME), and false for a key that does not exist or has no
	// expiry. A store that keeps no keys elsewhere (memory) leaves it nil.
	ExpireAt func(t *testing.T, key string) (time.Time, bool)
	// Keys is the store's key layout under [KeyPrefix]: the test names
	// every limit's key, and its periods', through it. Required.
	Keys ports.Keys
}

// TestCalendarBoundary runs the calendar quotas' boundary contract
// against a store (docs/policies.md, "Calendar periods"): a period's
// count made a millisecond before its end does not count after it; each
// decision's Window is the real length of the period it counted in and
// its ResetAfter the time to that period's end; a period's key expires a
// minute after the period's end (redis.md, "Keys"). The periods are a
// day, a month and a year, in a zone whose midnight is a second or so
// ahead of the store's clock, so that a real store is only waited for:
// a fixed offset, and one whose clocks jump an hour at that midnight (the
// day after starts at the jump and lasts 23 hours). It checks them in
// one request beside a window limit (a store's general path) and a
// daily quota alone (its shortest).
func TestCalendarBoundary(t *testing.T, h CalendarHarness) {
	l := h.New(t)
	t.Run("beside a window limit", func(t *testing.T) {
		testBoundary(t, h, l, func(boundary time.Time) []domain.Calendar {
			var cals []domain.Calendar
			for _, loc := range []*time.Location{midnightAt(boundary, 0), midnightAt(boundary, time.Hour)} {
				_, m, d := boundary.In(loc).Date()
				cals = append(cals,
					domain.Calendar{Unit: domain.PeriodDay, Location: loc},
					domain.Calendar{Unit: domain.PeriodMonth, AnchorDay: d, Location: loc},
					domain.Calendar{Unit: domain.PeriodYear, AnchorMonth: m, AnchorDay: d, Location: loc})
			}
			return cals
		}, true)
	})
	t.Run("a daily quota alone", func(t *testing.T) {
		testBoundary(t, h, l, func(boundary time.Time) []domain.Calendar {
			return []domain.Calendar{{Unit: domain.PeriodDay, Location: midnightAt(boundary, time.Hour)}}
		}, false)
	})
}

// testBoundary checks the calendars cals returns for a boundary, in one
// request (with a window limit when window is set), on each side of the
// boundary. A real store that decided on the wrong side of it is given
// another boundary, twice at most.
func testBoundary(t *testing.T, h CalendarHarness, l ports.Limiter, cals func(boundary time.Time) []domain.Calendar, window bool) {
	t.Helper()
	const limit = 3
	for attempt := 1; ; attempt++ {
		boundary := h.Now().Add(300 * time.Millisecond).Truncate(time.Second).Add(time.Second)
		tenant := Tenant()
		req := domain.Request{Tenant: tenant, Route: "default"}
		type period struct{ start, end time.Time }
		var before, after []period
		for i, c := range cals(boundary) {
			name := fmt.Sprintf("%s-%d", c.Unit, i)
			req.Limits = append(req.Limits, domain.Limit{Name: name, Calendar: &c, Cost: limit,
				Rule: domain.Rule{Limit: limit, Window: domain.NominalWindow(c.Unit)},
				Key:  h.Keys.Limit(tenant, "", name, ports.KeyCalendar)})
			s0, e0 := c.Period(boundary.Add(-time.Millisecond))
			s1, e1 := c.Period(boundary)
			if !e0.Equal(boundary) || !s1.Equal(boundary) {
				t.Fatalf("%s in %v: the periods [%v, %v) and [%v, %v) do not meet at %v", c.Unit, c.Location, s0, e0, s1, e1, boundary)
			}
			before, after = append(before, period{s0, e0}), append(after, period{s1, e1})
		}
		n := len(req.Limits)
		if window {
			req.Limits = append(req.Limits, domain.Limit{Name: "per-hour", Rule: domain.Rule{Limit: 100, Window: time.Hour}, Cost: limit,
				Key: h.Keys.Limit(tenant, "", "per-hour", ports.KeyRate)})
		}

		// The whole budget of every period, spent a millisecond before
		// the boundary (a real store: aimed half its slack earlier, as
		// the decision reaches it a round trip and some scheduling after
		// the wait).
		h.Until(boundary.Add(-time.Millisecond - h.Slack/2))
		v := MustAllow(t, l, req)
		late := false
		for i, d := range v.Decisions[:n] {
			if h.Slack > 0 && d.ResetAfter > time.Millisecond+h.Slack {
				late = true // decided after the boundary, or too long before it: try another
				t.Logf("%s: decided %v before its period's end, want at most %v: another boundary", req.Limits[i].Name, d.ResetAfter, time.Millisecond+h.Slack)
				break
			}
			p := before[i]
			if !d.Allowed || d.Remaining != 0 || d.Window != p.end.Sub(p.start) || d.ResetAfter <= 0 ||
				d.ResetAfter > time.Millisecond+h.Slack || (h.Slack == 0 && d.ResetAfter != time.Millisecond) {
				t.Errorf("%s 1 ms before its end: %+v, want admitted, 0 remaining, a window of %v and 1 ms to its end",
					req.Limits[i].Name, d, p.end.Sub(p.start))
			}
		}
		if h.Slack > 0 && !late {
			t.Logf("the store decided %v before the boundary", v.Decisions[0].ResetAfter)
		}
		if late {
			if attempt == 3 {
				t.Fatalf("the store decided after the boundary three times (slack %v)", h.Slack)
			}
			continue
		}
		if h.Slack == 0 {
			one := Costs(req, slices.Repeat([]int64{1}, len(req.Limits))...)
			if v := MustAllow(t, l, one); v.Allowed {
				t.Errorf("1 ms before the boundary, a spent period admitted one more: %+v", v)
			}
		}

		// At the boundary, every period is new: the count of the one
		// before does not count.
		// (A real store: aimed half its slack later, as a wait can end
		// early when the round trip it measured was slow.)
		h.Until(boundary.Add(h.Slack / 2))
		v = MustAllow(t, l, req)
		for i, d := range v.Decisions[:n] {
			p := after[i]
			length := p.end.Sub(p.start)
			if !d.Allowed || d.Remaining != 0 || d.Window != length || d.ResetAfter > length || d.ResetAfter < length-h.Slack {
				t.Errorf("%s at its start: %+v, want admitted, 0 remaining, a window and a reset of %v", req.Limits[i].Name, d, length)
			}
		}
		if h.ExpireAt == nil {
			return
		}
		for i, lim := range req.Limits[:n] {
			for _, p := range []period{before[i], after[i]} {
				key := h.Keys.Period(lim.Key, p.start)
				if at, ok := h.ExpireAt(t, key); !ok || !at.Equal(p.end.Add(time.Minute)) {
					t.Errorf("%s: key %s expires at %v (%v), want a minute after the period's end %v", lim.Name, key, at, ok, p.end)
				}
			}
		}
		return
	}
}

// midnightAt returns a zone whose local midnight is at, at UTC offset
// o (−12 h ≤ o < 12 h) before it: with jump 0, the fixed offset o;
// otherwise the clocks jump forward by jump at that midnight, so that
// the day starting there starts at the jump, 01:00 for an hour. Its name
// is unique to at and jump, as a store may cache periods by zone name.
func midnightAt(at time.Time, jump time.Duration) *time.Location {
	o := -int(at.Unix() % 86400)
	if o < -43200 {
		o += 86400
	}
	name := fmt.Sprintf("portstest/midnight-%d-%d", at.Unix(), int(jump/time.Second))
	if jump == 0 {
		return time.FixedZone(name, o)
	}
	loc, err := time.LoadLocationFromTZData(name, tzif(at, o, o+int(jump/time.Second)))
	if err != nil {
		panic(fmt.Sprintf("portstest: a zone of one clock change: %v", err))
	}
	return loc
}

// tzif returns a version 1 TZif file (RFC 8536) of one clock change, at
// change, from UTC offset from to to.
func tzif(change time.Time, from, to int) []byte {
	b := []byte("TZif")
	b = append(b, make([]byte, 16)...)             // version 1, reserved
	for _, n := range []uint32{0, 0, 0, 1, 2, 4} { // isut, isstd, leap, time, type, char counts
		b = binary.BigEndian.AppendUint32(b, n)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(int32(change.Unix()))) // the transition
	b = append(b, 1)                                                   // to type 1
	b = binary.BigEndian.AppendUint32(b, uint32(int32(from)))
	b = append(b, 0, 0) // not DST, abbreviation "A"
	b = binary.BigEndian.AppendUint32(b, uint32(int32(to)))
	b = append(b, 1, 2) // DST, abbreviation "B"
	return append(b, "A\x00B\x00"...)
}
