package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/internal/watch"
)

// MaxFeedReaders is how many readers of GET /v1/denials one replica
// serves at once; one more is answered 503.
const MaxFeedReaders = 32

// TopOptions configure [WithTop].
type TopOptions struct {
	// Engine reads each tenant's remaining budget. Required.
	Engine *engine.Engine
	// Watch answers who is being limited. Required.
	Watch *watch.Watch
	// Token is the bearer token every call must present
	// (TOLLGATE_ADMIN_TOKEN). Required.
	Token string
	// Timeout bounds a call's store work. Zero means UsageTimeout.
	Timeout time.Duration
	// Log gets at most one line a second about calls refused for their
	// token. May be nil.
	Log *slog.Logger
	// Count, if not nil, counts each call by action: top, denials or
	// unauthorized (tollgate_admin_actions_total).
	Count func(action string)
}

// WithTop returns admin with the views of who is being limited:
//
//	GET /v1/top[?window=5m]  per limit, the tenants denied most over the window (1m to 5m), fleet-wide
//	GET /v1/denials          a live text/event-stream of this replica's denials
//	GET /ui/                 the page of both, embedded in the binary
//
// The two APIs need Authorization: Bearer <token> as the usage API
// does (401 otherwise). The page's files hold nothing but the page: it
// asks for the token and sends it with each of its calls.
func WithTop(admin http.Handler, opts TopOptions) http.Handler {
	if opts.Engine == nil || opts.Watch == nil || opts.Token == "" {
		panic("admin: WithTop needs an engine, a watch and a token")
	}
	opts.Timeout, opts.Log, opts.Count = apiDefaults(opts.Timeout, opts.Log, opts.Count)
	auth := newBearer(opts.Token, opts.Log, opts.Count)
	t := &topAPI{opts: opts}
	r := chi.NewRouter()
	r.With(auth.authorize).Get("/v1/top", t.top)
	r.With(auth.authorize).Get("/v1/denials", t.denials)
	r.Get("/ui", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusMovedPermanently)
	})
	pageFiles := pageHandler()
	r.Get("/ui/", pageFiles.ServeHTTP)
	r.Get("/ui/{file}", pageFiles.ServeHTTP)
	r.NotFound(admin.ServeHTTP)
	r.MethodNotAllowed(admin.ServeHTTP)
	return r
}

// topAPI serves /v1/top and /v1/denials.
type topAPI struct {
	opts    TopOptions
	readers atomic.Int32 // feeds open
}

// TopBody is the answer of GET /v1/top.
type TopBody struct {
	// WindowSeconds is the window asked for; the answer covers it and
	// up to a minute more (denials are counted per minute of the clock).
	WindowSeconds int64 `json:"window_seconds"`
	// Replicas is how many replicas' counts it merges.
	Replicas int `json:"replicas"`
	// Partial, when present, says why other replicas are missing.
	Partial string `json:"partial,omitempty"`
	// Limits are the limits that denied anyone in the window, by name.
	Limits []LimitTopBody `json:"limits"`
	// PerSecond are the fleet's decisions of each of the last 60
	// seconds, oldest first.
	PerSecond []watch.Second `json:"per_second"`
}

// LimitTopBody is one limit in a [TopBody].
type LimitTopBody struct {
	Limit string `json:"limit"`
	// Denied is every denial of the limit in the window.
	Denied  int64           `json:"denied"`
	Tenants []TenantTopBody `json:"tenants"`
}

// TenantTopBody is one tenant of a [LimitTopBody].
type TenantTopBody struct {
	Tenant string `json:"tenant"`
	// Denied is at most the tenant's denials on the limit in the
	// window, DeniedMin at least (equal when counted exactly).
	Denied    int64 `json:"denied"`
	DeniedMin int64 `json:"denied_min"`
	// Allowed is what the limit admitted of the tenant while it was
	// among the most denied.
	Allowed int64 `json:"allowed"`
	// Remaining is the tenant's budget on the limit now; absent when it
	// could not be read.
	Remaining *int64 `json:"remaining,omitempty"`
}

// top answers GET /v1/top[?window=5m].
func (t *topAPI) top(w http.ResponseWriter, r *http.Request) {
	t.opts.Count("top")
	query, err := url.ParseQuery(r.URL.RawQuery)
	window := watch.MaxWindow
	vs, named := query["window"]
	switch other := otherParam(query, "window"); {
	case err != nil:
		writeJSON(w, http.StatusBadRequest, errorBody{"query: not a valid URL query; its one parameter is window, such as ?window=5m"})
		return
	case other != "":
		writeJSON(w, http.StatusBadRequest, errorBody{fmt.Sprintf("query: unknown parameter %s; the one parameter is window, such as ?window=5m", quoted(other))})
		return
	case named:
		d, err := time.ParseDuration(vs[0])
		if len(vs) != 1 || err != nil || !watch.ValidWindow(d) {
			writeJSON(w, http.StatusBadRequest, errorBody{"window: want whole minutes from 1m to 5m, such as ?window=5m"})
			return
		}
		window = d
	}
	ctx, cancel := context.WithTimeout(r.Context(), t.opts.Timeout)
	defer cancel()
	top, err := t.opts.Watch.Top(ctx, window)
	if err != nil {
		return // the caller went away
	}
	body := TopBody{WindowSeconds: int64(window / time.Second), Replicas: top.Replicas, Partial: top.Partial,
		Limits: make([]LimitTopBody, len(top.Limits)), PerSecond: top.Series}
	if body.PerSecond == nil {
		body.PerSecond = []watch.Second{}
	}
	remaining := t.remaining(ctx, top)
	for i, l := range top.Limits {
		lb := LimitTopBody{Limit: l.Limit, Denied: l.Denied, Tenants: make([]TenantTopBody, len(l.Tenants))}
		for j, tt := range l.Tenants {
			tb := TenantTopBody{Tenant: tt.Tenant, Denied: tt.Denied, DeniedMin: tt.DeniedMin, Allowed: tt.Allowed}
			if n, ok := remaining[tt.Tenant][l.Limit]; ok {
				tb.Remaining = &n
			}
			lb.Tenants[j] = tb
		}
		body.Limits[i] = lb
	}
	writeJSON(w, http.StatusOK, body)
}

// usageReaders is how many tenants' usage /v1/top reads at once.
const usageReaders = 8

// remaining reads the budget left now of every tenant in top, by tenant
// and limit name (the least left, when routes share a limit's name).
// A tenant whose usage cannot be read is left out.
func (t *topAPI) remaining(ctx context.Context, top watch.Top) map[string]map[string]int64 {
	var tenants []string
	seen := map[string]bool{}
	for _, l := range top.Limits {
		for _, tt := range l.Tenants {
			if !seen[tt.Tenant] {
				seen[tt.Tenant] = true
				tenants = append(tenants, tt.Tenant)
			}
		}
	}
	out := make(map[string]map[string]int64, len(tenants))
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, usageReaders)
	for _, tenant := range tenants {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			us, err := t.opts.Engine.Usage(ctx, domain.TenantID(tenant))
			if err != nil {
				return
			}
			left := map[string]int64{}
			for _, u := range us {
				n := max(u.Decision.Remaining, 0)
				if prev, ok := left[u.Limit.Name]; !ok || n < prev {
					left[u.Limit.Name] = n
				}
			}
			mu.Lock()
			out[tenant] = left
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// feedWriteTimeout is how long one write to a feed's reader may take
// before the feed ends: a stalled reader holds one goroutine, never a
// decision, and not for long.
const feedWriteTimeout = 10 * time.Second

// denials answers GET /v1/denials: a text/event-stream of this
// replica's denials (event "denial", data a JSON [watch.Event]), at
// most watch.FeedRate a second, and once a second when some were not
// sent an event "dropped" with how many since the feed opened. A
// comment every 15 s keeps proxies from closing a quiet feed.
func (t *topAPI) denials(w http.ResponseWriter, r *http.Request) {
	t.opts.Count("denials")
	if t.readers.Add(1) > MaxFeedReaders {
		t.readers.Add(-1)
		w.Header().Set("Retry-After", "10")
		writeJSON(w, http.StatusServiceUnavailable, errorBody{fmt.Sprintf("too many feeds open: at most %d at once", MaxFeedReaders)})
		return
	}
	defer t.readers.Add(-1)
	feed := t.opts.Watch.Subscribe()
	defer feed.Unsubscribe()
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	write := func(s string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(feedWriteTimeout))
		if _, err := w.Write([]byte(s)); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !write(fmt.Sprintf(": denials of this replica, at most %d a second\nretry: 2000\n\n", watch.FeedRate)) {
		return
	}
	second := time.NewTicker(time.Second)
	defer second.Stop()
	var reported int64
	quiet := 0
	for {
		select {
		case <-r.Context().Done():
			return
		case ev, ok := <-feed.C:
			if !ok {
				return // the gateway is stopping
			}
			data, _ := json.Marshal(ev)
			if !write("event: denial\ndata: " + string(data) + "\n\n") {
				return
			}
			quiet = 0
		case <-second.C:
			msg := ""
			if n := feed.Dropped(); n != reported {
				reported = n
				msg = fmt.Sprintf("event: dropped\ndata: {\"dropped\":%d}\n\n", n)
			} else if quiet++; quiet >= 15 {
				msg = ": keep-alive\n\n"
			}
			if msg != "" {
				quiet = 0
				if !write(msg) {
					return
				}
			}
		}
	}
}
