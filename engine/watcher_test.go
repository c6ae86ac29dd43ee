package engine_test

import (
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
)

// watched is one call of a watcher.
type watched struct {
	subject domain.TenantID
	route   string
	client  netip.Addr
	limits  []string
	allowed bool
}

// watcherFunc records what the engine tells a watcher.
type watcherFunc struct {
	mu    sync.Mutex
	calls []watched
}

func (w *watcherFunc) Watched(subject domain.TenantID, route string, client netip.Addr, limits []domain.Limit, v domain.Verdict) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c := watched{subject: subject, route: route, client: client, allowed: v.Allowed}
	for _, l := range limits {
		c.limits = append(c.limits, l.Name)
	}
	w.calls = append(w.calls, c)
}

// TestWatcher: the watcher hears every metered decision of Decide, with
// the subject metered, the route's name, the client and the limits; an
// unmetered request is not heard.
func TestWatcher(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	p, err := domain.NewPolicy([]domain.PolicyLimit{{Name: "per-minute", Rule: rule}},
		[]domain.Route{
			{Name: "search", Path: "/search", Cost: 1, Limits: []domain.PolicyLimit{{Name: "searches", Rule: rule}}},
			{Name: "free", Path: "/free", Cost: 0},
		})
	if err != nil {
		t.Fatal(err)
	}
	w := &watcherFunc{}
	e := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: &recorder{}, Keys: keys.Layout{Prefix: "rl:"},
		Anonymous: engine.AnonymousPerAddress, Watcher: w})
	client := netip.MustParseAddr("192.0.2.7")
	for _, d := range []engine.Described{
		{Credentials: engine.Credentials{Header: "acme"}, Method: "GET", Path: "/search", Client: client},
		{Method: "GET", Path: "/search", Client: client},
		{Credentials: engine.Credentials{Header: "acme"}, Method: "GET", Path: "/free", Client: client},
	} {
		if _, err := e.Decide(t.Context(), d); err != nil {
			t.Fatal(err)
		}
	}
	if len(w.calls) != 2 {
		t.Fatalf("%d calls, want 2 (the free route is not metered): %+v", len(w.calls), w.calls)
	}
	if c := w.calls[0]; c.subject != "acme" || c.route != "search" || c.client != client || len(c.limits) != 2 || c.limits[0] != "per-minute" || c.limits[1] != "searches" || !c.allowed {
		t.Errorf("first call %+v", c)
	}
	if c := w.calls[1]; c.subject != domain.AnonymousSubject(client, 64) {
		t.Errorf("unresolved traffic watched as %q, want its address's subject", c.subject)
	}
}
