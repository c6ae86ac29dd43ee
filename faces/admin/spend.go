package admin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
)

// Bounds of a spend call.
const (
	// maxSpendBody is the largest body a spend takes: its three fields
	// fit many times over.
	maxSpendBody = 4 << 10
	// maxIdempotencyKey is the longest Idempotency-Key, unquoted.
	maxIdempotencyKey = 255
	// IdempotencyWindow is how long a spend's Idempotency-Key is
	// remembered: a retry within it charges nothing and answers as the
	// first call did.
	IdempotencyWindow = 24 * time.Hour
	// spendReadTimeout bounds the reading of a spend's body.
	spendReadTimeout = 5 * time.Second
	// claimTTL is how long a key is claimed while its first call runs.
	claimTTL = time.Minute
)

// unknownOutcome is what is recorded for a key whose call the store
// failed: it may have been charged.
const unknownOutcome = "?"

// refusedBeforeStore reports whether err refused a spend before the store
// was asked: nothing was charged.
func refusedBeforeStore(err error) bool {
	for _, e := range []error{engine.ErrNoLimit, engine.ErrBadAmount, engine.ErrWrongRoute, engine.ErrNoSpend,
		engine.ErrNoTenant, engine.ErrNoUsage, domain.ErrInvalidTenant} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// spendBody is a spend call's JSON body.
type spendBody struct {
	Limit  string          `json:"limit"`
	Amount json.RawMessage `json:"amount"`
	Route  string          `json:"route"`
}

// spend answers POST /v1/tenants/{id}/spend: {"limit", "amount",
// "route"?} charges amount to the tenant's limit now (a cost an
// application reports), and answers the tenant's usage. With an
// Idempotency-Key (a structured-field string), the same key of the same
// tenant within [IdempotencyWindow] charges once: a retry of the same
// call answers what the first answered; of another call, 422; while the
// first runs, 409.
func (u *usageAPI) spend(w http.ResponseWriter, r *http.Request) {
	u.opts.Count("spend")
	id := tenantParam(r)
	if _, err := domain.ParseTenantID(string(id)); err != nil {
		u.answer(w, id, "", nil, err)
		return
	}
	call, err := readSpend(w, r)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
		return
	}
	amount, _ := strconv.ParseInt(string(call.Amount), 10, 64) // readSpend checked it
	key, keyed, err := idempotencyKey(r.Header)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{err.Error()})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), u.opts.Timeout)
	defer cancel()
	fp := fingerprint(id, call.Limit, call.Route, amount)
	if keyed {
		if u.opts.Idempotency == nil {
			writeJSON(w, http.StatusBadRequest, errorBody{"Idempotency-Key: this gateway keeps no record of calls"})
			return
		}
		// Claimed for a minute: a replica that dies mid-call frees the key
		// then; Done keeps it for the whole window.
		first, prior, err := u.opts.Idempotency.Begin(ctx, id, key, claimTTL)
		switch {
		case err != nil:
			u.answer(w, id, "", nil, err)
			return
		case !first && prior == nil:
			w.Header().Set("Retry-After", "1")
			writeJSON(w, http.StatusConflict, errorBody{"Idempotency-Key: a call with this key is still being made; retry later"})
			return
		case !first:
			u.replay(ctx, w, id, fp, prior)
			return
		}
	}
	us, err := u.opts.Engine.Spend(ctx, id, call.Limit, call.Route, amount)
	if err != nil && !errors.Is(err, engine.ErrReadAfterSpend) {
		if keyed {
			if refusedBeforeStore(err) {
				_ = u.opts.Idempotency.Abandon(context.WithoutCancel(ctx), id, key) // nothing was charged: a retry may be
			} else {
				// The store failed: the charge may have landed (a timeout
				// does not say), so a retry of the key must not charge again.
				_ = u.opts.Idempotency.Done(context.WithoutCancel(ctx), id, key, []byte(fp+"\n"+unknownOutcome), IdempotencyWindow)
			}
		}
		u.spendRefused(w, id, call, err)
		return
	}
	var body []byte
	if err == nil {
		body, _ = json.Marshal(usageBody(id, us))
	}
	if keyed {
		// Recorded even when the usage could not be read after the spend:
		// the charge was made, and a retry must not make it again.
		_ = u.opts.Idempotency.Done(context.WithoutCancel(ctx), id, key, append([]byte(fp+"\n"), body...), IdempotencyWindow)
	}
	if err != nil {
		u.storeFailed(id, err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{"the spend was made; the usage after it could not be read: store unavailable"})
		return
	}
	writeBody(w, http.StatusOK, body)
}

// replay answers a repeated call of key: what the first call answered
// when it was the same call (the usage as it is now, when the first could
// not read it), 422 when it was another.
func (u *usageAPI) replay(ctx context.Context, w http.ResponseWriter, id domain.TenantID, fp string, prior []byte) {
	was, body, _ := bytes.Cut(prior, []byte("\n"))
	if string(was) != fp {
		writeJSON(w, http.StatusUnprocessableEntity, errorBody{"Idempotency-Key: already used for another call (another limit, route or amount)"})
		return
	}
	w.Header().Set("Idempotent-Replayed", "true")
	if string(body) == unknownOutcome {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{"Idempotency-Key: the first call with this key failed at the store and may have been charged; read the usage, and report again under a new key if it was not"})
		return
	}
	if len(body) > 0 {
		writeBody(w, http.StatusOK, body)
		return
	}
	us, err := u.opts.Engine.Usage(ctx, id)
	u.answer(w, id, "", us, err)
}

// spendRefused answers a spend the engine refused.
func (u *usageAPI) spendRefused(w http.ResponseWriter, id domain.TenantID, call spendBody, err error) {
	switch {
	case errors.Is(err, engine.ErrNoLimit):
		writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("limit: no limit %s in the policy", quoted(call.Limit))})
	case errors.Is(err, engine.ErrBadAmount):
		writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("amount: want an integer from 0 to %d", engine.MaxSpend)})
	case errors.Is(err, engine.ErrWrongRoute), errors.Is(err, engine.ErrNoSpend):
		writeJSON(w, http.StatusBadRequest, errorBody{trimEngine(err)})
	default:
		u.answer(w, id, call.Limit, nil, err)
	}
}

// readSpend reads and checks a spend's body.
func readSpend(w http.ResponseWriter, r *http.Request) (spendBody, error) {
	var call spendBody
	// A body that stalls must not hold the call (nor its connection).
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(spendReadTimeout))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSpendBody))
	if err != nil {
		return call, fmt.Errorf("body: larger than %d bytes, or cut short", maxSpendBody)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&call); err != nil {
		return call, fmt.Errorf(`body: want a JSON object {"limit": "<name>", "amount": <integer>, "route": "<name>" (optional)}: %v`, err)
	}
	if dec.More() {
		return call, errors.New("body: trailing data after the JSON object")
	}
	switch {
	case !domain.ValidName(call.Limit):
		return call, fmt.Errorf("limit %s: want the name of a limit of the policy", quoted(call.Limit))
	case call.Route != "" && !domain.ValidName(call.Route):
		return call, fmt.Errorf("route %s: want the name of a route of the policy", quoted(call.Route))
	}
	// A JSON integer as it is: not a string, a fraction or an exponent.
	n, err := strconv.ParseInt(string(call.Amount), 10, 64)
	if err != nil || n < 0 || n > engine.MaxSpend {
		got := string(call.Amount)
		if got == "" {
			got = "missing"
		}
		return call, fmt.Errorf("amount %s: want an integer from 0 to %d", clipped(got), engine.MaxSpend)
	}
	return call, nil
}

// idempotencyKey reads the Idempotency-Key header: a structured-field
// string (RFC 8941: double quotes around printable ASCII, \" and \\
// escaped), once at most.
func idempotencyKey(h http.Header) (key string, ok bool, err error) {
	vs := h.Values("Idempotency-Key")
	switch {
	case len(vs) == 0:
		return "", false, nil
	case len(vs) > 1:
		return "", false, errors.New("Idempotency-Key: given more than once")
	}
	v := vs[0]
	bad := fmt.Errorf(`Idempotency-Key: want a quoted string of 1 to %d printable ASCII characters, such as "8e03978e-40d5-43e8-bc93-6894a57f9324"`, maxIdempotencyKey)
	if len(v) < 3 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false, bad
	}
	var b []byte
	for i := 1; i < len(v)-1; i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v)-1 || (v[i] != '"' && v[i] != '\\') {
				return "", false, bad
			}
			b = append(b, v[i])
		case c == '"' || c < 0x20 || c > 0x7e:
			return "", false, bad
		default:
			b = append(b, c)
		}
	}
	if len(b) > maxIdempotencyKey {
		return "", false, bad
	}
	return string(b), true, nil
}

// fingerprint names a spend call, to tell a retry of it from another
// call that reuses its key.
func fingerprint(id domain.TenantID, limit, route string, amount int64) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%d", id, limit, route, amount)))
	return hex.EncodeToString(sum[:])
}

// trimEngine is err's message without the package's prefix.
func trimEngine(err error) string {
	msg := err.Error()
	if len(msg) > 8 && msg[:8] == "engine: " {
		return msg[8:]
	}
	return msg
}

// writeBody writes a JSON body already encoded.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// ReadsBody reports whether the admin listener's handler for r reads its
// body (a spend); the listener abandons every other body unread.
func ReadsBody(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/v1/tenants/") && strings.HasSuffix(r.URL.Path, "/spend")
}
