package engine_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
)

// budgets is a fake store of plain counters, one per key, that honours
// Reserve limits (spend what remains when less than the cost) and
// settles them: enough of a store to test what the engine asks of one.
type budgets struct {
	mu       sync.Mutex
	spent    map[string]int64
	settled  []int64 // used, per settlement
	failNext error
}

func (b *budgets) Allow(_ context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent == nil {
		b.spent = map[string]int64{}
	}
	v := domain.Settle(req, domain.CountAdmitted, dst, func(i int, cost int64) domain.Decision {
		l := req.Limits[i]
		left := l.Rule.Limit - b.spent[l.Key]
		d := domain.Decision{Allowed: cost <= left, Limit: l.Rule.Limit, Remaining: max(left, 0), ResetAfter: time.Minute}
		if d.Allowed {
			d.Remaining -= cost
		} else {
			d.RetryAfter = time.Minute
		}
		return d
	})
	for i, l := range req.Limits {
		if domain.Spends(req, domain.CountAdmitted, v, i) {
			c := l.Cost
			if l.Reserve { // domain.Settle decided it at what remains
				c, v.Decisions[i].Mark = v.Decisions[i].Spent, 1
			}
			b.spent[l.Key] += c
		} else if l.Reserve {
			v.Decisions[i].Spent, v.Decisions[i].Mark = 0, 0
		}
	}
	return v, nil
}

func (b *budgets) Settle(_ context.Context, req domain.Request, adm []domain.Decision, used int64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.failNext; err != nil {
		b.failNext = nil
		return err
	}
	for i, l := range req.Limits {
		if l.Reserve {
			b.spent[l.Key] = max(b.spent[l.Key]+used-adm[i].Spent, 0)
		}
	}
	b.settled = append(b.settled, used)
	return nil
}

func (b *budgets) of(key string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent[key]
}

func tokenPolicy(t *testing.T) *domain.Policy {
	t.Helper()
	p, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "rpm", Rule: domain.Rule{Limit: 100, Window: time.Minute}},
		{Name: "tpm", Rule: domain.Rule{Limit: 1000, Window: time.Minute}, Tokens: true},
	}, []domain.Route{
		{Name: "chat", Method: "POST", Path: "/v1/chat/completions", Cost: 1, Tokens: domain.TokensOpenAI, Reserve: 300},
		{Name: "tokens-only", Path: "/v1/embed", Cost: 1, Tokens: "header:X-Units"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestTokenReserveAndSettle(t *testing.T) {
	t.Parallel()
	store := &budgets{}
	e := engine.New(&engine.Snapshot{Policy: tokenPolicy(t)}, engine.Options{Limiter: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
	const rpm, tpm = "rl:{acme}:rpm", "rl:{acme}:tpm"
	decide := func(d engine.Described) engine.Result {
		t.Helper()
		d.Credentials = engine.Credentials{Header: "acme"}
		if d.Method == "" {
			d.Method, d.Path = "POST", "/v1/chat/completions"
		}
		res, err := e.Decide(t.Context(), d)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}

	// Off a token route, the token limit neither decides nor spends.
	res := decide(engine.Described{Method: "GET", Path: "/other"})
	if len(res.Limits) != 1 || res.Limits[0].Name != "rpm" || res.Reserved != 0 {
		t.Fatalf("off a token route: limits %+v reserved %d, want rpm alone and nothing reserved", res.Limits, res.Reserved)
	}

	// The body's ask is reserved, and settled to what the answer used.
	res = decide(engine.Described{Units: 400, Least: 20})
	if !res.Verdict.Allowed || res.Reserved != 400 || store.of(tpm) != 400 {
		t.Fatalf("reserve 400: allowed %v reserved %d spent %d", res.Verdict.Allowed, res.Reserved, store.of(tpm))
	}
	e.Settle(t.Context(), res, 123)
	if store.of(tpm) != 123 {
		t.Fatalf("settled 123: tpm holds %d", store.of(tpm))
	}

	// No ask: the route's reserve; kept when the answer reported none.
	res = decide(engine.Described{})
	if res.Reserved != 300 {
		t.Fatalf("the route's reserve: reserved %d, want 300", res.Reserved)
	}
	e.Settle(t.Context(), res, engine.KeepReserved)
	if store.of(tpm) != 423 {
		t.Fatalf("kept 300: tpm holds %d, want 423", store.of(tpm))
	}

	// Near the end of the budget, what remains is reserved.
	res = decide(engine.Described{Units: 1000, Least: 10})
	if !res.Verdict.Allowed || res.Reserved != 577 {
		t.Fatalf("clamped: allowed %v reserved %d, want 577", res.Verdict.Allowed, res.Reserved)
	}
	e.Settle(t.Context(), res, 0) // an upstream error: given back
	if store.of(tpm) != 423 {
		t.Fatalf("released: tpm holds %d, want 423", store.of(tpm))
	}

	// Nothing left: the store denies, and nothing is spent.
	res = decide(engine.Described{Units: 600, Least: 500})
	if !res.Verdict.Allowed || res.Reserved != 577 {
		t.Fatalf("a second reservation of the rest: %+v", res.Verdict)
	}
	rpmBefore := store.of(rpm)
	denied := decide(engine.Described{Units: 50, Least: 30})
	d := denied.Verdict.Decisions
	if denied.Verdict.Allowed || denied.Verdict.Outcome != domain.OutcomeDenied || denied.Reserved != 0 ||
		d[1].Allowed || d[1].Remaining != 0 || d[1].RetryAfter <= 0 {
		t.Fatalf("nothing left: %+v, want denied on tpm with nothing remaining and a Retry-After", denied.Verdict)
	}
	e.Settle(t.Context(), res, 577)
	if store.of(tpm) != 1000 || store.of(rpm) != rpmBefore {
		t.Fatalf("after the denial: tpm %d rpm %d", store.of(tpm), store.of(rpm))
	}
	res = decide(engine.Described{Units: 50, Least: 30})
	if res.Verdict.Allowed {
		t.Fatalf("a spent budget admitted: %+v", res.Verdict)
	}
	e.Settle(t.Context(), res, 10) // a denied request settles nothing
	if n := len(store.settled); n != 4 {
		t.Fatalf("%d settlements, want 4: %v", n, store.settled)
	}
}

func TestTokenLeastDeniesAndGivesBack(t *testing.T) {
	t.Parallel()
	store := &budgets{spent: map[string]int64{"rl:{acme}:tpm": 990}}
	e := engine.New(&engine.Snapshot{Policy: tokenPolicy(t)}, engine.Options{Limiter: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
	for range 5 { // a client retrying its 429
		res, err := e.Decide(t.Context(), engine.Described{Method: "POST", Path: "/v1/chat/completions", Units: 200, Least: 50,
			Credentials: engine.Credentials{Header: "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		d := res.Verdict.Decisions
		if res.Verdict.Allowed || d[1].Allowed || d[1].Remaining != 10 || res.Reserved != 0 {
			t.Fatalf("a prompt larger than what remains: %+v; want denied on tpm with 10 remaining", res.Verdict)
		}
	}
	// All or nothing: the denials spent neither tokens nor requests.
	if store.of("rl:{acme}:tpm") != 990 || store.of("rl:{acme}:rpm") != 0 {
		t.Fatalf("after 5 denials: tpm %d rpm %d, want 990 and 0", store.of("rl:{acme}:tpm"), store.of("rl:{acme}:rpm"))
	}
}

func TestTokenCheckReservesNothing(t *testing.T) {
	t.Parallel()
	store := &budgets{spent: map[string]int64{"rl:{acme}:tpm": 999}}
	e := engine.New(&engine.Snapshot{Policy: tokenPolicy(t)}, engine.Options{Limiter: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
	check := func() engine.Result {
		res, err := e.Decide(t.Context(), engine.Described{Method: "POST", Path: "/v1/embed", CheckTokens: true,
			Credentials: engine.Credentials{Header: "acme"}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := check(); !res.Verdict.Allowed || store.of("rl:{acme}:tpm") != 999 {
		t.Fatalf("one token left: allowed %v, tpm %d; want admitted and nothing kept", res.Verdict.Allowed, store.of("rl:{acme}:tpm"))
	}
	store.mu.Lock()
	store.spent["rl:{acme}:tpm"] = 1000
	store.mu.Unlock()
	if res := check(); res.Verdict.Allowed {
		t.Fatal("a spent token budget admitted a check")
	}
}

func TestTokenSettleFailureKeepsReservation(t *testing.T) {
	t.Parallel()
	store := &budgets{}
	e := engine.New(&engine.Snapshot{Policy: tokenPolicy(t)}, engine.Options{Limiter: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
	res, err := e.Decide(t.Context(), engine.Described{Method: "POST", Path: "/v1/chat/completions", Credentials: engine.Credentials{Header: "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	store.mu.Lock()
	store.failNext = errors.New("store down")
	store.mu.Unlock()
	e.Settle(t.Context(), res, 5)
	if got := store.of("rl:{acme}:tpm"); got != 300 {
		t.Fatalf("a failed settlement: tpm holds %d, want the reservation of 300", got)
	}
}

func TestTokensOnlyRouteWithoutSource(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "tpm", Rule: domain.Rule{Limit: 1000, Window: time.Minute}, Tokens: true},
	}, []domain.Route{{Name: "chat", Path: "/v1/chat", Cost: 1, Tokens: domain.TokensOpenAI}})
	if err != nil {
		t.Fatal(err)
	}
	store := &budgets{}
	e := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
	res, err := e.Decide(t.Context(), engine.Described{Method: "GET", Path: "/elsewhere", Credentials: engine.Credentials{Header: "acme"}})
	if err != nil || res.Metered {
		t.Fatalf("a route whose only limit counts tokens, without a source: metered %v, %v; want not metered", res.Metered, err)
	}
}

func (b *budgets) Peek(_ context.Context, req domain.Request) (domain.Verdict, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := domain.Verdict{Allowed: true}
	for _, l := range req.Limits {
		v.Decisions = append(v.Decisions, domain.Decision{Allowed: true, Limit: l.Rule.Limit, Remaining: max(l.Rule.Limit-b.spent[l.Key], 0)})
	}
	return v, nil
}

func (b *budgets) Reset(context.Context, domain.Request) error { return nil }

func TestSpend(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "tpm", Rule: domain.Rule{Limit: 1000, Window: time.Minute}, Tokens: true},
		{Name: "inflight", Rule: domain.Rule{Limit: 2, Window: domain.ConcurrencyWindow}, Concurrency: true},
	}, []domain.Route{{Name: "render", Path: "/render", Cost: 1, Tokens: "header:X-Units",
		Limits: []domain.PolicyLimit{{Name: "pages", Rule: domain.Rule{Limit: 50, Window: time.Hour}, Tokens: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	store := &budgets{spent: map[string]int64{}}
	e := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Settler: store, Usage: store, Keys: keys.Layout{Prefix: "rl:"}})
	us, err := e.Spend(t.Context(), "acme", "tpm", "", 1200)
	if err != nil {
		t.Fatal(err)
	}
	if us[0].Limit.Name != "tpm" || us[0].Decision.Remaining != 0 || us[0].Meter() != "tokens" || store.of("rl:{acme}:tpm") != 1200 {
		t.Fatalf("spent 1200 of 1000: %+v, tpm %d; want it counted past the budget", us[0], store.of("rl:{acme}:tpm"))
	}
	if _, err := e.Spend(t.Context(), "acme", "pages", "render", 7); err != nil || store.of("rl:{acme}:route:render:pages") != 7 {
		t.Fatalf("a route's own limit: %v, spent %d", err, store.of("rl:{acme}:route:render:pages"))
	}
	if _, err := e.Spend(t.Context(), "acme", "pages", "", 1); err != nil || store.of("rl:{acme}:route:render:pages") != 8 {
		t.Fatalf("a route's own limit without the route: %v, spent %d", err, store.of("rl:{acme}:route:render:pages"))
	}
	for _, tt := range []struct {
		id, limit, route string
		amount           int64
		want             error
	}{
		{"acme", "nope", "", 1, engine.ErrNoLimit},
		{"acme", "tpm", "", -1, engine.ErrBadAmount},
		{"acme", "tpm", "", engine.MaxSpend + 1, engine.ErrBadAmount},
		{"acme", "inflight", "", 1, engine.ErrNoSpend},
		{"acme", "pages", "other", 1, engine.ErrWrongRoute},
		{"a/b", "tpm", "", 1, domain.ErrInvalidTenant},
	} {
		if _, err := e.Spend(t.Context(), domain.TenantID(tt.id), tt.limit, tt.route, tt.amount); !errors.Is(err, tt.want) {
			t.Errorf("Spend(%q, %q, %q, %d): %v, want %v", tt.id, tt.limit, tt.route, tt.amount, err, tt.want)
		}
	}
	if store.of("rl:{acme}:tpm") != 1200 {
		t.Errorf("refused spends changed the budget: tpm %d", store.of("rl:{acme}:tpm"))
	}
}

func TestTokenShadowLimitNeverCapsNorDenies(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "tpm", Rule: domain.Rule{Limit: 1000, Window: time.Minute}, Tokens: true},
		{Name: "tpd", Rule: domain.Rule{Limit: 10, Window: 24 * time.Hour}, Tokens: true, Shadow: true},
	}, []domain.Route{{Name: "chat", Path: "/v1/chat", Cost: 1, Tokens: domain.TokensOpenAI}})
	if err != nil {
		t.Fatal(err)
	}
	store := &budgets{spent: map[string]int64{"rl:{acme}:tpd": 10}}
	e := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
	res, err := e.Decide(t.Context(), engine.Described{Method: "POST", Path: "/v1/chat", Units: 200, Least: 20,
		Credentials: engine.Credentials{Header: "acme"}})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Verdict.Allowed || res.Reserved != 200 {
		t.Fatalf("a spent shadow token limit: allowed %v reserved %d, want admitted with 200 reserved", res.Verdict.Allowed, res.Reserved)
	}
}
