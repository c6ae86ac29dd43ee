package engine_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/ports"
)

// recorder is a limiter that admits everything and records the requests
// it was asked, and an observer that records the decisions.
type recorder struct {
	mu       sync.Mutex
	reqs     []domain.Request
	decided  []domain.Outcome
	full     int
	inFlight map[string]int             // slots held, by limit
	err      func(domain.Request) error // nil: admit
}

func (r *recorder) Allow(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, req)
	if r.err != nil {
		if err := r.err(req); err != nil {
			return domain.Verdict{}, err
		}
	}
	return domain.Settle(req, domain.CountAdmitted, nil, func(i int, _ int64) domain.Decision {
		return domain.Decision{Allowed: true, Limit: req.Limits[i].Rule.Limit, Remaining: req.Limits[i].Rule.Limit}
	}), nil
}

func (r *recorder) Decided(_ *domain.Route, v domain.Verdict, _ time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.decided = append(r.decided, v.Outcome)
}

func (r *recorder) StoreFull() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.full++
}

func (r *recorder) InFlight(limit string, delta int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight == nil {
		r.inFlight = map[string]int{}
	}
	r.inFlight[limit] += delta
}

func (r *recorder) held(limit string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.inFlight[limit]
}

func (r *recorder) last() domain.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

var hour = time.Hour

func examplePolicy(t *testing.T) *domain.Policy {
	t.Helper()
	p, err := domain.NewPolicy(
		[]domain.PolicyLimit{{Name: "per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}}},
		[]domain.Route{
			{Name: "export", Path: "/v1/export", Cost: 5, Limits: []domain.PolicyLimit{{Name: "exports", Rule: domain.Rule{Limit: 10, Window: hour}}}},
			{Name: "status", Path: "/status", Cost: 0},
			{Name: "get-item", Method: "GET", Path: "/v1/item", Cost: 1},
		})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDecideHeaderMode(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	e := engine.New(&engine.Snapshot{Policy: examplePolicy(t)}, engine.Options{Limiter: rec, Keys: keys.Layout{Prefix: "rl:"}, Observer: rec})
	tests := []struct {
		name, method, path, header string
		route, tenant              string
		metered                    bool
		keys                       []string
		cost                       int64
	}{
		{"global only", "GET", "/v1/other", "acme", "default", "acme", true, []string{"rl:{acme}:per-minute"}, 1},
		{"a route's own limit", "POST", "/v1/export/a", "acme", "export", "acme", true,
			[]string{"rl:{acme}:per-minute", "rl:{acme}:route:export:exports"}, 5},
		{"read as the most lenient upstream", "GET", "/v1%2Fexport", "acme", "export", "acme", true,
			[]string{"rl:{acme}:per-minute", "rl:{acme}:route:export:exports"}, 5},
		{"parameters ignored", "GET", "/v1/export;jsessionid=x", "acme", "export", "acme", true,
			[]string{"rl:{acme}:per-minute", "rl:{acme}:route:export:exports"}, 5},
		{"HEAD on a GET route", "HEAD", "/v1/item", "acme", "get-item", "acme", true, []string{"rl:{acme}:per-minute"}, 1},
		{"unmetered", "GET", "/status", "acme", "status", "acme", false, nil, 0},
		{"invalid tenant is unknown", "GET", "/x", "a/b", "default", "unknown", true, []string{"rl:{unknown}:per-minute"}, 1},
	}
	for _, tt := range tests {
		n := len(rec.reqs)
		res, err := e.Decide(t.Context(), engine.Described{Method: tt.method, Path: tt.path, Credentials: engine.Credentials{Header: tt.header}})
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res.Route.Name != tt.route || string(res.Tenant) != tt.tenant || res.Subject != res.Tenant || res.Metered != tt.metered {
			t.Errorf("%s: route %s tenant %s subject %s metered %v; want %s, %s, %v", tt.name, res.Route.Name, res.Tenant, res.Subject, res.Metered, tt.route, tt.tenant, tt.metered)
		}
		if !tt.metered {
			if len(rec.reqs) != n || res.Limits != nil {
				t.Errorf("%s: an unmetered route reached the limiter", tt.name)
			}
			continue
		}
		req := rec.last()
		if len(req.Limits) != len(tt.keys) || !res.Verdict.Allowed {
			t.Errorf("%s: request %+v, want keys %v", tt.name, req, tt.keys)
			continue
		}
		for i, k := range tt.keys {
			if req.Limits[i].Key != k || res.Limits[i].Key != k {
				t.Errorf("%s: key %d %q, want %q", tt.name, i, req.Limits[i].Key, k)
			}
			if req.Limits[i].Cost != tt.cost {
				t.Errorf("%s: limit %d costs %d, want the route's %d", tt.name, i, req.Limits[i].Cost, tt.cost)
			}
		}
	}
	if got := len(rec.decided); got != 6 {
		t.Errorf("observer told of %d decisions, want 6 (not the unmetered one)", got)
	}
	// A path that climbs above / once read leniently spends nothing.
	n := len(rec.reqs)
	for _, p := range []string{"/status/..;/..;/x", "/..;/admin"} {
		if _, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: p}); !errors.Is(err, domain.ErrInvalidPath) {
			t.Errorf("%s: err %v, want ErrInvalidPath", p, err)
		}
	}
	if len(rec.reqs) != n {
		t.Error("an invalid path reached the limiter")
	}
}

// TestDecideDefaultPolicy: without a policy file (DefaultPolicy) the one
// limit "default" costs 1 under the key {unknown} of an unnamed tenant;
// how it counts is the limiter's option (the composition root's).
func TestDecideDefaultPolicy(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	e := engine.New(&engine.Snapshot{Policy: domain.DefaultPolicy(domain.Rule{Limit: 5, Window: hour}, false)}, engine.Options{Keys: keys.Layout{}, Limiter: rec})
	if _, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/"}); err != nil {
		t.Fatal(err)
	}
	if req := rec.last(); len(req.Limits) != 1 || req.Limits[0].Key != "{unknown}" || req.Limits[0].Cost != 1 {
		t.Errorf("default policy: %+v, want one limit of cost 1 under the key {unknown}", req)
	}
}

func TestDecideFileTenants(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	p := examplePolicy(t)
	dir := engine.NewDirectory(
		[]engine.Tenant{{ID: "acme", Rules: map[string]domain.Rule{"exports": {Limit: 50, Window: hour}}}, {ID: "globex"}},
		[][]string{{"k-acme"}, {"k-globex"}})
	e := engine.New(&engine.Snapshot{Policy: p, Tenants: dir}, engine.Options{Keys: keys.Layout{}, Limiter: rec})
	for _, tt := range []struct {
		creds  engine.Credentials
		tenant domain.TenantID
		rule   int64 // of exports
	}{
		{engine.Credentials{APIKey: "k-acme"}, "acme", 50},
		{engine.Credentials{Bearer: "k-globex"}, "globex", 10},
		{engine.Credentials{APIKey: "k-globex", Bearer: "k-acme"}, "globex", 10},
		{engine.Credentials{APIKey: "nope", Bearer: "k-acme"}, "acme", 50},
		{engine.Credentials{Header: "acme"}, domain.Unknown, 10}, // the header is ignored
	} {
		res, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/v1/export", Credentials: tt.creds})
		if err != nil {
			t.Fatal(err)
		}
		if res.Tenant != tt.tenant || res.Limits[1].Rule.Limit != tt.rule {
			t.Errorf("%+v: tenant %s exports %d, want %s and %d", tt.creds, res.Tenant, res.Limits[1].Rule.Limit, tt.tenant, tt.rule)
		}
	}
	if !e.UsesAPIKeys() || !e.KnownKey("k-acme") || e.KnownKey("k-acme-2") {
		t.Error("UsesAPIKeys/KnownKey disagree with the directory")
	}
}

// TestDecideAnonymousPerAddress: unresolved traffic is metered per client
// address (IPv6 per prefix), keys carrying the address in the hash tag;
// the tenant is still unknown, and resolved tenants are not affected.
func TestDecideAnonymousPerAddress(t *testing.T) {
	t.Parallel()
	rec := &recorder{}
	e := engine.New(&engine.Snapshot{Policy: domain.DefaultPolicy(domain.Rule{Limit: 5, Window: hour}, false)},
		engine.Options{Limiter: rec, Keys: keys.Layout{Prefix: "rl:"}, Anonymous: engine.AnonymousPerAddress, IPv6Prefix: 64})
	for _, tt := range []struct {
		client, header, subject, key string
	}{
		{"203.0.113.7", "", "ip:203.0.113.7", "rl:{ip:203.0.113.7}"},
		{"::ffff:203.0.113.7", "", "ip:203.0.113.7", "rl:{ip:203.0.113.7}"},
		{"2001:db8:1:2:3:4:5:6", "", "ip:2001:db8:1:2::/64", "rl:{ip:2001:db8:1:2::/64}"},
		{"2001:db8:1:2:ffff::1", "", "ip:2001:db8:1:2::/64", "rl:{ip:2001:db8:1:2::/64}"},
		{"203.0.113.7", "acme", "acme", "rl:{acme}"},
	} {
		res, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/", Client: netip.MustParseAddr(tt.client),
			Credentials: engine.Credentials{Header: tt.header}})
		if err != nil {
			t.Fatal(err)
		}
		wantTenant := domain.TenantID(tt.header)
		if wantTenant == "" {
			wantTenant = domain.Unknown
		}
		if string(res.Subject) != tt.subject || res.Tenant != wantTenant || rec.last().Limits[0].Key != tt.key {
			t.Errorf("%s: subject %s tenant %s key %s, want %s, %s, %s", tt.client, res.Subject, res.Tenant, rec.last().Limits[0].Key, tt.subject, wantTenant, tt.key)
		}
	}
	// Without an address (a Unix socket), the shared unknown.
	res, _ := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/"})
	if res.Subject != domain.Unknown {
		t.Errorf("no address: subject %s, want unknown", res.Subject)
	}
}

// TestDecideStoreFull: a full store's refusal is decided again as the
// shared unknown tenant, never admitted unmetered, and observed; so is a
// full memory under the local fail mode, while the store fails (never
// admitting a new tenant unmetered).
func TestDecideStoreFull(t *testing.T) {
	t.Parallel()
	down := ports.LimiterFunc(func(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) {
		return domain.Verdict{}, errors.New("connection refused")
	})
	for _, tt := range []struct {
		name  string
		stack func(full *memory.Limiter) ports.Limiter
	}{
		{"memory store", func(full *memory.Limiter) ports.Limiter { return full }},
		{"local fail mode", func(full *memory.Limiter) ports.Limiter {
			return ports.Chain(down, layers.FailLocal(layers.LocalOptions{Limiter: full}))
		}},
	} {
		store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{MaxKeys: 2, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer store.Close()
		rec := &recorder{}
		e := engine.New(&engine.Snapshot{Policy: domain.DefaultPolicy(domain.Rule{Limit: 3, Window: hour}, false)},
			engine.Options{Limiter: tt.stack(store), Keys: keys.Layout{Prefix: "rl:"}, Observer: rec})
		decide := func(tenant string) engine.Result {
			res, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/", Credentials: engine.Credentials{Header: tenant}})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		decide("a")
		decide("b")
		for i := range 4 {
			res := decide("c" + string(rune('0'+i)))
			if res.Subject != domain.Unknown || res.Limits[0].Key != "rl:{unknown}" || res.Verdict.Decisions == nil {
				t.Fatalf("%s: a new tenant in a full store: %+v, want decided as unknown", tt.name, res)
			}
			if allowed := res.Verdict.Allowed; allowed != (i < 3) {
				t.Errorf("%s: request %d as unknown: allowed %v, want %v (unknown's budget of 3)", tt.name, i+1, allowed, i < 3)
			}
		}
		if rec.full != 4 {
			t.Errorf("%s: StoreFull observed %d times, want 4", tt.name, rec.full)
		}
		if res := decide("a"); res.Subject != "a" {
			t.Errorf("%s: a held tenant when full: subject %s, want a", tt.name, res.Subject)
		}
	}
}

// TestDecideCallerGone: a caller that went away gets the limiter's error;
// nothing is observed.
func TestDecideCallerGone(t *testing.T) {
	t.Parallel()
	rec := &recorder{err: func(domain.Request) error { return context.Canceled }}
	e := engine.New(&engine.Snapshot{Policy: domain.DefaultPolicy(domain.Rule{Limit: 3, Window: hour}, false)},
		engine.Options{Keys: keys.Layout{}, Limiter: rec, Observer: rec})
	if _, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err %v, want context.Canceled", err)
	}
	if len(rec.decided) != 0 {
		t.Error("a decision nobody reads was observed")
	}
}

func TestNewPanicsWithoutLimiter(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("New without a limiter did not panic")
		}
	}()
	engine.New(&engine.Snapshot{Policy: domain.DefaultPolicy(domain.Rule{Limit: 1, Window: hour}, false)}, engine.Options{})
}

var _ ports.Limiter = (*recorder)(nil)

// slotsPolicy has a global concurrency limit of 2 beside a rate limit,
// a route of its own with a concurrency limit only, and one of cost 9.
func slotsPolicy(t *testing.T) *domain.Policy {
	t.Helper()
	slots := func(name string, n int64) domain.PolicyLimit {
		return domain.PolicyLimit{Name: name, Rule: domain.Rule{Limit: n, Window: domain.ConcurrencyWindow}, Concurrency: true}
	}
	p, err := domain.NewPolicy(
		[]domain.PolicyLimit{{Name: "per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}}, slots("inflight", 2)},
		[]domain.Route{
			{Name: "heavy", Path: "/heavy", Cost: 9},
		})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDecideSlots: a concurrency limit's request carries it with the
// in_flight key whatever the algorithm and the tenant's own cap; the
// result's Release gives the slot back once, and the observer counts the
// slots held; a face that never learns when a request ends leaves them
// out.
func TestDecideSlots(t *testing.T) {
	t.Parallel()
	store, err := memory.New(domain.AlgorithmSlidingLog, memory.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rec := &recorder{}
	tenants := engine.NewDirectory([]engine.Tenant{{ID: "big", Rules: map[string]domain.Rule{"inflight": {Limit: 3, Window: domain.ConcurrencyWindow}}}},
		[][]string{{"k-big"}})
	e := engine.New(&engine.Snapshot{Policy: slotsPolicy(t), Tenants: tenants},
		engine.Options{Limiter: store, Keys: keys.Layout{Prefix: "rl:", Algorithm: domain.AlgorithmSlidingLog}, Algorithm: domain.AlgorithmSlidingLog, Observer: rec})
	big := engine.Described{Method: "GET", Path: "/heavy", Credentials: engine.Credentials{APIKey: "k-big"}}
	var held []engine.Result
	for i := range 3 {
		res, err := e.Decide(t.Context(), big)
		if err != nil || !res.Verdict.Allowed || res.Verdict.Release == nil {
			t.Fatalf("request %d: %+v, %v; want admitted holding a slot", i+1, res.Verdict, err)
		}
		if l := res.Limits[1]; !l.Concurrency || l.Key != "rl:{big}:in_flight:inflight" || l.Rule.Limit != 3 {
			t.Errorf("the concurrency limit: %+v, want the tenant's 3 under rl:{big}:in_flight:inflight", l)
		}
		held = append(held, res)
	}
	if got := rec.held("inflight"); got != 3 {
		t.Errorf("observer: %d slots held, want 3", got)
	}
	if res, _ := e.Decide(t.Context(), big); res.Verdict.Allowed {
		t.Fatalf("a fourth request: %+v, want denied for want of a slot", res.Verdict)
	}
	held[0].Release()
	held[0].Release()
	if got := rec.held("inflight"); got != 2 {
		t.Errorf("observer after one request ended (released twice): %d slots held, want 2", got)
	}
	res, err := e.Decide(t.Context(), big)
	if err != nil || !res.Verdict.Allowed {
		t.Fatalf("after one ended: %+v, %v; want admitted", res.Verdict, err)
	}
	if again, _ := e.Decide(t.Context(), big); again.Verdict.Allowed {
		t.Fatalf("a second Release gave back another slot: %+v", again.Verdict)
	}
	res.Release()
	for _, r := range held[1:] {
		r.Release()
	}
	if got := rec.held("inflight"); got != 0 {
		t.Errorf("observer after every request ended: %d slots held, want 0", got)
	}
	(engine.Result{}).Release() // nothing held: nothing to do

	// The check endpoint's decisions leave the concurrency limit out.
	for range 2 { // 4 admitted of cost 9 so far: 2 more fit in 60
		d := big
		d.SkipConcurrency = true
		res, err := e.Decide(t.Context(), d)
		if err != nil || !res.Verdict.Allowed || len(res.Limits) != 1 || res.Limits[0].Name != "per-minute" || res.Verdict.Release != nil {
			t.Fatalf("SkipConcurrency: %+v, %v; want the rate limit alone, no slot", res, err)
		}
	}
	if got := rec.held("inflight"); got != 0 {
		t.Errorf("observer after decisions without slots: %d held, want 0", got)
	}
}

// TestDecideSkipConcurrencyOnly: a route whose every limit is a
// concurrency limit is not metered where slots are skipped.
func TestDecideSkipConcurrencyOnly(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy(nil, []domain.Route{{Name: "slow", Path: "/slow", Cost: 1, Limits: []domain.PolicyLimit{
		{Name: "inflight", Rule: domain.Rule{Limit: 1, Window: domain.ConcurrencyWindow}, Concurrency: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	e := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: rec, Keys: keys.Layout{Prefix: "rl:"}})
	res, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/slow", SkipConcurrency: true})
	if err != nil || res.Metered || len(rec.reqs) != 0 {
		t.Errorf("SkipConcurrency on a route of concurrency limits only: metered %v, %d store calls, %v; want unmetered", res.Metered, len(rec.reqs), err)
	}
	res, err = e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/slow"})
	if err != nil || !res.Metered || rec.last().Limits[0].Key != "rl:{unknown}:in_flight:route:slow:inflight" {
		t.Errorf("the proxy's decision: metered %v, %v, request %+v; want metered on rl:{unknown}:in_flight:route:slow:inflight", res.Metered, err, rec.reqs)
	}
}

func (r *recorder) Settled(*domain.Route, int64, int64, error) {}
