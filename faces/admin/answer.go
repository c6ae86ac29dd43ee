package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
)

// The usage API's answers: its bodies, and the status of each outcome.

// UsageBody is the usage API's answer about one tenant.
type UsageBody struct {
	Tenant string      `json:"tenant"`
	Limits []LimitBody `json:"limits"`
}

// LimitBody is one limit in a [UsageBody], in the route's cost units.
type LimitBody struct {
	// Name is the limit's name; Route the route whose own limit it is,
	// "" for a global limit.
	Name  string `json:"name"`
	Route string `json:"route"`
	// Algorithm is the algorithm that counts it (fixed_window for a
	// calendar quota, whatever the store's algorithm).
	Algorithm string `json:"algorithm"`
	// Limit is the tenant's budget per window or period.
	Limit int64 `json:"limit"`
	// WindowSeconds is the window, or the current period's real length,
	// in whole seconds (as RateLimit-Policy's w=).
	WindowSeconds int64 `json:"window_seconds"`
	// Period and Timezone are a calendar quota's unit (day, week, month,
	// year) and zone; absent for a window.
	Period   string `json:"period,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Used is what the window or period has spent: Limit − Remaining;
	// for a concurrency limit, InFlight (which may be above Limit).
	Used      int64 `json:"used"`
	Remaining int64 `json:"remaining"`
	// InFlight is a concurrency limit's requests in flight, across every
	// replica (its Remaining: the slots free); absent for a rate limit.
	InFlight *int64 `json:"in_flight,omitempty"`
	// ResetSeconds is the time until the budget is whole again, rounded
	// up (as RateLimit's t=).
	ResetSeconds int64 `json:"reset_seconds"`
	// Shadow is true for a limit in shadow mode: it never denies.
	Shadow bool `json:"shadow"`
	// Meter is what the limit counts: "requests", or "tokens" for the
	// units answers report.
	Meter string `json:"meter"`
	// Reserved is, for a token limit, what requests still in flight
	// have reserved of it (part of Used); absent for any other.
	Reserved *int64 `json:"reserved,omitempty"`
	// Leased is, for a requests limit on a store with leases, the units
	// that replicas hold in slices of it now (part of Used, given back
	// unused within a second); absent when none.
	Leased *int64 `json:"leased,omitempty"`
}

// errorBody is every refusal's body.
type errorBody struct {
	Error string `json:"error"`
}

// answer writes the usage us of tenant id, or err as its status, and
// returns the status.
func (u *usageAPI) answer(w http.ResponseWriter, id domain.TenantID, limit string, us []engine.LimitUsage, err error) int {
	switch {
	case err == nil:
	case errors.Is(err, domain.ErrInvalidTenant):
		writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("invalid tenant id %s: want 1 to %d of A-Z a-z 0-9 . _ -", quoted(string(id)), domain.MaxTenantIDLen)})
		return http.StatusBadRequest
	case errors.Is(err, engine.ErrNoLimit):
		writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("no limit %q in the policy", limit)})
		return http.StatusBadRequest
	case errors.Is(err, engine.ErrNoTenant):
		writeJSON(w, http.StatusNotFound, errorBody{fmt.Sprintf("no tenant %q in the tenants file", id)})
		return http.StatusNotFound
	case errors.Is(err, engine.ErrReadAfterReset):
		u.storeFailed(id, err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{"the reset was made; the usage after it could not be read: store unavailable"})
		return http.StatusServiceUnavailable
	default:
		u.storeFailed(id, err)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{"store unavailable"})
		return http.StatusServiceUnavailable
	}
	writeJSON(w, http.StatusOK, usageBody(id, us))
	return http.StatusOK
}

// usageBody is the answer of tenant id's usage us.
func usageBody(id domain.TenantID, us []engine.LimitUsage) UsageBody {
	body := UsageBody{Tenant: string(id), Limits: make([]LimitBody, len(us))}
	for i, l := range us {
		window := l.Limit.Rule.Window
		b := LimitBody{
			Name:         l.Limit.Name,
			Route:        l.Route,
			Algorithm:    l.Algorithm,
			Limit:        l.Limit.Rule.Limit,
			Used:         l.Used(),
			Remaining:    max(l.Decision.Remaining, 0),
			ResetSeconds: domain.CeilSeconds(l.Decision.ResetAfter),
			Shadow:       l.Limit.Shadow,
			Meter:        l.Meter(),
		}
		if l.Limit.Reserve {
			n := l.Decision.Reserved
			b.Reserved = &n
		} else if n := l.Decision.Reserved; n > 0 {
			b.Leased = &n
		}
		if l.Limit.Concurrency {
			n := l.Used()
			b.InFlight = &n
		}
		if cal := l.Limit.Calendar; cal != nil {
			window = l.Decision.Window
			b.Period = cal.Unit.String()
			b.Timezone = "UTC"
			if cal.Location != nil {
				b.Timezone = cal.Location.String()
			}
		}
		b.WindowSeconds = max(domain.CeilSeconds(window), 1)
		body.Limits[i] = b
	}
	return body
}

// storeFailed logs a call the store failed, at most one line a second
// however many calls fail (a reset's audit line is apart, one per call).
func (u *usageAPI) storeFailed(id domain.TenantID, err error) {
	u.failed.Do(func(n int64) {
		u.opts.Log.Error("usage API: the store failed", "tenant", string(id), "err", err, "failures_since_last_line", n)
	})
}

// quoted is s quoted for an error message, cut at 80 bytes: an id from
// a URL can be anything.
func quoted(s string) string {
	if len(s) > 80 {
		return strconv.Quote(s[:80]) + "…"
	}
	return strconv.Quote(s)
}

// writeJSON writes v as the JSON body of a status answer.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
