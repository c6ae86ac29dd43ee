package redis

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
)

// TestPeriodsAround: the cached periods are the calendar's own around
// every instant (across boundaries, for calendars sharing a slot), and
// their keys are keys.PeriodKey's.
func TestPeriodsAround(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	cals := []domain.Calendar{
		{Unit: domain.PeriodDay, Location: paris},
		{Unit: domain.PeriodMonth, AnchorDay: 31},
		{Unit: domain.PeriodWeek},
		{Unit: domain.PeriodYear, AnchorMonth: time.March, AnchorDay: 29, Location: paris},
	}
	start := time.Date(2028, 2, 27, 22, 0, 0, 0, time.UTC)
	for step := range 24 * 5 { // hourly across a leap day, a day's and a month's boundaries
		now := start.Add(time.Duration(step) * time.Hour)
		for _, cal := range cals {
			p := periodsAround(cal, now)
			s1, e1 := cal.Period(now)
			s0, _ := cal.Period(s1.Add(-time.Nanosecond))
			_, e2 := cal.Period(e1)
			want := [3][2]time.Time{{s0, s1}, {s1, e1}, {e1, e2}}
			if p.id != idOf(cal) || p.bounds != want {
				t.Fatalf("%v at %v: %v, want %v", cal, now, p.bounds, want)
			}
			for i, ms := range [...]int64{s0.UnixMilli(), s1.UnixMilli(), e1.UnixMilli(), e2.UnixMilli()} {
				if p.args[i] != any(ms) {
					t.Fatalf("%v at %v: args %v, want %d at %d", cal, now, p.args, ms, i)
				}
			}
			prev, cur, next := p.keys("rl:{acme}fixed_window:monthly")
			if prev != keys.PeriodKey("rl:{acme}fixed_window:monthly", s0) || cur != keys.PeriodKey("rl:{acme}fixed_window:monthly", s1) || next != keys.PeriodKey("rl:{acme}fixed_window:monthly", e1) {
				t.Fatalf("%v at %v: keys %q %q %q", cal, now, prev, cur, next)
			}
		}
	}
}

func BenchmarkPeriodsAround(b *testing.B) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		b.Fatal(err)
	}
	cal := domain.Calendar{Unit: domain.PeriodMonth, Location: paris}
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		p := periodsAround(cal, now)
		_, _, _ = p.keys("rl:{acme}fixed_window:monthly")
	}
}
