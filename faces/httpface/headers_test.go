package httpface_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/httpface"
)

// TestSetRateLimitHeadersConcurrency: a concurrency limit's items beside
// a rate limit's: q with qu="concurrent-requests" (no window), r the free
// slots and t 0 while one is free, 1 when none is; X-RateLimit-* follow
// the tightest enforced limit, whichever kind. Two allocations, as for
// rate limits alone. (Not parallel: it counts allocations.)
func TestSetRateLimitHeadersConcurrency(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	limits := []domain.Limit{
		{Name: "per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}},
		{Name: "inflight", Rule: domain.Rule{Limit: 5, Window: domain.ConcurrencyWindow}, Concurrency: true},
	}
	tests := []struct {
		name                       string
		slot                       domain.Decision
		rateLimit, xLimit, xRemain string
		xReset                     string
	}{
		{"slots free", domain.DecideSlots(5, 1, 1), `"per-minute";r=50;t=30, "inflight";r=3;t=0`, "5", "3", "1800000000"},
		{"the last slot", domain.DecideSlots(5, 4, 1), `"per-minute";r=50;t=30, "inflight";r=0;t=1`, "5", "0", "1800000001"},
		{"none free", domain.DecideSlots(5, 5, 1), `"per-minute";r=50;t=30, "inflight";r=0;t=1`, "5", "0", "1800000001"},
	}
	for _, tt := range tests {
		v := domain.Verdict{Allowed: tt.slot.Allowed, Decisions: []domain.Decision{
			{Allowed: true, Limit: 60, Remaining: 50, ResetAfter: 30 * time.Second}, tt.slot}}
		h := http.Header{}
		httpface.SetRateLimitHeaders(h, limits, v, now)
		for name, want := range map[string]string{
			"RateLimit-Policy":      `"per-minute";q=60;w=60, "inflight";q=5;qu="concurrent-requests"`,
			"RateLimit":             tt.rateLimit,
			"X-RateLimit-Limit":     tt.xLimit,
			"X-RateLimit-Remaining": tt.xRemain,
			"X-RateLimit-Reset":     tt.xReset,
		} {
			if got := h[name]; len(got) != 1 || got[0] != want {
				t.Errorf("%s: %s = %q, want %q", tt.name, name, got, want)
			}
		}
		if n := testing.AllocsPerRun(100, func() { httpface.SetRateLimitHeaders(h, limits, v, now) }); n > 2 {
			t.Errorf("%s: %v allocations, want at most 2", tt.name, n)
		}
	}
}

func TestRateLimitHeadersTokens(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	limits := []domain.Limit{
		{Name: "rpm", Rule: domain.Rule{Limit: 600, Window: time.Minute}},
		{Name: "tpm", Rule: domain.Rule{Limit: 100000, Window: time.Minute}, Reserve: true, Cost: 1024},
	}
	v := domain.Verdict{Allowed: true, Decisions: []domain.Decision{
		{Allowed: true, Limit: 600, Remaining: 599, ResetAfter: 60 * time.Second},
		{Allowed: true, Limit: 100000, Remaining: 98976, ResetAfter: 60 * time.Second, Spent: 1024}}}
	h := http.Header{}
	httpface.SetRateLimitHeaders(h, limits, v, now)
	for name, want := range map[string]string{
		"RateLimit-Policy": `"rpm";q=600;w=60, "tpm";q=100000;w=60;qu="tokens"`,
		"RateLimit":        `"rpm";r=599;t=60, "tpm";r=98976;t=60`,
	} {
		if got := h[name]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
