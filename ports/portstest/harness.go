package portstest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// LimiterHarness is what TestLimiter needs to exercise one
// implementation of one algorithm.
type LimiterHarness struct {
	// New returns the Limiter under test. It may be called once per
	// subtest; the limiter must start empty of the keys TestLimiter uses
	// (they are unique per run).
	New func(t *testing.T) ports.Limiter
	// NewView returns a limiter of the store under test deciding by v
	// (New's decides by the zero View), or the error with which the
	// store refuses to build it. TestLimiter runs the counting modes and
	// the windows aligned to the epoch on it, and checks that a store
	// refuses what its algorithm cannot honour.
	NewView func(t *testing.T, v View) (ports.Limiter, error)
	// Clock moves the limiter's time.
	Clock Clock
	// Window is the window of the rules the tests use. A fake clock can
	// take minutes; a real store needs a short one, as the tests wait.
	Window time.Duration
	// Slack is how far a real store's time may drift from the harness's
	// clock between two steps (round trips, scheduling). Zero for fakes,
	// which makes the checks exact.
	Slack time.Duration
	// Algorithm names the algorithm, for the tests whose expectations
	// depend on it. Empty means fixed window.
	Algorithm string
	// Keys is the store's key layout under [KeyPrefix] for Algorithm:
	// the tests name every limit's key through it. Required.
	Keys ports.Keys
	// Now, if set, reads the limiter's clock: the fake clock's Now. Nil
	// means time.Now (a real store on this host's clock). The tests of
	// windows aligned to the epoch read it.
	Now func() time.Time
	// TTLs, if set, returns every storage key the limiter wrote for the
	// tenant whose keys start with prefix, with its time to live
	// (negative: none). A store that keeps keys elsewhere (Redis) sets
	// it; TestLimiter then checks every key expires within two windows.
	TTLs func(t *testing.T, prefix string) map[string]time.Duration
	// Lease is how long a concurrency slot of a vanished holder stays
	// taken on the store (Redis: TOLLGATE_LEASE); zero for a store
	// without leases (memory). With TTLs, the concurrency tests check
	// that every key of a concurrency limit expires within two leases.
	Lease time.Duration
}

// View is how a limiter of the store under test counts and where its
// windows start: the options a store takes where a limiter is built.
type View struct {
	Counting domain.Counting
	Windows  domain.Windows
}

// view returns h's limiter deciding by v, failing t if the store refuses.
func (h LimiterHarness) view(t *testing.T, v View) ports.Limiter {
	t.Helper()
	if h.NewView == nil {
		t.Fatal("the harness has no NewView")
	}
	l, err := h.NewView(t, v)
	if err != nil {
		t.Fatalf("NewView(%+v): %v", v, err)
	}
	return l
}

// Costs returns req with limit i spending costs[i], in limits of its
// own (req's are left as they are).
func Costs(req domain.Request, costs ...int64) domain.Request {
	limits := append([]domain.Limit(nil), req.Limits...)
	for i := range limits {
		limits[i].Cost = costs[i]
	}
	req.Limits = limits
	return req
}

// Clock moves a store's notion of time forward. A fake clock steps; a real
// store sleeps.
type Clock interface {
	Advance(d time.Duration)
}

// Sleeper is the [Clock] of a store on real time.
type Sleeper struct{}

// Advance sleeps for d.
func (Sleeper) Advance(d time.Duration) { time.Sleep(d) }

var runID atomic.Int64 // makes test tenants unique

// Tenant returns a tenant id no other test of this process has used, and
// that another process running the same tests is unlikely to use.
func Tenant() domain.TenantID {
	return domain.TenantID(fmt.Sprintf("t%x-%d", time.Now().UnixNano(), runID.Add(1)))
}

// KeyPrefix is the prefix of every key the conformance tests build.
const KeyPrefix = "portstest:"

// Request returns a request of tenant on route "default" that spends cost
// from each of limits, named name[i] with rule rules[i]. The keys are
// named through h.Keys.
func (h LimiterHarness) Request(tenant domain.TenantID, cost int64, limits ...NamedRule) domain.Request {
	req := domain.Request{Tenant: tenant, Route: "default"}
	for _, l := range limits {
		lim := domain.Limit{
			Name: l.Name, Rule: l.Rule, Key: h.Keys.Limit(tenant, "", l.Name, ports.KeyRate), Cost: cost, Shadow: l.Shadow,
		}
		if l.Concurrency {
			lim.Concurrency = true
			lim.Rule = domain.Rule{Limit: l.Rule.Limit, Window: domain.ConcurrencyWindow}
			lim.Key = h.Keys.Limit(tenant, "", l.Name, ports.KeyConcurrency)
		}
		req.Limits = append(req.Limits, lim)
	}
	return req
}

// NamedRule is a limit's name and rule, and whether it is in shadow
// mode, for [LimiterHarness.Request].
type NamedRule struct {
	Name   string
	Rule   domain.Rule
	Shadow bool
	// Concurrency makes it a concurrency limit of Rule.Limit requests in
	// flight ([domain.Limit.Concurrency]; the window is ignored).
	Concurrency bool
}

// single returns a request of cost 1 against the one limit "default".
func (h LimiterHarness) single(tenant domain.TenantID, rule domain.Rule) domain.Request {
	return h.Request(tenant, 1, NamedRule{Name: domain.DefaultLimit, Rule: rule})
}

// startOfWindow waits, on a real store whose sliding window is aligned
// to the epoch, until the first half of a window of w: a burst that
// straddled a boundary would find the previous window's units weighted
// down, and admit more than the limit within its last window, as the
// algorithm means to. Elsewhere it returns at once.
func (h LimiterHarness) startOfWindow(w time.Duration) {
	if h.Algorithm != domain.AlgorithmSlidingWindow || h.Slack == 0 {
		return
	}
	if into := time.Duration(time.Now().UnixNano() % int64(w)); into > w/2 {
		time.Sleep(w - into)
	}
}
