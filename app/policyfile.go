package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/strictjson"
)

// policyFileVar and tenantsFileVar name the files' variables in errors.
const (
	policyFileVar  = EnvPrefix + "POLICY_FILE"
	tenantsFileVar = EnvPrefix + "TENANTS_FILE"
)

// policyFile is the JSON document of a policy file (TOLLGATE_POLICY_FILE).
type policyFile struct {
	Limits []policyLimitEntry `json:"limits"`
	Routes []policyRouteEntry `json:"routes"`
}

type policyLimitEntry struct {
	Name        string  `json:"name"`
	Limit       *int64  `json:"limit"`  // required
	Window      *string `json:"window"` // required, unless period is given
	Shadow      bool    `json:"shadow"`
	Period      *string `json:"period"`       // a calendar quota: day, week, month, year
	Timezone    *string `json:"timezone"`     // an IANA zone; default UTC
	AnchorDay   *int    `json:"anchor_day"`   // month and year: 1 to 31; default 1
	AnchorMonth *int    `json:"anchor_month"` // year: 1 to 12; default 1
	Concurrency *int64  `json:"concurrency"`  // a concurrency limit: requests in flight, 1 to 10⁶; no limit, window or period
	Meter       *string `json:"meter"`        // "requests" (the default) or "tokens": the units responses report
}

// calendarFields returns e's calendar fields.
func (e policyLimitEntry) calendarFields() calendarFields {
	return calendarFields{Period: e.Period, Timezone: e.Timezone, AnchorDay: e.AnchorDay, AnchorMonth: e.AnchorMonth}
}

type policyRouteEntry struct {
	Name    string             `json:"name"`
	Method  string             `json:"method"` // empty: any
	Path    string             `json:"path"`
	Cost    *int64             `json:"cost"` // nil: 1
	Limits  []policyLimitEntry `json:"limits"`
	Tokens  string             `json:"tokens"`  // where responses report tokens: "openai" or "header:<Name>"
	Reserve *int64             `json:"reserve"` // tokens reserved when a request names no maximum; nil: 1024
}

// LoadPolicyFile reads the policy file at path: named global limits, and
// routes with a cost and limits of their own. With shadowAll
// (TOLLGATE_SHADOW) every limit is in shadow mode. The file is a JSON
// object:
//
//	{"limits": [
//	   {"name": "per-second", "limit": 20, "window": "1s"},
//	   {"name": "per-day", "limit": 100000, "window": "24h", "shadow": true},
//	   {"name": "monthly", "limit": 1000000, "period": "month", "timezone": "Europe/Berlin", "anchor_day": 15},
//	   {"name": "inflight", "concurrency": 5},
//	   {"name": "tpm", "limit": 100000, "window": "1m", "meter": "tokens"}],
//	 "routes": [
//	   {"name": "search", "method": "POST", "path": "/v1/search", "cost": 5},
//	   {"name": "export", "path": "/v1/export", "limits": [{"name": "exports", "limit": 10, "window": "1h"}]},
//	   {"name": "status", "path": "/status", "cost": 0},
//	   {"name": "chat", "method": "POST", "path": "/v1/chat/completions", "tokens": "openai", "reserve": 1024}]}
//
// It is rejected, with a *[strictjson.FileError] naming
// TOLLGATE_POLICY_FILE and every problem on one line, when it does not
// parse (with the line:column), has an unknown field or trailing data,
// repeats a member name in an object or spells a field in another case,
// has no limit at all (neither global nor a route's: it would meter
// nothing), a limit without a limit or window, a window that is not a Go
// duration, a window together with a period, an unknown period or time
// zone, an anchor out of range or given for a period that has none, a
// concurrency together with a limit, window or period (or outside 1 to
// 10⁶), a meter other than "requests" or "tokens", a reserve of 0, or
// anything [domain.NewPolicy] refuses: a bad or duplicate
// name, a bad rule, a bad path or method, a duplicate (method, path), a
// cost outside 0 to 10⁶ or above a limit that applies to its route.
func LoadPolicyFile(path string, shadowAll bool) (*domain.Policy, error) {
	var doc policyFile
	if err := strictjson.ReadFile(policyFileVar, path, &doc, `"limits" and "routes" arrays`); err != nil {
		return nil, err
	}
	p, err := buildPolicy(doc, shadowAll)
	if err != nil {
		return nil, &strictjson.FileError{Var: policyFileVar, Path: path, Err: err}
	}
	return p, nil
}

// buildPolicy validates doc into a policy, reporting every problem on
// one line.
func buildPolicy(doc policyFile, shadowAll bool) (*domain.Policy, error) {
	var problems []string
	limits := func(at string, entries []policyLimitEntry) []domain.PolicyLimit {
		out := make([]domain.PolicyLimit, 0, len(entries))
		for i, e := range entries {
			l, err := e.limit(shadowAll)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s[%d] (name %q): %v", at, i, e.Name, err))
				// A stand-in that passes the checks the entry failed, so
				// that the policy's own checks still report the rest (its
				// name, its limit, the routes) in the same line.
				l = domain.PolicyLimit{Name: e.Name, Rule: domain.Rule{Limit: domain.MaxLimit, Window: domain.MaxWindow}}
				if e.Limit != nil {
					l.Rule.Limit = *e.Limit
				}
			}
			out = append(out, l)
		}
		return out
	}
	global := limits("limits", doc.Limits)
	routes := make([]domain.Route, 0, len(doc.Routes))
	for i, e := range doc.Routes {
		r := domain.Route{Name: e.Name, Method: e.Method, Path: e.Path, Cost: 1, Tokens: e.Tokens,
			Limits: limits(fmt.Sprintf("routes[%d].limits", i), e.Limits)}
		if e.Cost != nil {
			r.Cost = *e.Cost
		}
		if e.Reserve != nil {
			r.Reserve = *e.Reserve
			if r.Reserve == 0 {
				problems = append(problems, fmt.Sprintf("routes[%d] (name %q): reserve 0: want an integer from 1 to %d, or no \"reserve\" for %d",
					i, e.Name, int64(domain.MaxCostUnits), domain.DefaultReserve))
			}
		}
		routes = append(routes, r)
	}
	p, err := domain.NewPolicy(global, routes)
	if err != nil {
		// One line, and the file error says what is invalid already.
		msg := strings.ReplaceAll(err.Error(), "\n", "; ")
		problems = append(problems, strings.ReplaceAll(msg, domain.ErrInvalidPolicy.Error()+": ", ""))
	}
	if len(doc.Limits) == 0 && !slices.ContainsFunc(doc.Routes, func(r policyRouteEntry) bool { return len(r.Limits) > 0 }) {
		problems = append(problems, `no limit at all: want at least one in "limits" or in a route's "limits" (a policy without one meters nothing)`)
	}
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return p, nil
}

// limit returns e as a limit, shadow when e or shadowAll says so: a
// window, a calendar period (a calendar quota), or a concurrency limit.
func (e policyLimitEntry) limit(shadowAll bool) (domain.PolicyLimit, error) {
	l := domain.PolicyLimit{Name: e.Name, Shadow: e.Shadow || shadowAll}
	if e.Meter != nil {
		switch *e.Meter {
		case "requests":
		case "tokens":
			l.Tokens = true
		default:
			return l, fmt.Errorf(`meter %q: want "requests" (the default) or "tokens"`, *e.Meter)
		}
	}
	switch {
	case e.Concurrency != nil && (e.Limit != nil || e.Window != nil || e.Period != nil || e.calendarFields().options()):
		return l, errors.New(`"concurrency" with "limit", "window" or "period": want one or the other (a concurrency limit caps the requests in flight; a rate limit counts them per window)`)
	case e.Concurrency != nil:
		l.Concurrency = true
		l.Rule = domain.Rule{Limit: *e.Concurrency, Window: domain.ConcurrencyWindow}
		return l, nil // NewPolicy validates the cap
	case e.Limit == nil:
		return l, errors.New(`no "limit": want an integer from 1 to 1000000000`)
	case e.Window != nil && e.Period != nil:
		return l, errors.New(`both "window" and "period": want one (a window, or a calendar period)`)
	case e.Period != nil:
		cal, err := e.calendarFields().calendar(nil)
		if err != nil {
			return l, err
		}
		l.Calendar = cal
		l.Rule = domain.Rule{Limit: *e.Limit, Window: domain.NominalWindow(cal.Unit)}
		return l, nil // NewPolicy validates the limit
	case e.calendarFields().options():
		return l, errors.New(`"timezone", "anchor_day" and "anchor_month" need a "period"`)
	case e.Window == nil:
		return l, errors.New(`no "window": want a Go duration, such as "1m" (or a "period": day, week, month, year)`)
	}
	w, err := time.ParseDuration(*e.Window)
	if err != nil {
		return l, fmt.Errorf("window %q: want a Go duration from %s to %s, such as \"1m\"", *e.Window, domain.MinWindow, domain.MaxWindow)
	}
	l.Rule = domain.Rule{Limit: *e.Limit, Window: w}
	return l, nil // NewPolicy validates the rule
}
