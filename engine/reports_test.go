package engine_test

import (
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
)

func plannedLimit(key string, limit, cost int64) domain.Limit {
	return domain.Limit{Name: key, Rule: domain.Rule{Limit: limit, Window: time.Minute}, Key: key, Cost: cost}
}

// TestPlannedReportsAreCharged: Envoy AI Gateway's pattern, a check of 0
// hits before the request and a report of the tokens used after it: a
// report larger than what remains is denied and charged to the limit
// that denied it (not the others), and a check once nothing remains is
// denied.
func TestPlannedReportsAreCharged(t *testing.T) {
	t.Parallel()
	p, _ := domain.NewPolicy([]domain.PolicyLimit{{Name: "x", Rule: domain.Rule{Limit: 1, Window: time.Minute}}}, nil)
	store := &budgets{spent: map[string]int64{}}
	e := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Planned: store, PlannedSettler: store, Keys: keys.Layout{}})
	decide := func(limits ...domain.Limit) domain.Verdict {
		t.Helper()
		v, err := e.DecidePlanned(t.Context(), domain.Request{Tenant: "rls", Route: "ai", Limits: limits}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := decide(plannedLimit("tokens", 100, 0)); !v.Allowed {
		t.Fatalf("a check with the whole budget left: %+v", v)
	}
	if v := decide(plannedLimit("tokens", 100, 60)); !v.Allowed || store.of("tokens") != 60 {
		t.Fatalf("a report of 60: %+v, spent %d", v, store.of("tokens"))
	}
	if v := decide(plannedLimit("tokens", 100, 0)); !v.Allowed {
		t.Fatalf("a check with 40 left: %+v", v)
	}
	v := decide(plannedLimit("tokens", 100, 70), plannedLimit("other", 1000, 70))
	if v.Allowed || v.Decisions[0].Allowed || v.Decisions[0].Remaining != 0 || store.of("tokens") != 130 || store.of("other") != 0 {
		t.Fatalf("a report of 70 with 40 left: %+v, tokens %d other %d; want denied, charged to tokens alone",
			v, store.of("tokens"), store.of("other"))
	}
	if v := decide(plannedLimit("tokens", 100, 0)); v.Allowed || v.Decisions[0].RetryAfter <= 0 {
		t.Fatalf("a check past the budget: %+v, want denied with a Retry-After", v)
	}
	// Exactly spent: nothing remains, and a check hears it.
	store.mu.Lock()
	store.spent["exact"] = 100
	store.mu.Unlock()
	if v := decide(plannedLimit("exact", 100, 0)); v.Allowed {
		t.Fatalf("a check with nothing left: %+v, want denied", v)
	}
	// A shadow limit that denies is not charged.
	shadow := plannedLimit("shadowed", 10, 20)
	shadow.Shadow = true
	if v := decide(shadow, plannedLimit("full", 1, 5)); v.Allowed || store.of("shadowed") != 0 || store.of("full") != 5 {
		t.Fatalf("a shadow limit beside a denying one: %+v, shadowed %d full %d", v, store.of("shadowed"), store.of("full"))
	}
}

// TestPlannedChargeEvery: with PlannedChargeEvery, a denied request
// charges every limit its hits, as a counter that counts before it
// decides.
func TestPlannedChargeEvery(t *testing.T) {
	t.Parallel()
	p, _ := domain.NewPolicy([]domain.PolicyLimit{{Name: "x", Rule: domain.Rule{Limit: 1, Window: time.Minute}}}, nil)
	store := &budgets{spent: map[string]int64{"b": 5}}
	e := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Planned: store, PlannedSettler: store,
		PlannedChargeEvery: true, Keys: keys.Layout{}})
	v, err := e.DecidePlanned(t.Context(), domain.Request{Tenant: "rls", Route: "r",
		Limits: []domain.Limit{plannedLimit("a", 10, 3), plannedLimit("b", 5, 2)}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Allowed || store.of("a") != 3 || store.of("b") != 7 {
		t.Fatalf("a denied request: %+v, a %d b %d; want every limit charged its hits", v, store.of("a"), store.of("b"))
	}
}
