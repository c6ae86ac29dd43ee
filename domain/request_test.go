package domain_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// TestSettleShadow pins Settle's rule: enforced limits decide the
// verdict, shadow limits only mark it, and the decisions say who spends
// (allowed && verdict allowed).
func TestSettleShadow(t *testing.T) {
	t.Parallel()
	type lim struct {
		shadow, admits bool
	}
	tests := []struct {
		name    string
		limits  []lim
		allowed bool
		outcome domain.Outcome
		retry   time.Duration
	}{
		{"all admit", []lim{{false, true}, {true, true}}, true, domain.OutcomeAllowed, 0},
		{"shadow denies", []lim{{false, true}, {true, false}}, true, domain.OutcomeShadowDenied, 0},
		{"only shadow, denies", []lim{{true, false}}, true, domain.OutcomeShadowDenied, 0},
		{"enforced denies", []lim{{false, false}, {true, true}}, false, domain.OutcomeDenied, time.Second},
		{"both deny", []lim{{false, false}, {true, false}}, false, domain.OutcomeDenied, time.Second},
	}
	for _, tt := range tests {
		req := domain.Request{Cost: 3}
		for _, l := range tt.limits {
			req.Limits = append(req.Limits, domain.Limit{Shadow: l.shadow})
		}
		var recosted []int
		v := domain.Settle(req, func(i int, cost int64) domain.Decision {
			if cost == 0 {
				recosted = append(recosted, i)
				return domain.Decision{Allowed: true, Remaining: 7}
			}
			d := domain.Decision{Allowed: tt.limits[i].admits}
			if !d.Allowed {
				d.RetryAfter = time.Duration(i+1) * time.Second // the shadow one waits longer
			}
			return d
		})
		if v.Allowed != tt.allowed || v.Outcome != tt.outcome || v.RetryAfter() != tt.retry {
			t.Errorf("%s: %+v (RetryAfter %v), want allowed %v, outcome %v, RetryAfter %v", tt.name, v, v.RetryAfter(), tt.allowed, tt.outcome, tt.retry)
		}
		for i, d := range v.Decisions {
			if d.Shadow != tt.limits[i].shadow {
				t.Errorf("%s: decision %d Shadow %v, want %v", tt.name, i, d.Shadow, tt.limits[i].shadow)
			}
			if d.Allowed != tt.limits[i].admits {
				t.Errorf("%s: decision %d Allowed %v, want %v", tt.name, i, d.Allowed, tt.limits[i].admits)
			}
		}
		// Denied: the admitting limits are re-read at cost 0 (nothing spent).
		for _, i := range recosted {
			if v.Allowed || !tt.limits[i].admits {
				t.Errorf("%s: limit %d re-decided at cost 0", tt.name, i)
			}
		}
	}
}

// TestTightestIgnoresShadow: the X-RateLimit-* headers and Retry-After
// describe enforced limits; a shadow limit steers them only when every
// limit is in shadow mode.
func TestTightestIgnoresShadow(t *testing.T) {
	t.Parallel()
	enforced := domain.Decision{Allowed: true, Limit: 20, Remaining: 15, ResetAfter: time.Minute}
	shadow := domain.Decision{Limit: 5, Remaining: 0, ResetAfter: 10 * time.Minute, RetryAfter: time.Minute, Shadow: true}
	tests := []struct {
		name string
		ds   []domain.Decision
		want int
	}{
		{"none", nil, -1},
		{"shadow first", []domain.Decision{shadow, enforced}, 1},
		{"shadow last", []domain.Decision{enforced, shadow}, 0},
		{"all shadow", []domain.Decision{shadow, {Limit: 9, Remaining: 3, Shadow: true}}, 0},
		{"enforced tie, later reset", []domain.Decision{enforced, shadow, {Limit: 30, Remaining: 15, ResetAfter: time.Hour}}, 2},
	}
	for _, tt := range tests {
		if got := (domain.Verdict{Decisions: tt.ds}).Tightest(); got != tt.want {
			t.Errorf("%s: Tightest = %d, want %d", tt.name, got, tt.want)
		}
	}
}
