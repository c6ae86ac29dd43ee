package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, on a machine without zoneinfo

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/admin"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/ports/portstest"
)

// TestUsageCalendarSecondsMatchHeaders: for a calendar limit, the usage
// API's window_seconds and reset_seconds are the headers' w and t at the
// same instant: the period's real length and the seconds to its end,
// rounded up, on days and months the clocks change and at an instant
// between two seconds. The first case is the globex of docs/policies.md
// and docs/usage-api.md, at the instant their numbers are read.
func TestUsageCalendarSecondsMatchHeaders(t *testing.T) {
	t.Parallel()
	load := func(name string) *time.Location {
		loc, err := time.LoadLocation(name)
		if err != nil {
			t.Fatal(err)
		}
		return loc
	}
	tests := []struct {
		name       string
		cal        domain.Calendar
		limit      int64
		at         time.Time
		requests   int   // made at at; the last one is the one whose headers are checked
		w, t       int64 // the period's length and the seconds to its end
		retryAfter int64 // 0: the last request is admitted
	}{
		{"globex, December 2, 2026 (docs)", domain.Calendar{Unit: domain.PeriodMonth, AnchorDay: 15, Location: load("America/New_York")}, 5,
			time.Date(2026, 12, 2, 0, 2, 14, 0, time.UTC), 7, 2592000, 1141066, 1141066},
		{"Berlin's 25-hour day", domain.Calendar{Unit: domain.PeriodDay, Location: load("Europe/Berlin")}, 5,
			time.Date(2027, 10, 31, 12, 0, 0, 250_000_000, time.UTC), 1, 90000, 39600, 0},
		{"Santiago's day without a midnight", domain.Calendar{Unit: domain.PeriodDay, Location: load("America/Santiago")}, 5,
			time.Date(2027, 9, 5, 12, 0, 0, 0, time.UTC), 1, 82800, 54000, 0},
		{"a Berlin October", domain.Calendar{Unit: domain.PeriodMonth, Location: load("Europe/Berlin")}, 5,
			time.Date(2027, 10, 31, 22, 59, 59, 999_000_000, time.UTC), 1, 2682000, 1, 0},
		{"Lord Howe's year from April 5, half an hour longer", domain.Calendar{Unit: domain.PeriodYear, AnchorMonth: time.April, AnchorDay: 5, Location: load("Australia/Lord_Howe")}, 5,
			time.Date(2027, 4, 4, 13, 29, 59, 0, time.UTC), 1, 365*86400 + 1800, 1, 0},
	}
	for _, tt := range tests {
		clk := portstest.NewFakeClock(tt.at)
		store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{Now: clk.Now, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { store.Close() })
		p, err := domain.NewPolicy([]domain.PolicyLimit{
			{Name: "per-second", Rule: domain.Rule{Limit: 10, Window: time.Second}},
			{Name: "quota", Rule: domain.Rule{Limit: tt.limit, Window: domain.NominalWindow(tt.cal.Unit)}, Calendar: &tt.cal},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		eng := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Usage: store, Keys: keys.Layout{Prefix: "rl:", Algorithm: domain.AlgorithmFixedWindow}, Algorithm: domain.AlgorithmFixedWindow})
		var res engine.Result
		for range tt.requests {
			res, err = eng.Decide(t.Context(), engine.Described{Method: "GET", Path: "/", Credentials: engine.Credentials{Header: "globex"}})
			if err != nil {
				t.Fatal(err)
			}
		}
		h := http.Header{}
		httpface.SetRateLimitHeaders(h, res.Limits, res.Verdict, clk.Now())
		var policyW, rateT int64
		for _, item := range strings.Split(h[httpface.HeaderRateLimitPolicy][0], ", ") {
			if v, ok := strings.CutPrefix(item, `"quota";q=`+strconv.FormatInt(tt.limit, 10)+";w="); ok {
				policyW, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		for _, item := range strings.Split(h[httpface.HeaderRateLimit][0], ", ") {
			if v, ok := strings.CutPrefix(item, `"quota";r=`); ok {
				_, v, _ = strings.Cut(v, ";t=")
				rateT, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		if policyW != tt.w || rateT != tt.t {
			t.Errorf("%s: RateLimit-Policy %q, RateLimit %q: w=%d t=%d, want w=%d t=%d", tt.name,
				h[httpface.HeaderRateLimitPolicy], h[httpface.HeaderRateLimit], policyW, rateT, tt.w, tt.t)
		}
		if tt.retryAfter > 0 {
			rec := httptest.NewRecorder()
			httpface.WriteDenied(rec, httptest.NewRequest("GET", "/", nil), http.StatusTooManyRequests, res.Verdict)
			if got := rec.Header().Get(httpface.HeaderRetryAfter); res.Verdict.Allowed || got != strconv.FormatInt(tt.retryAfter, 10) {
				t.Errorf("%s: allowed=%v, Retry-After %q, want a denial and %d", tt.name, res.Verdict.Allowed, got, tt.retryAfter)
			}
		}
		if end := tt.at.Add(time.Duration(tt.t) * time.Second).Truncate(time.Second); h[httpface.HeaderXRateLimitReset][0] != strconv.FormatInt(end.Unix(), 10) &&
			res.Limits[res.Verdict.Tightest()].Calendar != nil {
			t.Errorf("%s: X-RateLimit-Reset %q, want the period's end %d", tt.name, h[httpface.HeaderXRateLimitReset], end.Unix())
		}

		api := admin.WithUsage(http.NotFoundHandler(), admin.UsageOptions{Engine: eng, Token: token})
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/v1/tenants/globex/usage", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		api.ServeHTTP(rec, r)
		b := decode(t, rec)
		if rec.Code != http.StatusOK || len(b.Limits) != 2 {
			t.Fatalf("%s: usage %d %s", tt.name, rec.Code, rec.Body)
		}
		if q := b.Limits[1]; q.Period != tt.cal.Unit.String() || q.WindowSeconds != policyW || q.ResetSeconds != rateT {
			t.Errorf("%s: usage window_seconds %d, reset_seconds %d, want the headers' w=%d and t=%d", tt.name, q.WindowSeconds, q.ResetSeconds, policyW, rateT)
		}
	}
}
