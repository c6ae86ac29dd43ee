package admin_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
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

// keysFixture is the key API over an engine with a key ring on the
// memory store, the tenants acme and globex in a tenants file.
type keysFixture struct {
	h       http.Handler
	eng     *engine.Engine
	log     *bytes.Buffer
	mu      sync.Mutex
	actions map[string]int
}

func newKeysFixture(t *testing.T, maxPerTenant int) *keysFixture {
	t.Helper()
	store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	ring := engine.NewKeyRing(engine.KeyRingOptions{Store: memory.NewAPIKeys(), MaxPerTenant: maxPerTenant})
	dir := engine.NewDirectory([]engine.Tenant{{ID: "acme"}, {ID: "globex"}}, [][]string{{"k1"}, {"k2"}})
	snap := &engine.Snapshot{Policy: domain.DefaultPolicy(domain.Rule{Limit: 10, Window: time.Minute}, false), Tenants: dir}
	f := &keysFixture{log: new(bytes.Buffer), actions: map[string]int{}}
	f.eng = engine.New(snap, engine.Options{Limiter: store, Keys: keys.Layout{}, KeyRing: ring})
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("admin's own " + r.URL.Path)) })
	var mu sync.Mutex // guards the log buffer
	f.h = admin.WithKeys(inner, admin.KeysOptions{
		Engine: f.eng, Token: token,
		Log: slog.New(slog.NewJSONHandler(lockedWriter{&mu, f.log}, nil)),
		Count: func(a string) {
			f.mu.Lock()
			f.actions[a]++
			f.mu.Unlock()
		},
	})
	return f
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// do sends method path with body (none when empty) and the token.
func (f *keysFixture) do(t *testing.T, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Header.Set("Authorization", "Bearer "+token)
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func (f *keysFixture) count(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.actions[action]
}

// TestKeysAPI: a key is created (201, shown once), listed without the
// key, resolves its tenant, and is revoked (204), with a line of audit
// per change naming the tenant, key id and caller, never the key.
func TestKeysAPI(t *testing.T) {
	t.Parallel()
	f := newKeysFixture(t, 0)
	w := f.do(t, "POST", "/v1/tenants/acme/keys", `{"expires_in": "720h"}`)
	if w.Code != http.StatusCreated {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	var created admin.CreatedKeyBody
	if err := json.Unmarshal(w.Body.Bytes(), &created); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(created.Key, "tg_") || created.Prefix != created.Key[:6] || created.Tenant != "acme" ||
		created.ExpiresAt == nil || created.ExpiresAt.Sub(created.CreatedAt) != 720*time.Hour || w.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("create: %s (Cache-Control %q)", w.Body, w.Header().Get("Cache-Control"))
	}
	if got := f.eng.Resolve(engine.Credentials{Bearer: created.Key}); got.ID != "acme" {
		t.Errorf("the created key resolves to %s", got.ID)
	}
	w = f.do(t, "POST", "/v1/tenants/acme/keys", "")
	var second admin.CreatedKeyBody
	if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &second) != nil || !strings.Contains(w.Body.String(), `"expires_at":null`) {
		t.Fatalf("create without a body: %d %s, want 201 and expires_at null", w.Code, w.Body)
	}

	w = f.do(t, "GET", "/v1/tenants/acme/keys", "")
	var list admin.KeysBody
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &list) != nil {
		t.Fatalf("list: %d %s", w.Code, w.Body)
	}
	if len(list.Keys) != 2 || list.Keys[0].ID != created.ID || list.Keys[1].ID != second.ID || list.MaxKeys != engine.DefaultMaxKeysPerTenant {
		t.Errorf("list: %s, want both keys, oldest first", w.Body)
	}
	if strings.Contains(w.Body.String(), created.Key) || strings.Contains(w.Body.String(), second.Key) {
		t.Errorf("list shows a key: %s", w.Body)
	}

	w = f.do(t, "DELETE", "/v1/tenants/acme/keys/"+created.ID+"?grace=1h", "")
	if w.Code != http.StatusNoContent {
		t.Fatalf("revoke with grace: %d %s", w.Code, w.Body)
	}
	if got := f.eng.Resolve(engine.Credentials{APIKey: created.Key}); got.ID != "acme" {
		t.Errorf("a key in its grace resolves to %s, want acme", got.ID)
	}
	if w = f.do(t, "DELETE", "/v1/tenants/acme/keys/"+second.ID, ""); w.Code != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", w.Code, w.Body)
	}
	if got := f.eng.Resolve(engine.Credentials{APIKey: second.Key}); got.ID != domain.Unknown {
		t.Errorf("a revoked key resolves to %s", got.ID)
	}
	if w = f.do(t, "DELETE", "/v1/tenants/acme/keys/"+second.ID, ""); w.Code != http.StatusNotFound {
		t.Errorf("revoke again: %d %s, want 404", w.Code, w.Body)
	}

	logs := f.log.String()
	for _, want := range []string{
		`"msg":"key API: key created","tenant":"acme","key_id":"` + created.ID + `","client":"192.0.2.1"`,
		`"msg":"key API: key revoked","tenant":"acme","key_id":"` + second.ID + `","grace":"0s","client":"192.0.2.1"`,
		`"msg":"key API: key revoked","tenant":"acme","key_id":"` + created.ID + `","grace":"1h0m0s"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the audit log lacks %s:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, created.Key) || strings.Contains(logs, second.Key) || strings.Contains(logs, created.Key[6:]) {
		t.Errorf("a key in the log:\n%s", logs)
	}
	if f.count("key_create") != 2 || f.count("key_revoke") != 3 || f.count("key_list") != 1 {
		t.Errorf("actions counted %v", f.actions)
	}
}

// TestKeysAPIBadInput: each bad call is a 4xx naming the problem, never
// a 500, and changes nothing.
func TestKeysAPIBadInput(t *testing.T) {
	t.Parallel()
	f := newKeysFixture(t, 2)
	w := f.do(t, "POST", "/v1/tenants/acme/keys", "")
	var k admin.CreatedKeyBody
	if w.Code != http.StatusCreated || json.Unmarshal(w.Body.Bytes(), &k) != nil {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	big := strings.Repeat("x", 10<<20)
	for _, tt := range []struct {
		name, method, path, body string
		code                     int
		says                     string
	}{
		{"an invalid tenant id", "POST", "/v1/tenants/a%20b/keys", "", 400, "invalid tenant id"},
		{"the unknown tenant", "POST", "/v1/tenants/unknown/keys", "", 400, "invalid tenant id"},
		{"a tenant not in the file", "POST", "/v1/tenants/initech/keys", "", 404, `no tenant "initech"`},
		{"list of a tenant not in the file", "GET", "/v1/tenants/initech/keys", "", 404, `no tenant "initech"`},
		{"expires_in that does not parse", "POST", "/v1/tenants/acme/keys", `{"expires_in": "a month"}`, 400, `expires_in "a month"`},
		{"a negative expires_in", "POST", "/v1/tenants/acme/keys", `{"expires_in": "-1h"}`, 400, `expires_in "-1h"`},
		{"a zero expires_in", "POST", "/v1/tenants/acme/keys", `{"expires_in": "0s"}`, 400, `expires_in "0s"`},
		{"expires_in a number", "POST", "/v1/tenants/acme/keys", `{"expires_in": 3600}`, 400, "body: want a JSON object"},
		{"an unknown field", "POST", "/v1/tenants/acme/keys", `{"expires": "1h"}`, 400, "body: want a JSON object"},
		{"trailing data", "POST", "/v1/tenants/acme/keys", `{} {}`, 400, "body: want a JSON object"},
		{"a body of 10 MiB", "POST", "/v1/tenants/acme/keys", big, 413, "body: 10485760 bytes"},
		{"a query on create", "POST", "/v1/tenants/acme/keys?expires_in=1h", "", 400, "query:"},
		{"a key id that does not exist", "DELETE", "/v1/tenants/acme/keys/key_0000000000000000", "", 404, `no live key "key_0000000000000000"`},
		{"another tenant's key", "DELETE", "/v1/tenants/globex/keys/" + k.ID, "", 404, "no live key"},
		{"a grace longer than a day", "DELETE", "/v1/tenants/acme/keys/" + k.ID + "?grace=25h", "", 400, `grace "25h"`},
		{"a negative grace", "DELETE", "/v1/tenants/acme/keys/" + k.ID + "?grace=-1s", "", 400, `grace "-1s"`},
		{"a grace that does not parse", "DELETE", "/v1/tenants/acme/keys/" + k.ID + "?grace=soon", "", 400, `grace "soon"`},
		{"a misspelt grace", "DELETE", "/v1/tenants/acme/keys/" + k.ID + "?Grace=1h", "", 400, `unknown parameter "Grace"`},
		{"another method", "PUT", "/v1/tenants/acme/keys", "", 405, "method not allowed"},
		{"another method on a key", "PATCH", "/v1/tenants/acme/keys/" + k.ID, "", 405, "DELETE /v1/tenants/{id}/keys/{key}"},
	} {
		w := f.do(t, tt.method, tt.path, tt.body)
		var e struct{ Error string }
		if w.Code != tt.code || json.Unmarshal(w.Body.Bytes(), &e) != nil || !strings.Contains(e.Error, tt.says) {
			t.Errorf("%s: %d %s, want %d saying %s", tt.name, w.Code, strings.TrimSpace(w.Body.String()), tt.code, tt.says)
		}
	}
	// A chunked body past the bound, with no Content-Length.
	r := httptest.NewRequest("POST", "/v1/tenants/acme/keys", io.MultiReader(strings.NewReader(`{"expires_in": "`), strings.NewReader(big)))
	r.ContentLength = -1
	r.Header.Set("Authorization", "Bearer "+token)
	w = httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a chunked body of 10 MiB: %d %s, want 413", w.Code, w.Body)
	}
	if w := f.do(t, "GET", "/v1/tenants/acme/keys", ""); !strings.Contains(w.Body.String(), k.ID) || strings.Count(w.Body.String(), `"id"`) != 1 {
		t.Errorf("after the bad calls, the tenant's keys are %s, want the one created", w.Body)
	}
	// The bound: 2 keys, then 409; nothing created.
	if w := f.do(t, "POST", "/v1/tenants/acme/keys", ""); w.Code != http.StatusCreated {
		t.Fatalf("the second key: %d %s", w.Code, w.Body)
	}
	if w := f.do(t, "POST", "/v1/tenants/acme/keys", ""); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "2 live keys") {
		t.Errorf("a key past the bound: %d %s, want 409", w.Code, w.Body)
	}
	// Without the token: 401, nothing looked at.
	r = httptest.NewRequest("POST", "/v1/tenants/acme/keys", nil)
	w = httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	if w.Code != http.StatusUnauthorized || f.count("unauthorized") != 1 {
		t.Errorf("without the token: %d, unauthorized counted %d", w.Code, f.count("unauthorized"))
	}
	// Other paths reach the admin listener's own handler.
	if w := f.do(t, "GET", "/v1/tenants/acme/usage", ""); w.Body.String() != "admin's own /v1/tenants/acme/usage" {
		t.Errorf("another path: %d %s", w.Code, w.Body)
	}
}
