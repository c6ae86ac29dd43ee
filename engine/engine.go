package engine

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/throttle"
	"github.com/tollgate/tollgate/ports"
)

// Snapshot is one generation of what the engine decides with: the
// policy, and the tenants of a tenants file (nil: tenants are named by
// a header, with the policy's rules). It is immutable.
type Snapshot struct {
	Policy  *domain.Policy
	Tenants *Directory
}

// Anonymous is how unresolved traffic is metered (TOLLGATE_ANONYMOUS).
type Anonymous uint8

const (
	// AnonymousShared meters all unresolved traffic as the one tenant
	// [domain.Unknown].
	AnonymousShared Anonymous = iota
	// AnonymousPerAddress meters it per client address
	// ([domain.AnonymousSubject]); the tenant is still Unknown.
	AnonymousPerAddress
	// AnonymousReject refuses it: [Engine.Decide] answers a result
	// that is Rejected, nothing spent.
	AnonymousReject
)

// Observer is told of every decision the engine makes, for metrics. Its
// methods must be cheap and safe for concurrent use.
type Observer interface {
	// Decided records a verdict on route, and how long the limiter took.
	// route is nil for a request a face planned ([Engine.DecidePlanned]).
	Decided(route *domain.Route, v domain.Verdict, took time.Duration)
	// StoreFull records a request a full store refused, decided as the
	// shared unknown tenant instead.
	StoreFull()
	// InFlight records that this replica's requests took (delta 1) or
	// gave back (-1) a slot of the concurrency limit named limit.
	InFlight(limit string, delta int)
	// Settled records a request on route that reserved units of its
	// token limits and then used used of them; err is the store's error
	// when the settlement failed.
	Settled(route *domain.Route, reserved, used int64, err error)
}

// Watcher is told who each decision of [Engine.Decide] was about, for
// the views of who is being limited. Watched must be cheap, must never
// block, and must be safe for concurrent use; it must not keep limits
// or v.Decisions past its return.
type Watcher interface {
	// Watched records the verdict v on the request of subject (the
	// tenant, or what unresolved traffic is metered as) on route, from
	// client, over limits (v.Decisions, when not nil, in their order).
	Watched(subject domain.TenantID, route string, client netip.Addr, limits []domain.Limit, v domain.Verdict)
}

// Options configure [New].
type Options struct {
	// Limiter decides the requests of [Engine.Decide]: the store under
	// its layers, counting as the policy's requests count. Required.
	Limiter ports.Limiter
	// Planned decides the requests of [Engine.DecidePlanned]: a view of
	// the same store counting as the planning face needs, under its own
	// layers. Nil means Limiter.
	Planned ports.Limiter
	// PlannedSettler charges what the planned limiter's store refused to
	// spend: the hits of a planned request's limit that denied it (a
	// report of work done, larger than what remained), and with
	// PlannedChargeEvery every limit's hits of a denied request. The
	// planned limiter's own store view, not its layers. May be nil: a
	// denied request's hits are then not charged.
	PlannedSettler ports.Settler
	// PlannedChargeEvery makes a planned request that the store denied
	// charge every one of its limits its hits, as a counter that
	// increments before it decides (envoyproxy/ratelimit's counting),
	// for a planned limiter whose store counts only admitted hits itself.
	PlannedChargeEvery bool
	// Settler settles what requests reserved from token limits: the
	// store itself, not its layers. May be nil when no limit counts
	// tokens: reservations are then never given back.
	Settler ports.Settler
	// Usage reads and resets the store's budgets, for [Engine.Usage] and
	// [Engine.Reset]: the store itself, not its layers; a reset also
	// makes the layers forget the tenant. May be nil: no usage API.
	Usage ports.Usage
	// Keys is the store's key layout: the engine names each limit's key
	// through it. Required.
	Keys ports.Keys
	// Algorithm names the store's algorithm, as the usage API reports
	// it ([LimitUsage].Algorithm). Empty means fixed window.
	Algorithm string
	// Anonymous is how unresolved traffic is metered; IPv6Prefix groups
	// IPv6 clients with AnonymousPerAddress (32–128; 0 means 64).
	Anonymous  Anonymous
	IPv6Prefix int
	// KeyRing holds the API keys issued at runtime, which name tenants
	// beside the tenants file's. May be nil: no key API.
	KeyRing *KeyRing
	// Observer records decisions. May be nil.
	Observer Observer
	// Watcher records who each decision was about. May be nil.
	Watcher Watcher
	// Log gets at most one line a second about requests a shadow limit
	// would have denied, and one a minute about a full store. May be nil.
	Log *slog.Logger
}

// Engine is the decision engine. It is safe for concurrent use by
// multiple goroutines; Decide takes no lock.
type Engine struct {
	opts      Options
	snap      atomic.Pointer[Snapshot]
	shadow    throttle.Log
	fullLog   throttle.Log
	settleLog throttle.Log
	observer  Observer
}

// New returns an engine deciding with snap.
func New(snap *Snapshot, opts Options) *Engine {
	if opts.Limiter == nil || opts.Keys == nil || snap == nil || snap.Policy == nil {
		panic("engine: New needs a limiter, keys and a snapshot with a policy")
	}
	if opts.Algorithm == "" {
		opts.Algorithm = domain.AlgorithmFixedWindow
	}
	if opts.Planned == nil {
		opts.Planned = opts.Limiter
	}
	if opts.IPv6Prefix == 0 {
		opts.IPv6Prefix = 64
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{opts: opts, observer: opts.Observer}
	if e.observer == nil {
		e.observer = nopObserver{}
	}
	e.shadow.Interval = time.Second
	e.fullLog.Interval = time.Minute
	e.settleLog.Interval = time.Second
	e.snap.Store(snap)
	return e
}

// Swap makes snap the engine's snapshot: requests that start after it
// see the new generation whole.
func (e *Engine) Swap(snap *Snapshot) {
	if snap == nil || snap.Policy == nil {
		panic("engine: Swap needs a snapshot with a policy")
	}
	e.snap.Store(snap)
}

// Snapshot returns the current snapshot.
func (e *Engine) Snapshot() *Snapshot { return e.snap.Load() }

// Described is a request as a face describes it.
type Described struct {
	Credentials Credentials
	// Method is the request's method (any case).
	Method string
	// Overrides are the methods the request names for the upstream to
	// serve it as instead (method overrides: X-HTTP-Method-Override, a
	// "_method" query parameter): on each the path must match the route
	// it matches on Method, or Decide refuses the request.
	Overrides []string
	// Path is its path in normal form ([domain.NormalizePath]).
	Path string
	// Client is the client's address (the zero value when unknown).
	Client netip.Addr
	// SkipConcurrency leaves the route's concurrency limits out of the
	// decision: a face that never learns when the request ends (the check
	// endpoint) must not take a slot it could not give back. A route
	// whose every limit is a concurrency limit is then not metered.
	SkipConcurrency bool
	// Units is what the request asks to reserve from the token limits
	// of a route that names a token source ([domain.Route.Tokens]): the
	// most its answer may use and an estimate of its prompt. 0 means the
	// route's reserve.
	Units int64
	// Least is the smallest reservation that serves the request (its
	// prompt's estimate and one unit more): a token limit with less
	// left denies it. 0 means 1.
	Least int64
	// CheckTokens makes token limits a check, for a face that never
	// learns what an answer used (the check endpoint): the request is
	// admitted while each has anything left, and reserves nothing.
	CheckTokens bool
}

// Result is the engine's answer about a described request.
type Result struct {
	// Tenant is the resolved tenant, [domain.Unknown] for unresolved
	// traffic: what the upstream is told (X-Tenant-ID).
	Tenant domain.TenantID
	// Subject is what was metered: the tenant, or the client's address
	// for unresolved traffic metered per address.
	Subject domain.TenantID
	// Route is the route the request matched.
	Route *domain.Route
	// Metered is false on a route of cost 0 or without limits, and for a
	// Rejected request: nothing was decided, and Limits and Verdict are
	// empty.
	Metered bool
	// Rejected is true for a request that names no tenant when
	// unresolved traffic is refused (AnonymousReject): it must not reach
	// the upstream, and spent nothing.
	Rejected bool
	// Limits are the limits that applied, in the order the rate-limit
	// headers list them, and Verdict the decision on them. When the
	// request took concurrency slots, Verdict.Release gives them back
	// (and counts them out of the observer's InFlight): see
	// [Result.Release].
	Limits  []domain.Limit
	Verdict domain.Verdict
	// Reserved is what an admitted request reserved from its route's
	// token limits (the least over them): what its prompt and answer may
	// use together. 0 when it reserved nothing (no token limit applied,
	// or a fail mode admitted it without the store): its answer is not
	// capped. [Engine.Settle] settles it.
	Reserved int64

	settle bool // Reserved was spent at the store, and Settle settles it
}

// Decide decides d: it resolves the tenant (by API key, a tenants
// file's or one issued at runtime, else without a tenants file by the
// tenant header), matches the route and has the limiter decide its
// limits. Its errors: [domain.ErrInvalidPath] for a path that
// climbs above "/" once read as the most lenient upstream would, and
// [domain.ErrAmbiguousMethod] for a method override on which the path
// matches another route than on d.Method (the face answers 400; nothing
// is spent), and ctx's error when the caller
// went away mid-decision (nobody reads an answer). A store that fails is
// no error: the fail mode inside the limiter answers with a verdict.
func (e *Engine) Decide(ctx context.Context, d Described) (Result, error) {
	matched, err := domain.MatchPath(d.Path)
	if err != nil {
		return Result{}, err
	}
	snap := e.snap.Load()
	tenant, named := e.resolve(snap, d.Credentials)
	res := Result{Tenant: tenant.ID, Subject: tenant.ID}
	res.Route = snap.Policy.Match(d.Method, matched)
	for _, m := range d.Overrides {
		if snap.Policy.Match(m, matched) != res.Route {
			return Result{}, domain.ErrAmbiguousMethod
		}
	}
	if !named && e.opts.Anonymous == AnonymousReject {
		res.Rejected = true
		return res, nil
	}
	if res.Route.Cost == 0 || !metered(res.Route, d.SkipConcurrency) {
		return res, nil
	}
	res.Metered = true
	if tenant.ID == domain.Unknown && e.opts.Anonymous == AnonymousPerAddress && d.Client.IsValid() {
		res.Subject = domain.AnonymousSubject(d.Client, e.opts.IPv6Prefix)
	}
	req, dst := e.request(res.Route, tenant, res.Subject, d)
	start := time.Now()
	v, err := e.opts.Limiter.Allow(ctx, req, dst)
	if errors.Is(err, ports.ErrStoreFull) && res.Subject != domain.Unknown {
		// The store holds as many keys as it may: decide as the shared
		// unknown tenant, whose keys it always admits, never unmetered.
		e.observer.StoreFull()
		e.fullLog.Do(func(n int64) {
			e.opts.Log.Warn("the store is full; deciding new tenants as the unknown tenant",
				"requests_since_last_line", n)
		})
		res.Subject = domain.Unknown
		req, dst = e.request(res.Route, unknownTenant, domain.Unknown, d)
		v, err = e.opts.Limiter.Allow(ctx, req, dst)
	}
	if err != nil {
		return Result{}, err
	}
	e.reserve(ctx, d, &res, req, &v)
	e.observer.Decided(res.Route, v, time.Since(start))
	if e.opts.Watcher != nil {
		e.opts.Watcher.Watched(res.Subject, res.Route.Name, d.Client, req.Limits, v)
	}
	if v.Outcome == domain.OutcomeShadowDenied {
		e.logShadow(res, req, v)
	}
	if v.Release != nil {
		v.Release = e.holding(req.Limits, v)
	}
	res.Limits, res.Verdict = req.Limits, v
	return res, nil
}

var unknownTenant = Tenant{ID: domain.Unknown}

// request builds the request d describes on route, and room for its
// verdict's decisions: one limit per limit of the route that applies
// (the global ones in order, then the route's own; without concurrency
// limits when d skips them, and token limits only on a route that names
// a token source), each with tenant's rule for it, subject's key and
// the route's cost (a token limit: d's reservation).
func (e *Engine) request(route *domain.Route, tenant Tenant, subject domain.TenantID, d Described) (domain.Request, []domain.Decision) {
	applied := route.Applied()
	req := domain.Request{Tenant: subject, Route: route.Name}
	var dst []domain.Decision
	req.Limits, dst = newRequestBuffers(len(applied))
	n := 0
	for i, l := range applied {
		if !applies(route, l, d.SkipConcurrency) {
			continue
		}
		keyRoute := ""
		if route.Own(i) {
			keyRoute = route.Name
		}
		req.Limits[n] = e.limit(tenant, subject, keyRoute, l)
		req.Limits[n].Cost = route.Cost
		if l.Tokens {
			c := d.reservation(route)
			req.Limits[n].Cost, req.Limits[n].Least = c, min(d.least(), c)
		}
		n++
	}
	req.Limits = req.Limits[:n]
	return req, dst
}

// limit returns l as tenant's requests carry it: tenant's rule and
// calendar for it, subject's key, on route when it is the route's own
// (empty for a global limit).
func (e *Engine) limit(tenant Tenant, subject domain.TenantID, route string, l domain.PolicyLimit) domain.Limit {
	kind := ports.KeyRate
	cal := tenant.calendar(l)
	switch {
	case l.Concurrency:
		kind = ports.KeyConcurrency
	case cal != nil:
		kind = ports.KeyCalendar
	}
	return domain.Limit{
		Name:        l.Name,
		Rule:        tenant.rule(l),
		Key:         e.opts.Keys.Limit(subject, route, l.Name, kind),
		Shadow:      l.Shadow,
		Calendar:    cal,
		Concurrency: l.Concurrency,
		Reserve:     l.Tokens,
	}
}

// newRequestBuffers returns room for a request's n limits and for its
// verdict's n decisions (the dst of [ports.Limiter]): one allocation for
// up to two limits, where a slice of each would be two, and two beyond.
// One limit (a policy's default) takes room for one: half the bytes.
func newRequestBuffers(n int) ([]domain.Limit, []domain.Decision) {
	const inline = 2
	switch {
	case n > inline:
		return make([]domain.Limit, n), make([]domain.Decision, 0, n)
	case n == 1:
		b := new(struct {
			limits    [1]domain.Limit
			decisions [1]domain.Decision
		})
		return b.limits[:], b.decisions[:0]
	}
	b := new(struct {
		limits    [inline]domain.Limit
		decisions [inline]domain.Decision
	})
	return b.limits[:n:n], b.decisions[:0:n]
}

// logShadow logs, at most once a second, a request that shadow limits
// would have denied: the route, the tenant and the limits.
func (e *Engine) logShadow(res Result, req domain.Request, v domain.Verdict) {
	e.shadow.Do(func(suppressed int64) {
		e.opts.Log.Info("shadow limit would deny; admitted", "route", res.Route.Name, "tenant", string(res.Subject),
			"limits", shadowDenials(req, v, func(l domain.Limit) string { return l.Name }),
			"shadow_denials_since_last_line", suppressed)
	})
}

// shadowDenials joins, with commas, what names each limit of req whose
// shadow decision in v would have denied.
func shadowDenials(req domain.Request, v domain.Verdict, what func(domain.Limit) string) string {
	var names []string
	for i, d := range v.Decisions {
		if d.Shadow && !d.Allowed {
			names = append(names, what(req.Limits[i]))
		}
	}
	return strings.Join(names, ",")
}

type nopObserver struct{}

func (nopObserver) Decided(*domain.Route, domain.Verdict, time.Duration) {}
func (nopObserver) StoreFull()                                           {}
func (nopObserver) InFlight(string, int)                                 {}
func (nopObserver) Settled(*domain.Route, int64, int64, error)           {}
