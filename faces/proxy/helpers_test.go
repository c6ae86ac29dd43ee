package proxy_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/ports"
)

var (
	t0          = time.Date(2026, 11, 29, 12, 0, 0, 250_000_000, time.UTC)
	defaultRule = domain.Rule{Limit: 100, Window: time.Minute}
)

// fakeStore is a scripted fixed window that counts first, as the one
// limit without a policy file does: it counts per key, and records the
// keys and windows it was asked for. Every window has left to run; err,
// when set, fails every call.
type fakeStore struct {
	mu      sync.Mutex // guards the fields below
	counts  map[string]int64
	keys    []string
	windows []time.Duration
	left    time.Duration
	err     error
}

func newFakeStore() *fakeStore {
	return &fakeStore{counts: map[string]int64{}, left: 30 * time.Second}
}

func (f *fakeStore) Allow(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lim := req.Limits[0]
	f.keys = append(f.keys, lim.Key)
	f.windows = append(f.windows, lim.Rule.Window)
	if f.err != nil {
		return domain.Verdict{}, f.err
	}
	f.counts[lim.Key] += lim.Cost
	n := f.counts[lim.Key]
	return domain.Settle(req, domain.CountAdmitted, nil, func(int, int64) domain.Decision {
		d := domain.Decision{Allowed: n <= lim.Rule.Limit, Limit: lim.Rule.Limit, Remaining: max(lim.Rule.Limit-n, 0), ResetAfter: f.left}
		if !d.Allowed {
			d.RetryAfter = max(f.left, time.Millisecond)
		}
		return d
	}), nil
}

func (f *fakeStore) lastKey() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.keys[len(f.keys)-1]
}

// allowAll admits every request, and denyAll denies it.
var (
	allowAll = decideAll(true)
	denyAll  = decideAll(false)
)

func decideAll(allowed bool) ports.Limiter {
	return ports.LimiterFunc(func(_ context.Context, req domain.Request, _ []domain.Decision) (domain.Verdict, error) {
		return domain.Settle(req, domain.CountAdmitted, nil, func(i int, _ int64) domain.Decision {
			d := domain.Decision{Allowed: allowed, Limit: req.Limits[i].Rule.Limit, ResetAfter: req.Limits[i].Rule.Window}
			if !allowed {
				d.RetryAfter = d.ResetAfter
			}
			return d
		}), nil
	})
}

// newEngine returns an engine over lim with the policy of no policy file
// (rule as "default"), tenants named by the header X-Tenant-ID, unless
// dir names them by API key.
func newEngine(lim ports.Limiter, rule domain.Rule, dir *engine.Directory) *engine.Engine {
	return engine.New(&engine.Snapshot{Policy: domain.DefaultPolicy(rule, false), Tenants: dir},
		engine.Options{Limiter: lim, Keys: keys.Layout{Prefix: "rl:"}})
}

// twoTenants is acme (keys k-acme-1 and k-acme-2, 1000 per 10s) and
// globex (k-globex).
func twoTenants() *engine.Directory {
	return engine.NewDirectory(
		[]engine.Tenant{
			{ID: "acme", Rules: map[string]domain.Rule{"default": {Limit: 1000, Window: 10 * time.Second}}},
			{ID: "globex"},
		},
		[][]string{{"k-acme-1", "k-acme-2"}, {"k-globex"}})
}

// limited are the settings of newLimited: the fail mode, what it is
// told of store errors, the log and the metrics.
type limited struct {
	failClosed bool
	onError    func(error)
	log        *slog.Logger
	metrics    *metrics.Metrics
}

// newLimited returns the proxy face over store in the fail-mode layer,
// as the composition root stacks them, every tenant on rule, in front of
// a handler that answers 200 "tenant=<the tenant>".
func newLimited(store ports.Limiter, rule domain.Rule, opts limited) http.Handler {
	if opts.log == nil {
		opts.log = slog.New(slog.DiscardHandler)
	}
	layer := layers.FailOpen
	if opts.failClosed {
		layer = layers.FailClosed
	}
	lim := ports.Chain(store, layer(func(err error) {
		opts.metrics.StoreError()
		if opts.onError != nil {
			opts.onError(err)
		}
	}))
	return proxy.New(proxy.Options{
		Engine: newEngine(lim, rule, nil),
		Upstream: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("tenant=" + string(proxy.TenantFrom(r.Context()))))
		}),
		Log:     opts.log,
		Metrics: metricsOrNil(opts.metrics),
		Now:     func() time.Time { return t0 },
	})
}

// metricsOrNil keeps a nil *Metrics a nil interface.
func metricsOrNil(m *metrics.Metrics) httpface.Metrics {
	if m == nil {
		return nil
	}
	return m
}

// proxyGateway serves the proxy face with NewUpstream to upstream, every
// request admitted, tenants named by dir's API keys or, if nil, by the
// X-Gateway-Tenant header. It returns the gateway's URL and its log.
func proxyGateway(t *testing.T, upstream string, dir *engine.Directory, opts proxy.UpstreamOptions) (string, *logtest.Buffer) {
	t.Helper()
	target, err := url.Parse(upstream)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	opts.Log = log
	e := newEngine(allowAll, defaultRule, dir)
	if dir != nil {
		opts.Credentials = e
	}
	gw := httptest.NewServer(proxy.New(proxy.Options{
		Engine:    e,
		Upstream:  proxy.NewUpstream(target, opts),
		Describer: httpface.Describer{TenantHeader: "X-Gateway-Tenant", Trusted: opts.Trusted},
		Log:       log,
	}))
	t.Cleanup(gw.Close)
	return gw.URL, logs
}
