package engine_test

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
)

// usagePolicy has a global limit, a monthly quota, and two routes with
// limits of their own, declared in an order their matching does not
// follow.
func usagePolicy(t *testing.T) *domain.Policy {
	t.Helper()
	month := &domain.Calendar{Unit: domain.PeriodMonth}
	p, err := domain.NewPolicy(
		[]domain.PolicyLimit{
			{Name: "per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}},
			{Name: "monthly", Rule: domain.Rule{Limit: 1000, Window: domain.NominalWindow(domain.PeriodMonth)}, Calendar: month},
		},
		[]domain.Route{
			{Name: "export", Path: "/v1", Cost: 5, Limits: []domain.PolicyLimit{{Name: "exports", Rule: domain.Rule{Limit: 10, Window: hour}}}},
			{Name: "search", Path: "/v1/search", Cost: 1, Limits: []domain.PolicyLimit{{Name: "searches", Rule: domain.Rule{Limit: 3, Window: hour}, Shadow: true}}},
		})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// usageEngine is an engine over a memory store that is also its Usage.
func usageEngine(t *testing.T, snap *engine.Snapshot) (*engine.Engine, *memory.Limiter) {
	t.Helper()
	store, err := memory.New(domain.AlgorithmSlidingWindow, memory.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return engine.New(snap, engine.Options{Limiter: store, Usage: store, Keys: keys.Layout{Prefix: "rl:", Algorithm: domain.AlgorithmSlidingWindow}, Algorithm: domain.AlgorithmSlidingWindow}), store
}

// used returns what each limit of us has used, by limit name.
func used(us []engine.LimitUsage) map[string]int64 {
	m := map[string]int64{}
	for _, u := range us {
		m[u.Limit.Name] = u.Used()
	}
	return m
}

func TestUsageReadsEveryLimitWithoutSpending(t *testing.T) {
	t.Parallel()
	e, store := usageEngine(t, &engine.Snapshot{Policy: usagePolicy(t)})
	decide := func(path string) {
		t.Helper()
		if _, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: path, Credentials: engine.Credentials{Header: "acme"}}); err != nil {
			t.Fatal(err)
		}
	}
	us, err := e.Usage(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if store.Len() != 0 {
		t.Errorf("usage of a tenant never seen created %d keys", store.Len())
	}
	var order []string
	for _, u := range us {
		order = append(order, u.Route+"/"+u.Limit.Name)
	}
	if want := []string{"/per-minute", "/monthly", "export/exports", "search/searches"}; !slices.Equal(order, want) {
		t.Errorf("limits %v, want %v: globals in order, then each route's own in the policy's order", order, want)
	}
	decide("/v1/export")
	decide("/v1/search")
	decide("/v1/search")
	decide("/elsewhere")
	keys := store.Len()
	for range 3 {
		us, err = e.Usage(t.Context(), "acme")
		if err != nil {
			t.Fatal(err)
		}
	}
	if want := map[string]int64{"per-minute": 8, "monthly": 8, "exports": 5, "searches": 2}; !maps.Equal(used(us), want) {
		t.Errorf("used %v, want %v", used(us), want)
	}
	if store.Len() != keys {
		t.Errorf("usage changed the keys held: %d, was %d", store.Len(), keys)
	}
	for _, u := range us {
		switch {
		case u.Limit.Name == "searches" && !u.Limit.Shadow:
			t.Error("searches: not reported as a shadow limit")
		case u.Limit.Name == "monthly" && (u.Limit.Calendar == nil || u.Decision.Window < 28*24*time.Hour):
			t.Errorf("monthly: %+v, want its calendar and the month's length", u)
		case u.Decision.ResetAfter <= 0:
			t.Errorf("%s: ResetAfter %v, want > 0 after spending", u.Limit.Name, u.Decision.ResetAfter)
		}
	}
	if us, _ := e.Usage(t.Context(), "globex"); !maps.Equal(used(us), map[string]int64{"per-minute": 0, "monthly": 0, "exports": 0, "searches": 0}) {
		t.Errorf("another tenant: %v, want nothing used", used(us))
	}
}

func TestResetOneLimitOrAll(t *testing.T) {
	t.Parallel()
	e, _ := usageEngine(t, &engine.Snapshot{Policy: usagePolicy(t)})
	for range 2 {
		if _, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/v1/export", Credentials: engine.Credentials{Header: "acme"}}); err != nil {
			t.Fatal(err)
		}
	}
	us, err := e.Reset(t.Context(), "acme", "monthly")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"per-minute": 10, "monthly": 0, "exports": 10, "searches": 0}; !maps.Equal(used(us), want) {
		t.Errorf("after resetting monthly: %v, want %v", used(us), want)
	}
	if us, err = e.Reset(t.Context(), "acme", ""); err != nil {
		t.Fatal(err)
	}
	if want := map[string]int64{"per-minute": 0, "monthly": 0, "exports": 0, "searches": 0}; !maps.Equal(used(us), want) {
		t.Errorf("after resetting all: %v, want %v", used(us), want)
	}
	if _, err := e.Reset(t.Context(), "acme", "nope"); !errors.Is(err, engine.ErrNoLimit) {
		t.Errorf("reset of a limit the policy lacks: %v, want ErrNoLimit", err)
	}
}

func TestUsageOfFileTenants(t *testing.T) {
	t.Parallel()
	dir := engine.NewDirectory(
		[]engine.Tenant{{ID: "acme", Rules: map[string]domain.Rule{"exports": {Limit: 50, Window: hour}}}},
		[][]string{{"k-acme"}})
	e, _ := usageEngine(t, &engine.Snapshot{Policy: usagePolicy(t), Tenants: dir})
	us, err := e.Usage(t.Context(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	if us[2].Limit.Name != "exports" || us[2].Limit.Rule.Limit != 50 {
		t.Errorf("acme's exports: %+v, want its own limit of 50", us[2].Limit)
	}
	if _, err := e.Usage(t.Context(), domain.Unknown); err != nil {
		t.Errorf("usage of the unknown tenant: %v", err)
	}
	for id, want := range map[domain.TenantID]error{"globex": engine.ErrNoTenant, "a b": domain.ErrInvalidTenant, "": domain.ErrInvalidTenant} {
		if _, err := e.Usage(t.Context(), id); !errors.Is(err, want) {
			t.Errorf("usage of %q: %v, want %v", id, err, want)
		}
		if _, err := e.Reset(t.Context(), id, ""); !errors.Is(err, want) {
			t.Errorf("reset of %q: %v, want %v", id, err, want)
		}
	}
}

func TestUsageNeedsTheStore(t *testing.T) {
	t.Parallel()
	e := engine.New(&engine.Snapshot{Policy: usagePolicy(t)}, engine.Options{Keys: keys.Layout{}, Limiter: &recorder{}})
	if _, err := e.Usage(t.Context(), "acme"); !errors.Is(err, engine.ErrNoUsage) {
		t.Errorf("usage without Options.Usage: %v, want ErrNoUsage", err)
	}
}
