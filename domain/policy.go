package domain

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Bounds and names of a [Policy].
const (
	// MaxCost is the largest cost a route may have.
	MaxCost = 1_000_000
	// MaxNameLen is the longest limit or route name.
	MaxNameLen = 32
	// DefaultRoute is the name of the implicit route of every request
	// that matches no route of the policy: cost 1, the global limits.
	DefaultRoute = "default"
	// TokensOpenAI is the token source of OpenAI-compatible APIs: the
	// usage object of a JSON answer or of a stream's events.
	TokensOpenAI = "openai"
	// TokensHeader, followed by a header name, is the token source of an
	// upstream that reports units in a response header or trailer.
	TokensHeader = "header:"
	// DefaultReserve is a token route's reservation when its policy
	// gives none ([Route.Reserve]).
	DefaultReserve = 1024
)

// ErrInvalidPolicy reports a policy that breaks a rule of [NewPolicy].
var ErrInvalidPolicy = errors.New("invalid policy")

// PolicyLimit is one named limit of a policy: a budget every tenant
// has, counted per tenant (a route's own limits: per tenant per route).
type PolicyLimit struct {
	// Name is 1 to 32 of a-z 0-9 - (see [ValidName]); it names the limit
	// in the RateLimit headers, the metrics and the keys.
	Name string
	// Rule is the budget, in cost units per window.
	Rule Rule
	// Shadow reports whether the limit is in shadow mode: decided and
	// spent, but its denials do not deny (see [Settle]).
	Shadow bool
	// Calendar, when set, makes the limit a calendar quota (see
	// [Limit.Calendar]): Rule.Limit per period, and Rule.Window is
	// [NominalWindow] of its unit.
	Calendar *Calendar
	// Concurrency makes the limit a concurrency limit (see
	// [Limit.Concurrency]): Rule.Limit requests in flight at once, 1 to
	// [MaxConcurrency], and Rule.Window is [ConcurrencyWindow] (see
	// [ConcurrencyRule]). A route's cost does not apply to it.
	Concurrency bool
	// Tokens makes the limit count the units responses report (an LLM
	// API's tokens: "meter": "tokens"), not requests: a route's cost does
	// not apply to it, and it applies only on routes that name where the
	// units come from ([Route.Tokens]); elsewhere it is neither decided
	// nor spent. A request reserves from it at admission ([Limit.Reserve])
	// and settles what it used when its answer ends.
	Tokens bool
}

// Route is a set of requests with a cost and limits of their own. A
// route matches a request whose path, as [MatchPath] reads it, starts
// with Path (read so too) at a segment boundary, and, when Method is set,
// whose method is Method (in any case, so that "post" cannot dodge a POST
// route), or GET for a HEAD request (see [Policy.Match]).
type Route struct {
	// Name is 1 to 32 of a-z 0-9 -; it labels the metrics and the keys of
	// the route's own limits.
	Name string
	// Method is an HTTP method, or empty for any.
	Method string
	// Path is a normal path ([NormalizePath]) without a trailing slash,
	// or "/" for every path. It is matched as [MatchPath] reads it:
	// "/files/a%2Fb" matches what "/files/a/b" matches.
	Path string
	// Cost is what a request on the route spends from each of its
	// limits, 0 to [MaxCost]. 0: the route is not metered at all.
	Cost int64
	// Limits are the route's own limits, which apply in addition to the
	// policy's global ones.
	Limits []PolicyLimit
	// Tokens names where a response reports the units its token limits
	// ([PolicyLimit.Tokens]) count: [TokensOpenAI], or [TokensHeader]
	// followed by a header name. Empty: the route spends nothing from
	// token limits, and they do not apply to it.
	Tokens string
	// Reserve is what a request on the route reserves from each token
	// limit when it does not say how much it may use (its body names no
	// maximum, or is not read): 1 to [MaxCostUnits]; [DefaultReserve]
	// when the policy gives none. 0 on a route without Tokens.
	Reserve int64

	applied []PolicyLimit // the global limits, then Limits
	globals int           // how many of applied are global
	match   string        // MatchPath(Path), without a trailing slash but "/"
}

// Applied returns every limit that applies to a request on r: the
// policy's global limits in order, then r's own. It is valid for a
// route returned by a [Policy]; the caller must not modify it.
func (r *Route) Applied() []PolicyLimit { return r.applied }

// Own reports whether the i-th limit of [Route.Applied] is r's own (its
// keys are per tenant per route), not a global one.
func (r *Route) Own(i int) bool { return i >= r.globals }

// Policy is a validated set of named global limits and routes. It is
// immutable, and safe for concurrent use by multiple goroutines.
type Policy struct {
	limits   []PolicyLimit
	routes   []*Route // in matching order: longest match path first, HEAD, another method, none
	declared []*Route // the same, in the order NewPolicy was given them
	def      *Route
	names    map[string]PolicyLimit // every limit, global or a route's
}

// DefaultPolicy returns the policy of a gateway without a policy file:
// one global limit, "default", with rule, and no routes. (On the fixed
// window the gateway's limiter counts its every request, denied ones
// too, [CountEvery]: a limiter's option, set where it is built.)
func DefaultPolicy(rule Rule, shadow bool) *Policy {
	p, err := NewPolicy([]PolicyLimit{{Name: DefaultLimit, Rule: rule, Shadow: shadow}}, nil)
	if err != nil {
		panic("domain: DefaultPolicy: " + err.Error()) // a caller's invalid rule
	}
	return p
}

// NewPolicy validates limits (the global ones) and routes and returns
// their policy. Every problem is reported, joined, each wrapping
// [ErrInvalidPolicy] and naming where it is ("routes[1] (name
// \"export\"): ..."):
//
//   - a limit or route name that is not 1 to 32 of a-z 0-9 -, or used
//     twice: limit names are unique across the whole policy (global and
//     every route's), so that each names one budget in the headers, the
//     metrics and a tenant's overrides; route names are unique, and
//     "default" is the implicit route's;
//   - an invalid rule ([Rule.Validate]); for a calendar limit, an
//     invalid calendar ([Calendar.Validate]) or limit;
//   - a route path that is not a normal path ([NormalizePath]) starting
//     with "/" or that ends with "/" (but "/" itself), or that [MatchPath]
//     refuses, a method that is not an HTTP token, or two routes with one
//     method and path (methods compared in any case, paths as MatchPath
//     reads them: "/a;v=1" is "/a");
//   - a cost outside 0 to [MaxCost], or one above the limit of a limit
//     that applies to the route (no request could ever be admitted); a
//     concurrency limit counts requests, whatever they cost;
//   - a route of cost 0 (not metered at all) with limits of its own,
//     which would never apply;
//   - a concurrency limit outside 1 to [MaxConcurrency], with a
//     calendar, or whose rule is not [ConcurrencyRule]'s, or that
//     counts tokens;
//   - a route's token source that is not [TokensOpenAI] or
//     [TokensHeader] and a header name, a reserve outside 1 to
//     [MaxCostUnits] or without a token source, or a token source on a
//     route of cost 0, or on a route no token limit applies to.
func NewPolicy(limits []PolicyLimit, routes []Route) (*Policy, error) {
	var errs []error
	bad := func(where, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s: %s", ErrInvalidPolicy, where, fmt.Sprintf(format, args...)))
	}
	p := &Policy{limits: append([]PolicyLimit(nil), limits...), names: make(map[string]PolicyLimit)}
	where := make(map[string]string) // limit name → where it was first defined
	checkLimit := func(pos string, l PolicyLimit) {
		at := fmt.Sprintf("%s (name %q)", pos, l.Name)
		if !ValidName(l.Name) {
			bad(at, "bad name: want 1 to %d of a-z 0-9 -", MaxNameLen)
		} else if prev, dup := where[l.Name]; dup {
			bad(at, "duplicate limit name, also %s: limit names are unique across the policy", prev)
		} else {
			where[l.Name] = pos
			p.names[l.Name] = l
		}
		if l.Concurrency && l.Tokens {
			bad(at, `a concurrency limit counts requests in flight, not tokens: drop "meter"`)
		}
		if l.Concurrency {
			if l.Calendar != nil {
				bad(at, "a concurrency limit has no calendar period")
			}
			if want, err := ConcurrencyRule(l.Rule.Limit); err != nil {
				bad(at, "%v", err)
			} else if l.Rule != want {
				bad(at, "a concurrency limit's window is %s, not %s", ConcurrencyWindow, l.Rule.Window)
			}
			return
		}
		if l.Calendar == nil {
			if err := l.Rule.Validate(); err != nil {
				bad(at, "%v", err)
			}
			return
		}
		if err := l.Calendar.Validate(); err != nil {
			bad(at, "%v", err)
		}
		if l.Rule.Limit < 1 || l.Rule.Limit > MaxLimit {
			bad(at, "%v: limit=%d, want 1 to %d", ErrInvalidRule, l.Rule.Limit, MaxLimit)
		}
		if l.Calendar.Unit != 0 && l.Rule.Window != NominalWindow(l.Calendar.Unit) {
			bad(at, "a calendar limit's window is its unit's nominal %s, not %s", NominalWindow(l.Calendar.Unit), l.Rule.Window)
		}
	}
	for i, l := range limits {
		checkLimit(fmt.Sprintf("limits[%d]", i), l)
	}
	routeNames := make(map[string]int)
	type methodPath struct{ method, path string }
	paths := make(map[methodPath]int)
	for i, r := range routes {
		at := fmt.Sprintf("routes[%d] (name %q)", i, r.Name)
		switch j, dup := routeNames[r.Name]; {
		case !ValidName(r.Name):
			bad(at, "bad name: want 1 to %d of a-z 0-9 -", MaxNameLen)
		case r.Name == DefaultRoute:
			bad(at, "the name %q is the implicit route of requests that match no route", DefaultRoute)
		case dup:
			bad(at, "duplicate route name, also routes[%d]", j)
		default:
			routeNames[r.Name] = i
		}
		match := r.Path
		if norm, err := NormalizePath(r.Path); err != nil || norm != r.Path || r.Path == "" || (r.Path != "/" && strings.HasSuffix(r.Path, "/")) {
			want := ""
			if err == nil && norm != "/" {
				want = fmt.Sprintf(": want %q", strings.TrimSuffix(norm, "/"))
			}
			bad(at, "path %q is not a normal path starting with / and without a trailing slash%s", r.Path, want)
		} else if m, err := MatchPath(r.Path); err != nil {
			bad(at, "path %q: %v", r.Path, err)
		} else {
			match = m
			if m != "/" {
				match = strings.TrimSuffix(m, "/")
			}
		}
		if r.Method != "" && !ValidToken(r.Method) {
			bad(at, "method %q is not an HTTP method token", r.Method)
		}
		mp := methodPath{strings.ToUpper(r.Method), match}
		if j, dup := paths[mp]; dup {
			asRead := ""
			if match != r.Path {
				asRead = fmt.Sprintf(" (%q is read as %q)", r.Path, match)
			}
			bad(at, "duplicate route: routes[%d] has the same method and path%s", j, asRead)
		} else {
			paths[mp] = i
		}
		if r.Cost < 0 || r.Cost > MaxCost {
			bad(at, "cost %d: want an integer from 0 to %d", r.Cost, MaxCost)
		}
		if r.Cost == 0 && len(r.Limits) > 0 {
			bad(at, "cost 0 is not metered at all, so the route's own limits would never apply: give it a cost, or drop its limits")
		}
		for k, l := range r.Limits {
			checkLimit(fmt.Sprintf("routes[%d].limits[%d]", i, k), l)
		}
		switch {
		case r.Tokens == "" && r.Reserve != 0:
			bad(at, `"reserve" without "tokens": a route reserves tokens only when it names where they are reported`)
		case r.Tokens != "" && !validTokenSource(r.Tokens):
			bad(at, `tokens %q: want "openai" or "header:<Name>" with an HTTP header name`, r.Tokens)
		case r.Tokens != "" && (r.Reserve < 0 || r.Reserve > MaxCostUnits):
			bad(at, "reserve %d: want an integer from 1 to %d", r.Reserve, int64(MaxCostUnits))
		case r.Tokens != "" && r.Cost == 0:
			bad(at, "cost 0 is not metered at all, so its tokens would never be counted: give it a cost")
		}
		route := r
		if route.Tokens != "" && route.Reserve == 0 {
			route.Reserve = DefaultReserve
		}
		route.Limits = append([]PolicyLimit(nil), r.Limits...)
		route.applied = append(append(make([]PolicyLimit, 0, len(limits)+len(r.Limits)), limits...), r.Limits...)
		route.globals = len(limits)
		route.match = match
		for _, l := range route.applied {
			if route.Cost > l.Rule.Limit && l.Rule.Limit > 0 && !l.Concurrency && !l.Tokens {
				bad(at, "cost %d is above limit %q's limit of %d: no request could ever be admitted", route.Cost, l.Name, l.Rule.Limit)
			}
		}
		if route.Tokens != "" && !route.Tokened() {
			bad(at, `tokens %q, but no limit that applies to the route counts tokens: give one "meter": "tokens"`, route.Tokens)
		}
		p.routes = append(p.routes, &route)
	}
	p.declared = append([]*Route(nil), p.routes...)
	p.def = &Route{Name: DefaultRoute, Path: "/", Cost: 1, applied: p.limits, globals: len(p.limits), match: "/"}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Longest match path first; at equal length HEAD, then another
	// method, then none, which is the order Match wants (see there); then
	// file order (stable), though no two routes tie on all three.
	sort.SliceStable(p.routes, func(i, j int) bool {
		a, b := p.routes[i], p.routes[j]
		if len(a.match) != len(b.match) {
			return len(a.match) > len(b.match)
		}
		return methodRank(a.Method) > methodRank(b.Method)
	})
	return p, nil
}

// Limits returns the policy's global limits, in order. The caller must
// not modify it.
func (p *Policy) Limits() []PolicyLimit { return p.limits }

// Routes returns the policy's routes in matching order, and then the
// implicit route [DefaultRoute]. The caller must not modify them.
func (p *Policy) Routes() []*Route {
	return append(append(make([]*Route, 0, len(p.routes)+1), p.routes...), p.def)
}

// Declared returns the policy's routes in the order they were given
// (the policy file's), without the implicit [DefaultRoute]. The caller
// must not modify them.
func (p *Policy) Declared() []*Route { return p.declared }

// Limit returns the limit named name, global or a route's.
func (p *Policy) Limit(name string) (PolicyLimit, bool) {
	l, ok := p.names[name]
	return l, ok
}

// CheckOverride reports whether rule may replace the rule of p's limit
// named name for a tenant: an error wrapping [ErrInvalidPolicy] when a
// route the limit applies to costs more than rule's limit, as NewPolicy
// refuses for the policy's own rules (no request of that tenant on the
// route could ever be admitted, and its Retry-After would never be
// true).
//
// A concurrency limit's rule must be [ConcurrencyRule]'s (its cost is
// one request, whatever the route's cost).
func (p *Policy) CheckOverride(name string, rule Rule) error {
	if l, ok := p.names[name]; ok && l.Tokens {
		return nil // it counts tokens, whatever a route costs
	}
	if l, ok := p.names[name]; ok && l.Concurrency {
		if want, err := ConcurrencyRule(rule.Limit); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidPolicy, err)
		} else if rule != want {
			return fmt.Errorf("%w: a concurrency limit's window is %s, not %s", ErrInvalidPolicy, ConcurrencyWindow, rule.Window)
		}
		return nil
	}
	for _, r := range p.Routes() {
		if r.Cost <= rule.Limit {
			continue
		}
		for _, l := range r.Applied() {
			if l.Name == name {
				return fmt.Errorf("%w: limit %d is below the cost %d of route %q, which limit %q applies to: no request could ever be admitted",
					ErrInvalidPolicy, rule.Limit, r.Cost, r.Name, name)
			}
		}
	}
	return nil
}

// validTokenSource reports whether s names a token source: [TokensOpenAI],
// or [TokensHeader] followed by an HTTP header name.
func validTokenSource(s string) bool {
	if s == TokensOpenAI {
		return true
	}
	name, ok := strings.CutPrefix(s, TokensHeader)
	return ok && ValidToken(name)
}

// Tokened reports whether a token limit applies to r: r names a token
// source and one of the limits that apply to it counts tokens.
func (r *Route) Tokened() bool {
	if r.Tokens == "" {
		return false
	}
	for _, l := range r.applied {
		if l.Tokens {
			return true
		}
	}
	return false
}
