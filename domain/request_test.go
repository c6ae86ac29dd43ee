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
