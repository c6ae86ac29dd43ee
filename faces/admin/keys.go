package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/ports"
)

// MaxKeyBody is the largest body a key's creation takes, in bytes.
const MaxKeyBody = 4 << 10

// keyBodyWait bounds the wait for a creation's body.
const keyBodyWait = 5 * time.Second

// KeysOptions configure [WithKeys].
type KeysOptions struct {
	// Engine issues, lists and revokes keys ([engine.Engine.IssueKey]);
	// it has a key ring. Required.
	Engine *engine.Engine
	// Token is the bearer token every call must present
	// (TOLLGATE_ADMIN_TOKEN). Required.
	Token string
	// Timeout bounds each call's store work. Zero means UsageTimeout.
	Timeout time.Duration
	// Log gets one line per creation and revocation, done or not (the
	// audit trail: tenant, key id, caller's address; never a key), and at
	// most one a second about calls refused for their token. May be nil.
	Log *slog.Logger
	// Count, if not nil, counts each call by action: key_create,
	// key_list, key_revoke or unauthorized (tollgate_admin_actions_total).
	Count func(action string)
}

// KeyBody is a key as the key API shows it: never the key, its first
// characters.
type KeyBody struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	// Prefix is the key's first 6 characters.
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"` // null: never
}

// CreatedKeyBody is the answer to a key's creation: the key, shown this
// once.
type CreatedKeyBody struct {
	KeyBody
	Key string `json:"key"`
}

// KeysBody is the answer to a list of a tenant's keys.
type KeysBody struct {
	Tenant string    `json:"tenant"`
	Keys   []KeyBody `json:"keys"`
	// MaxKeys is how many live keys the tenant may have.
	MaxKeys int `json:"max_keys"`
}

// createKeyRequest is a creation's optional body.
type createKeyRequest struct {
	ExpiresIn *string `json:"expires_in"`
}

// WithKeys returns admin with the key API under /v1/tenants/{id}/keys:
//
//	POST   /v1/tenants/{id}/keys                  a new key, {"expires_in": "720h"} optional: 201 with the key, shown once
//	GET    /v1/tenants/{id}/keys                  the tenant's live keys, never a key
//	DELETE /v1/tenants/{id}/keys/{key}[?grace=d]  the key ends (after grace, at most 24h): 204
//
// Every call needs the bearer token, as the usage API's ([WithUsage]).
// Bad input is a 4xx naming the problem, and changes nothing: 400 for an
// invalid tenant id, body, expires_in or grace, 404 for a tenant a
// tenants file does not hold or a key the tenant does not have live, 409
// for a tenant with as many keys as it may have, 413 for a body over
// MaxKeyBody; 503 (Retry-After: 1) when the store fails. admin gets
// every other request. WithKeys reads the bodies of its own calls: wrap
// it outside [httpface.IgnoreBodies].
func WithKeys(admin http.Handler, opts KeysOptions) http.Handler {
	if opts.Engine == nil || opts.Engine.KeyRing() == nil || opts.Token == "" {
		panic("admin: WithKeys needs an engine with a key ring and a token")
	}
	opts.Timeout, opts.Log, opts.Count = apiDefaults(opts.Timeout, opts.Log, opts.Count)
	auth := newBearer(opts.Token, opts.Log, opts.Count)
	k := &keysAPI{opts: opts}
	r := chi.NewRouter()
	api := r.With(abandonOthers, auth.authorize)
	api.Post("/v1/tenants/{id}/keys", k.create)
	api.Get("/v1/tenants/{id}/keys", k.list)
	api.Delete("/v1/tenants/{id}/keys/{key}", k.revoke)
	r.NotFound(admin.ServeHTTP)
	r.MethodNotAllowed(abandonOthers(auth.authorize(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		allow, what := "GET, POST", "GET or POST /v1/tenants/{id}/keys"
		if !strings.HasSuffix(r.URL.Path, "/keys") {
			allow, what = http.MethodDelete, "DELETE /v1/tenants/{id}/keys/{key}"
		}
		w.Header().Set("Allow", allow)
		writeJSON(w, http.StatusMethodNotAllowed, errorBody{"method not allowed: " + what})
	}))).ServeHTTP)
	return r
}

// abandonOthers abandons the body of every call but a creation, which
// alone reads one (see [httpface.IgnoreBodies]).
func abandonOthers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			httpface.AbandonBody(w, r)
		}
		next.ServeHTTP(w, r)
	})
}

// keysAPI serves the key API.
type keysAPI struct {
	opts KeysOptions
}

// create answers POST /v1/tenants/{id}/keys.
func (k *keysAPI) create(w http.ResponseWriter, r *http.Request) {
	k.opts.Count("key_create")
	id := tenantParam(r)
	code, msg := http.StatusBadRequest, ""
	var expiresIn time.Duration
	switch query, err := url.ParseQuery(r.URL.RawQuery); {
	case err != nil || len(query) > 0:
		msg = "query: a key's creation takes none; its expiry is the body's expires_in"
	default:
		expiresIn, code, msg = readExpiry(w, r)
	}
	if msg != "" {
		httpface.AbandonBody(w, r)
		writeJSON(w, code, errorBody{msg})
		k.notDone("create", id, "", code, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), k.opts.Timeout)
	defer cancel()
	key, rec, err := k.opts.Engine.IssueKey(ctx, id, expiresIn)
	if err != nil {
		code = k.refuse(w, id, "", err)
		k.notDone("create", id, "", code, r)
		return
	}
	writeJSON(w, http.StatusCreated, CreatedKeyBody{KeyBody: keyBody(rec), Key: key})
	attrs := []any{"tenant", string(id), "key_id", rec.ID, "client", peer(r), "status", http.StatusCreated}
	if !rec.ExpiresAt.IsZero() {
		attrs = append(attrs, "expires_at", rec.ExpiresAt.Format(time.RFC3339))
	}
	k.opts.Log.Info("key API: key created", attrs...)
}

// readExpiry reads a creation's body, if any: its expires_in. It returns
// the status and message of a body it refuses.
func readExpiry(w http.ResponseWriter, r *http.Request) (time.Duration, int, string) {
	if r.ContentLength > MaxKeyBody {
		return 0, http.StatusRequestEntityTooLarge, fmt.Sprintf("body: %d bytes; a key's creation takes at most %d", r.ContentLength, MaxKeyBody)
	}
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return 0, 0, ""
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(keyBodyWait))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxKeyBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return 0, http.StatusRequestEntityTooLarge, fmt.Sprintf("body: over %d bytes, the most a key's creation takes", MaxKeyBody)
	case err != nil:
		return 0, http.StatusBadRequest, "body: could not be read"
	case len(strings.TrimSpace(string(body))) == 0:
		return 0, 0, ""
	}
	var req createKeyRequest
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		return 0, http.StatusBadRequest, `body: want a JSON object with one optional field, such as {"expires_in": "720h"}`
	}
	if req.ExpiresIn == nil {
		return 0, 0, ""
	}
	d, err := time.ParseDuration(*req.ExpiresIn)
	if err != nil || d <= 0 || d > engine.MaxKeyLifetime {
		return 0, http.StatusBadRequest, fmt.Sprintf("expires_in %s: want a Go duration after 0s and at most %s, such as \"720h\"", quoted(*req.ExpiresIn), engine.MaxKeyLifetime)
	}
	return d, 0, ""
}

// list answers GET /v1/tenants/{id}/keys.
func (k *keysAPI) list(w http.ResponseWriter, r *http.Request) {
	k.opts.Count("key_list")
	id := tenantParam(r)
	if r.URL.RawQuery != "" {
		writeJSON(w, http.StatusBadRequest, errorBody{"query: a list of keys takes none"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), k.opts.Timeout)
	defer cancel()
	keys, err := k.opts.Engine.Keys(ctx, id)
	if err != nil {
		k.refuse(w, id, "", err)
		return
	}
	body := KeysBody{Tenant: string(id), Keys: make([]KeyBody, len(keys)), MaxKeys: k.opts.Engine.KeyRing().MaxPerTenant()}
	for i, rec := range keys {
		body.Keys[i] = keyBody(rec)
	}
	writeJSON(w, http.StatusOK, body)
}

// revoke answers DELETE /v1/tenants/{id}/keys/{key}[?grace=d].
func (k *keysAPI) revoke(w http.ResponseWriter, r *http.Request) {
	k.opts.Count("key_revoke")
	id, keyID := tenantParam(r), chi.URLParam(r, "key")
	var grace time.Duration
	query, err := url.ParseQuery(r.URL.RawQuery)
	vs, named := query["grace"]
	msg := ""
	switch other := otherParam(query, "grace"); {
	case err != nil:
		msg = "query: not a valid URL query; its one parameter is grace, such as ?grace=1h"
	case other != "":
		msg = fmt.Sprintf("query: unknown parameter %s; the one parameter is grace, such as ?grace=1h", quoted(other))
	case !named:
	case len(vs) != 1:
		msg = "grace: give it once, such as ?grace=1h"
	default:
		grace, err = time.ParseDuration(vs[0])
		if err != nil || grace < 0 || grace > engine.MaxKeyGrace {
			msg = fmt.Sprintf("grace %s: want a Go duration from 0s to %s, such as \"1h\"", quoted(vs[0]), engine.MaxKeyGrace)
		}
	}
	if msg != "" {
		writeJSON(w, http.StatusBadRequest, errorBody{msg})
		k.notDone("revoke", id, keyID, http.StatusBadRequest, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), k.opts.Timeout)
	defer cancel()
	rec, err := k.opts.Engine.RevokeKey(ctx, id, keyID, grace)
	if err != nil {
		code := k.refuse(w, id, keyID, err)
		k.notDone("revoke", id, keyID, code, r)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
	k.opts.Log.Info("key API: key revoked", "tenant", string(id), "key_id", rec.ID, "grace", grace.String(),
		"client", peer(r), "status", http.StatusNoContent)
}

// refuse answers err, an error of the engine's key calls about tenant id
// (and key keyID), and returns the status.
func (k *keysAPI) refuse(w http.ResponseWriter, id domain.TenantID, keyID string, err error) int {
	code, msg := http.StatusBadRequest, ""
	switch {
	case errors.Is(err, domain.ErrInvalidTenant):
		msg = fmt.Sprintf("invalid tenant id %s: want 1 to %d of A-Z a-z 0-9 . _ -, not %q", quoted(string(id)), domain.MaxTenantIDLen, domain.Unknown)
	case errors.Is(err, engine.ErrNoTenant):
		code, msg = http.StatusNotFound, fmt.Sprintf("no tenant %q in the tenants file", id)
	case errors.Is(err, ports.ErrNoAPIKey):
		code, msg = http.StatusNotFound, fmt.Sprintf("no live key %s of tenant %q", quoted(keyID), id)
	case errors.Is(err, ports.ErrTooManyKeys):
		code, msg = http.StatusConflict, fmt.Sprintf("tenant %q has %d live keys, the most it may: revoke one first", id, k.opts.Engine.KeyRing().MaxPerTenant())
	case errors.Is(err, engine.ErrKeyLifetime), errors.Is(err, engine.ErrKeyGrace):
		msg = strings.TrimPrefix(err.Error(), "engine: ")
	default:
		w.Header().Set("Retry-After", "1")
		code, msg = http.StatusServiceUnavailable, "key store unavailable"
		k.opts.Log.Error("key API: the key store failed", "tenant", clipped(string(id)), "err", err)
	}
	writeJSON(w, code, errorBody{msg})
	return code
}

// notDone writes the audit line of a creation or revocation refused.
func (k *keysAPI) notDone(what string, id domain.TenantID, keyID string, code int, r *http.Request) {
	attrs := []any{"tenant", clipped(string(id))}
	if keyID != "" {
		attrs = append(attrs, "key_id", clipped(keyID))
	}
	msg := "key API: " + what + " not done"
	if code == http.StatusServiceUnavailable {
		msg = "key API: " + what + " failed: the store did not answer (it may still make it)"
	}
	k.opts.Log.Warn(msg, append(attrs, "client", peer(r), "status", code)...)
}

// keyBody is rec as the key API shows it.
func keyBody(rec ports.APIKey) KeyBody {
	b := KeyBody{ID: rec.ID, Tenant: string(rec.Tenant), Prefix: rec.Prefix, CreatedAt: rec.CreatedAt.UTC()}
	if !rec.ExpiresAt.IsZero() {
		t := rec.ExpiresAt.UTC()
		b.ExpiresAt = &t
	}
	return b
}
