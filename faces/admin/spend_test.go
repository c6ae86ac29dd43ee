package admin_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/admin"
)

// counters is a fake store of plain counters, one per key: enough to
// see what a spend charges.
type counters struct {
	mu    sync.Mutex
	spent map[string]int64
	calls int
}

func (c *counters) Allow(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) {
	return domain.Verdict{Allowed: true}, nil
}

func (c *counters) Peek(_ context.Context, req domain.Request) (domain.Verdict, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := domain.Verdict{Allowed: true}
	for _, l := range req.Limits {
		v.Decisions = append(v.Decisions, domain.Decision{Allowed: true, Limit: l.Rule.Limit, Remaining: max(l.Rule.Limit-c.spent[l.Key], 0)})
	}
	return v, nil
}

func (c *counters) Reset(context.Context, domain.Request) error { return nil }

func (c *counters) Settle(_ context.Context, req domain.Request, adm []domain.Decision, used int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	for i, l := range req.Limits {
		if l.Reserve {
			c.spent[l.Key] += used - adm[i].Spent
		}
	}
	return nil
}

func (c *counters) of(key string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spent[key]
}

func spendFixture(t *testing.T) (http.Handler, *counters, *memory.Idempotency) {
	t.Helper()
	p, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "tpm", Rule: domain.Rule{Limit: 1000, Window: time.Minute}, Tokens: true},
		{Name: "rpm", Rule: domain.Rule{Limit: 60, Window: time.Minute}},
		{Name: "inflight", Rule: domain.Rule{Limit: 2, Window: domain.ConcurrencyWindow}, Concurrency: true},
	}, []domain.Route{{Name: "render", Path: "/render", Cost: 1, Tokens: "header:X-Units",
		Limits: []domain.PolicyLimit{{Name: "pages", Rule: domain.Rule{Limit: 50, Window: time.Hour}, Tokens: true}}}})
	if err != nil {
		t.Fatal(err)
	}
	store := &counters{spent: map[string]int64{}}
	eng := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Usage: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
	idem := memory.NewIdempotency(nil)
	inner := http.NotFoundHandler()
	return admin.WithUsage(inner, admin.UsageOptions{Engine: eng, Token: token, Idempotency: idem}), store, idem
}

func spend(t *testing.T, h http.Handler, path, body string, header ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestSpend(t *testing.T) {
	t.Parallel()
	h, store, _ := spendFixture(t)
	w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 700}`)
	if w.Code != http.StatusOK || store.of("rl:{acme}:tpm") != 700 {
		t.Fatalf("spend 700: %d %s, tpm %d", w.Code, w.Body, store.of("rl:{acme}:tpm"))
	}
	var body admin.UsageBody
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if l := body.Limits[0]; l.Name != "tpm" || l.Meter != "tokens" || l.Remaining != 300 || l.Reserved == nil {
		t.Errorf("usage after the spend: %+v, want tpm counting tokens with 300 remaining and a reserved count", l)
	}
	if l := body.Limits[1]; l.Name != "rpm" || l.Meter != "requests" || l.Reserved != nil {
		t.Errorf("a request limit: %+v, want meter requests and no reserved", l)
	}
	// A route's own limit, with its route or without.
	if w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "pages", "amount": 3, "route": "render"}`); w.Code != http.StatusOK {
		t.Fatalf("a route's limit: %d %s", w.Code, w.Body)
	}
	if w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "pages", "amount": 2}`); w.Code != http.StatusOK || store.of("rl:{acme}:route:render:pages") != 5 {
		t.Fatalf("a route's limit without the route: %d %s, pages %d", w.Code, w.Body, store.of("rl:{acme}:route:render:pages"))
	}
	// Past the budget: counted all the same.
	if w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 500}`); w.Code != http.StatusOK || store.of("rl:{acme}:tpm") != 1200 {
		t.Fatalf("past the budget: %d, tpm %d", w.Code, store.of("rl:{acme}:tpm"))
	}
}

func TestSpendRefusals(t *testing.T) {
	t.Parallel()
	h, store, _ := spendFixture(t)
	for _, tt := range []struct {
		name, path, body string
		header           []string
		code             int
		want             string
	}{
		{"not JSON", "/v1/tenants/acme/spend", `limit=tpm&amount=5`, nil, 400, "body: want a JSON object"},
		{"too large", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5, "route": "` + strings.Repeat("a", 10<<20) + `"}`, nil, 400, "larger than 4096 bytes"},
		{"unknown field", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5, "cost": 1}`, nil, 400, `unknown field "cost"`},
		{"trailing data", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5} {}`, nil, 400, "trailing data"},
		{"negative", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": -1}`, nil, 400, "want an integer from 0 to 1000000000"},
		{"too much", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 1000000001}`, nil, 400, "want an integer from 0 to 1000000000"},
		{"a fraction", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 1.5}`, nil, 400, "want an integer"},
		{"an exponent", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 1e3}`, nil, 400, "want an integer"},
		{"a string", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": "5"}`, nil, 400, "want an integer"},
		{"null", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": null}`, nil, 400, "want an integer"},
		{"no amount", "/v1/tenants/acme/spend", `{"limit": "tpm"}`, nil, 400, "want an integer"},
		{"unknown limit", "/v1/tenants/acme/spend", `{"limit": "nope", "amount": 5}`, nil, 400, `no limit "nope" in the policy`},
		{"bad limit name", "/v1/tenants/acme/spend", `{"limit": "No Pe", "amount": 5}`, nil, 400, "want the name of a limit"},
		{"concurrency", "/v1/tenants/acme/spend", `{"limit": "inflight", "amount": 5}`, nil, 400, "concurrency limit"},
		{"another route", "/v1/tenants/acme/spend", `{"limit": "pages", "amount": 5, "route": "chat"}`, nil, 400, `route "render"'s own limit`},
		{"invalid tenant", "/v1/tenants/a%20b/spend", `{"limit": "tpm", "amount": 5}`, nil, 400, "invalid tenant id"},
		{"unquoted key", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5}`, []string{"Idempotency-Key", "abc"}, 400, "Idempotency-Key: want a quoted string"},
		{"empty key", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5}`, []string{"Idempotency-Key", `""`}, 400, "Idempotency-Key"},
		{"key twice", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5}`, []string{"Idempotency-Key", `"a"`, "Idempotency-Key", `"b"`}, 400, "more than once"},
		{"bad escape", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5}`, []string{"Idempotency-Key", `"a\n"`}, 400, "Idempotency-Key"},
		{"long key", "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5}`, []string{"Idempotency-Key", `"` + strings.Repeat("k", 256) + `"`}, 400, "Idempotency-Key"},
	} {
		w := spend(t, h, tt.path, tt.body, tt.header...)
		var e struct{ Error string }
		_ = json.Unmarshal(w.Body.Bytes(), &e)
		if w.Code != tt.code || !strings.Contains(e.Error, tt.want) {
			t.Errorf("%s: %d %s, want %d with %q", tt.name, w.Code, w.Body, tt.code, tt.want)
		}
	}
	if store.calls != 0 {
		t.Errorf("refused spends charged %d times", store.calls)
	}
	// Without the token, nothing at all.
	r := httptest.NewRequest(http.MethodPost, "/v1/tenants/acme/spend", strings.NewReader(`{"limit": "tpm", "amount": 5}`))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized || store.calls != 0 {
		t.Errorf("no token: %d, %d charges", w.Code, store.calls)
	}
}

func TestSpendIdempotencyKey(t *testing.T) {
	t.Parallel()
	h, store, idem := spendFixture(t)
	key := []string{"Idempotency-Key", `"order-42 \"x\""`}
	first := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 40}`, key...)
	again := spend(t, h, "/v1/tenants/acme/spend", `{"amount": 40, "limit": "tpm"}`, key...)
	if first.Code != http.StatusOK || again.Code != http.StatusOK || first.Body.String() != again.Body.String() ||
		again.Header().Get("Idempotent-Replayed") != "true" || store.of("rl:{acme}:tpm") != 40 || store.calls != 1 {
		t.Fatalf("a retried spend: %d %s / %d %s (replayed %q), tpm %d after %d charges; want one charge and the same answer",
			first.Code, first.Body, again.Code, again.Body, again.Header().Get("Idempotent-Replayed"), store.of("rl:{acme}:tpm"), store.calls)
	}
	if w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 41}`, key...); w.Code != http.StatusUnprocessableEntity || store.calls != 1 {
		t.Errorf("the key reused for another amount: %d %s, %d charges; want 422 and none", w.Code, w.Body, store.calls)
	}
	// Another tenant's key of the same name is its own.
	if w := spend(t, h, "/v1/tenants/initech/spend", `{"limit": "tpm", "amount": 40}`, key...); w.Code != http.StatusOK || store.of("rl:{initech}:tpm") != 40 {
		t.Errorf("another tenant, the same key: %d, tpm %d", w.Code, store.of("rl:{initech}:tpm"))
	}
	// A call whose first is still being made: 409, nothing charged.
	if first, _, _ := idem.Begin(t.Context(), "acme", "running", time.Hour); !first {
		t.Fatal("could not claim a key")
	}
	if w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 5}`, "Idempotency-Key", `"running"`); w.Code != http.StatusConflict || w.Header().Get("Retry-After") != "1" {
		t.Errorf("while the first runs: %d %s, want 409 with Retry-After", w.Code, w.Body)
	}
	// A refused call gives its key back: the corrected retry charges.
	if w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "nope", "amount": 5}`, "Idempotency-Key", `"fix"`); w.Code != http.StatusBadRequest {
		t.Fatalf("an unknown limit: %d", w.Code)
	}
	if w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "nope", "amount": 5}`, "Idempotency-Key", `"fix"`); w.Code != http.StatusBadRequest {
		t.Errorf("the same refused call again: %d, want 400 again (not a replay)", w.Code)
	}
}

// failingSettle is counters whose Settle fails after charging: a store
// that timed out on a write it made.
type failingSettle struct{ *counters }

func (f failingSettle) Settle(ctx context.Context, req domain.Request, adm []domain.Decision, used int64) error {
	_ = f.counters.Settle(ctx, req, adm, used)
	return context.DeadlineExceeded
}

func TestSpendStoreFailureChargesOnce(t *testing.T) {
	t.Parallel()
	p, err := domain.NewPolicy([]domain.PolicyLimit{{Name: "tpm", Rule: domain.Rule{Limit: 1000, Window: time.Minute}, Tokens: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	store := &counters{spent: map[string]int64{}}
	eng := engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Usage: store, Settler: failingSettle{store}, Keys: keys.Layout{Prefix: "rl:"}})
	h := admin.WithUsage(http.NotFoundHandler(), admin.UsageOptions{Engine: eng, Token: token, Idempotency: memory.NewIdempotency(nil)})
	for i := range 2 {
		w := spend(t, h, "/v1/tenants/acme/spend", `{"limit": "tpm", "amount": 500}`, "Idempotency-Key", `"k"`)
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("call %d, the store failing: %d %s, want 503", i+1, w.Code, w.Body)
		}
	}
	if got := store.of("rl:{acme}:tpm"); got != 500 {
		t.Errorf("a retried key after a store failure: tpm %d, want 500 (charged once at most)", got)
	}
}
