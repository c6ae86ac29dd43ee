package domain_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// TestPeriodWindow: a monthly quota anchored on the 31st in Berlin
// counts per calendar period, reports the period's real length, resets
// at its end (not 30 days on), and never reads a finished period again.
func TestPeriodWindow(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	cal := domain.Calendar{Unit: domain.PeriodMonth, Location: berlin, AnchorDay: 31}
	at := func(y int, m time.Month, d, h int) time.Time { return time.Date(y, m, d, h, 0, 0, 0, berlin) }
	var p domain.PeriodWindow
	step := func(now time.Time, cost int64) domain.Decision {
		d := p.Decide(now, cal, 3, cost)
		if d.Allowed {
			p.Spend(now, cal, cost)
		}
		return d
	}
	// The period of 2027-02-10 runs Jan 31 to Feb 28 00:00 (anchor 31
	// clamped to February's last day): 28 days, no clock change.
	feb := at(2027, 2, 10, 12)
	d := step(feb, 2)
	if !d.Allowed || d.Remaining != 1 || d.Window != 28*24*time.Hour || d.ResetAfter != at(2027, 2, 28, 0).Sub(feb) {
		t.Errorf("first request: %+v, want allowed, 1 left, a 28-day window, reset at Feb 28", d)
	}
	if d = step(feb, 2); d.Allowed || d.Remaining != 1 || d.RetryAfter != d.ResetAfter {
		t.Errorf("over the quota: %+v, want denied until the period ends", d)
	}
	// The next period, Feb 28 to Mar 31, holds the summer clock change: 31
	// days less an hour. A new count.
	mar := at(2027, 3, 1, 0)
	if d = step(mar, 3); !d.Allowed || d.Remaining != 0 || d.Window != 31*24*time.Hour-time.Hour {
		t.Errorf("next period: %+v, want allowed, 0 left, 31 days less an hour", d)
	}
	// A peek (cost 0) of an untouched period spends nothing, resets nothing.
	var fresh domain.PeriodWindow
	if d = fresh.Decide(mar, cal, 3, 0); !d.Allowed || d.Remaining != 3 || d.ResetAfter != 0 {
		t.Errorf("peek of a fresh period: %+v", d)
	}
	if d = fresh.Decide(mar, cal, 3, 4); d.Allowed || d.RetryAfter <= 0 {
		t.Errorf("a cost above the quota: %+v, want denied", d)
	}
}
