package app

import (
	"context"
	"testing"

	"github.com/tollgate/tollgate/domain"
)

// TestViews: the HTTP faces count every request only for the one limit
// of a gateway without a policy file on the fixed window, with policy
// keys; the rate limit service counts every hit of an admitted request
// (every hit with TOLLGATE_RLS_COUNT_DENIED, then without the deny
// cache: the fixed window's store counts them, another algorithm's are
// charged after), in windows aligned to the epoch, without policy keys.
func TestViews(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg  Config
		want view
	}{
		{Config{Algorithm: domain.AlgorithmFixedWindow, DenyCache: true}, view{counting: domain.CountEvery, policyKeys: true, denyCache: true}},
		{Config{Algorithm: domain.AlgorithmFixedWindow, PolicyFile: "p.json"}, view{counting: domain.CountAdmitted, policyKeys: true}},
		{Config{Algorithm: domain.AlgorithmSlidingLog, DenyCache: true}, view{counting: domain.CountAdmitted, policyKeys: true, denyCache: true}},
	} {
		if got := httpView(tt.cfg); got != tt.want {
			t.Errorf("httpView(%+v) = %+v, want %+v", tt.cfg, got, tt.want)
		}
	}
	for _, tt := range []struct {
		cfg  Config
		want view
	}{
		{Config{Algorithm: domain.AlgorithmTokenBucket, DenyCache: true}, view{counting: domain.CountHits, windows: domain.WindowsEpoch, denyCache: true}},
		{Config{Algorithm: domain.AlgorithmFixedWindow, DenyCache: true, RLSCountDenied: true}, view{counting: domain.CountEvery, windows: domain.WindowsEpoch}},
		// Another algorithm counts a denied request's hits by a charge
		// after the store decided.
		{Config{Algorithm: domain.AlgorithmSlidingWindow, DenyCache: true, RLSCountDenied: true}, view{counting: domain.CountHits, windows: domain.WindowsEpoch, chargeEvery: true}},
	} {
		if got := rlsView(tt.cfg); got != tt.want {
			t.Errorf("rlsView(%+v) = %+v, want %+v", tt.cfg, got, tt.want)
		}
	}
}

// TestMemoryViewsShareOneStore: the two views of the memory store hold
// their keys in one map, under one bound.
func TestMemoryViewsShareOneStore(t *testing.T) {
	t.Parallel()
	cfg := Config{Algorithm: domain.AlgorithmFixedWindow, RLSAddr: "127.0.0.1:0", MemoryMaxKeys: 10}
	st, vs, err := memoryViews(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rule := domain.Rule{Limit: 5, Window: 60e9}
	for _, l := range []struct {
		name string
		key  string
	}{{"http", "{a}"}, {"rls", "{rls:d}:fixed_window:60s:k_v_"}} {
		lim := vs.http
		if l.name == "rls" {
			lim = vs.rls
		}
		req := domain.Request{Tenant: "a", Route: "r", Limits: []domain.Limit{{Name: "x", Rule: rule, Key: l.key, Cost: 1}}}
		if _, err := lim.Allow(t.Context(), req, nil); err != nil {
			t.Fatalf("%s: %v", l.name, err)
		}
	}
	if n := st.Len(); n != 2 {
		t.Errorf("keys held = %d, want 2 (one store for both views)", n)
	}
}

// TestLeasesBuilt: the HTTP faces' leases are built with
// TOLLGATE_LEASES=auto on a shared store that settles, and not with off,
// in process, or without a settler.
func TestLeasesBuilt(t *testing.T) {
	t.Parallel()
	settler := settlerFunc(func(context.Context, domain.Request, []domain.Decision, int64) error { return nil })
	shared := &sharedStore{}
	for _, tt := range []struct {
		name string
		cfg  Config
		op   opened
		want bool
	}{
		{"auto, shared", Config{Leases: LeasesAuto}, opened{shared: shared, views: views{httpSettler: settler}}, true},
		{"off", Config{Leases: LeasesOff}, opened{shared: shared, views: views{httpSettler: settler}}, false},
		{"in process", Config{Leases: LeasesAuto}, opened{views: views{httpSettler: settler}}, false},
		{"no settler", Config{Leases: LeasesAuto}, opened{shared: shared}, false},
	} {
		l := leases(tt.cfg, tt.op, backendEnv{})
		if got := l != nil; got != tt.want {
			t.Errorf("%s: leases built %v, want %v", tt.name, got, tt.want)
		}
		if l != nil {
			l.Close()
		}
	}
}

type settlerFunc func(context.Context, domain.Request, []domain.Decision, int64) error

func (f settlerFunc) Settle(ctx context.Context, req domain.Request, adm []domain.Decision, used int64) error {
	return f(ctx, req, adm, used)
}
