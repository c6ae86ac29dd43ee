package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/ports"
)

// routeRecorder records the routes the observer is told of.
type routeRecorder struct {
	recorder
	routes []*domain.Route
}

func (r *routeRecorder) Decided(route *domain.Route, v domain.Verdict, took time.Duration) {
	r.recorder.Decided(route, v, took)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.routes = append(r.routes, route)
}

// TestDecidePlanned: a planned request reaches the planned limiter (not
// Decide's) as it is, and the observer with no route; descriptor keys carry the engine's
// prefix and algorithm; a full store is an error (no shared subject to
// decide it as).
func TestDecidePlanned(t *testing.T) {
	t.Parallel()
	rec := &routeRecorder{}
	e := engine.New(&engine.Snapshot{Policy: examplePolicy(t)},
		engine.Options{Limiter: &routeRecorder{}, Planned: rec, Keys: keys.Layout{Prefix: "p:", Algorithm: domain.AlgorithmTokenBucket}, Algorithm: domain.AlgorithmTokenBucket, Observer: rec})
	key := string(e.AppendDescriptorKey(nil, "edge", time.Minute, []byte("k_v_")))
	if want := "p:{rls:edge}:token_bucket:60s:k_v_"; key != want {
		t.Errorf("AppendDescriptorKey = %q, want %q", key, want)
	}
	req := domain.Request{Tenant: domain.TenantID(key), Route: "edge",
		Limits: []domain.Limit{{Key: key, Rule: domain.Rule{Limit: 5, Window: time.Minute}, Cost: 2}, {Key: key + "x", Rule: domain.Rule{Limit: 5, Window: time.Minute}, Quota: true}}}
	v, err := e.DecidePlanned(t.Context(), req, nil)
	if err != nil || !v.Allowed || len(v.Decisions) != 2 {
		t.Fatalf("DecidePlanned: %+v, %v", v, err)
	}
	got := rec.last()
	if got.Tenant != req.Tenant || got.Route != "edge" || got.Limits[0].Cost != 2 || got.Limits[1].Cost != 0 || !got.Limits[1].Quota {
		t.Errorf("the limiter got %+v, want the planned request as it is", got)
	}
	if len(rec.routes) != 1 || rec.routes[0] != nil {
		t.Errorf("observer told of routes %v, want one nil", rec.routes)
	}
	rec.err = func(domain.Request) error { return ports.ErrStoreFull }
	if _, err := e.DecidePlanned(t.Context(), req, nil); !errors.Is(err, ports.ErrStoreFull) {
		t.Errorf("a full store: %v, want ErrStoreFull", err)
	}
	if n := len(rec.reqs); n != 2 {
		t.Errorf("the limiter was asked %d times, want 2 (no retry as another subject)", n)
	}
}
