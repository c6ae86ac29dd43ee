package proxy_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/proxy"
)

// stubbornUpstream is an upstream that ignores cancellation, as
// gunicorn's sync workers, PHP-FPM and Go handlers that never read their
// context do: each request works for its full time, whether or not its
// client is still there. It counts the requests it serves at once, and
// the most it ever served at once.
type stubbornUpstream struct {
	work           time.Duration
	release        chan struct{} // closed at the test's end: every request ends
	inFlight, most atomic.Int64
	served         atomic.Int64
}

func newStubbornUpstream(t *testing.T, work time.Duration) (*stubbornUpstream, *httptest.Server) {
	t.Helper()
	u := &stubbornUpstream{work: work, release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := u.inFlight.Add(1)
		for m := u.most.Load(); now > m && !u.most.CompareAndSwap(m, now); m = u.most.Load() {
		}
		select { // never r.Context().Done()
		case <-time.After(u.work):
		case <-u.release:
		}
		u.inFlight.Add(-1)
		u.served.Add(1)
		io.WriteString(w, "done\n")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(u.release) })
	return u, srv
}

// cappedGateway serves the proxy face to up with a global concurrency
// limit of capacity on the memory store.
func cappedGateway(t *testing.T, up string, capacity int64, opts proxy.UpstreamOptions) *httptest.Server {
	t.Helper()
	store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	p, err := domain.NewPolicy([]domain.PolicyLimit{{Name: "inflight", Rule: domain.Rule{Limit: capacity, Window: domain.ConcurrencyWindow}, Concurrency: true}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(up)
	opts.Log = slog.New(slog.DiscardHandler)
	gw := httptest.NewServer(proxy.New(proxy.Options{
		Engine:   engine.New(&engine.Snapshot{Policy: p}, engine.Options{Limiter: store, Keys: keys.Layout{Prefix: "rl:"}}),
		Upstream: proxy.NewUpstream(target, opts),
	}))
	t.Cleanup(gw.Close)
	return gw
}

// TestConcurrencyCapHoldsForTheUpstream: a concurrency limit bounds the
// requests the upstream works on, not only those whose clients wait: a
// slot is held until the upstream's exchange is over, whether the client
// gave up waiting or the gateway answered 504 past its upstream timeout.
// The upstream counts for itself; no assertion reads a clock.
func TestConcurrencyCapHoldsForTheUpstream(t *testing.T) {
	t.Parallel()
	const capacity, clients = 3, 20
	for _, tt := range []struct {
		name     string
		timeout  time.Duration // the gateway's upstream timeout
		patience time.Duration // how long a client waits for its answer
	}{
		{"clients give up", 0, 20 * time.Millisecond},
		{"the upstream timeout fires", 20 * time.Millisecond, 10 * time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up, upSrv := newStubbornUpstream(t, 150*time.Millisecond)
			gw := cappedGateway(t, upSrv.URL, capacity, proxy.UpstreamOptions{Timeout: tt.timeout})
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
			var wg sync.WaitGroup
			stop := time.Now().Add(time.Second)
			for range clients {
				wg.Go(func() {
					for time.Now().Before(stop) {
						ctx, cancel := context.WithTimeout(t.Context(), tt.patience)
						req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL+"/", nil)
						resp, err := client.Do(req)
						if err == nil {
							io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
							if resp.StatusCode == http.StatusTooManyRequests {
								time.Sleep(5 * time.Millisecond)
							}
						}
						cancel()
					}
				})
			}
			wg.Wait()
			if most := up.most.Load(); most > capacity {
				t.Errorf("the upstream worked on %d requests at once under a concurrency limit of %d", most, capacity)
			}
			if up.served.Load()+up.inFlight.Load() < capacity {
				t.Errorf("the upstream saw %d requests, want at least %d (the limit let none through?)", up.served.Load()+up.inFlight.Load(), capacity)
			}
		})
	}
}

// gatedUpstream is an upstream that ignores cancellation and answers
// only when open is closed (or the test ends); inFlight counts the
// requests it holds.
func gatedUpstream(t *testing.T) (open chan struct{}, inFlight *atomic.Int64, url string) {
	t.Helper()
	open, inFlight = make(chan struct{}), new(atomic.Int64)
	end := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		defer inFlight.Add(-1)
		select { // never r.Context().Done()
		case <-open:
		case <-end:
		}
		io.WriteString(w, "done\n")
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(end) })
	return open, inFlight, srv.URL
}

// statusOf sends GET / to gw and returns the status, or 0 on an error.
func statusOf(ctx context.Context, gw string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw+"/", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// waitAdmitted polls gw, for up to 10 s, until a request is admitted:
// answered by the upstream (200) or past its timeout (504), or seen by
// the upstream (inFlight above before), not denied for want of a slot.
func waitAdmitted(t *testing.T, gw string, inFlight *atomic.Int64, before int64, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		status := statusOf(ctx, gw)
		cancel()
		if status == http.StatusOK || status == http.StatusGatewayTimeout || inFlight.Load() > before {
			return
		}
	}
	t.Fatalf("%s: no request admitted within 10 s, want the slot back", what)
}

// TestSlotHeldUntilTheUpstreamEnds: a request whose client gave up, or
// that was answered 504, keeps its slot while the upstream still works
// on it (the 504 itself reaches the client at once, whole); the slot
// comes back when the upstream answers, or when the drain bound has
// passed for an upstream that never does.
func TestSlotHeldUntilTheUpstreamEnds(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		timeout time.Duration
	}{
		{"the client gave up", 0},
		{"the upstream timeout fired", 20 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// abandon sends a request that nobody waits for in the end.
			abandon := func(gw string, inFlight *atomic.Int64) {
				t.Helper()
				if tt.timeout > 0 {
					if got := statusOf(t.Context(), gw); got != http.StatusGatewayTimeout {
						t.Fatalf("a request past the upstream timeout: %d, want 504 at once", got)
					}
					return
				}
				ctx, cancel := context.WithCancel(t.Context())
				go func() {
					for inFlight.Load() == 0 {
						time.Sleep(time.Millisecond)
					}
					cancel()
				}()
				if got := statusOf(ctx, gw); got != 0 {
					t.Fatalf("a request given up on: %d, want no answer", got)
				}
			}

			// The upstream answers in the end: the slot comes back then.
			open, inFlight, up := gatedUpstream(t)
			gw := cappedGateway(t, up, 1, proxy.UpstreamOptions{Timeout: tt.timeout, DrainTimeout: time.Hour})
			abandon(gw.URL, inFlight)
			// (A bound, so that an admitted request does not hang the test.)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			if got := statusOf(ctx, gw.URL); got != http.StatusTooManyRequests {
				t.Errorf("a request while the upstream still works on the first: %d, want 429 (the slot held)", got)
			}
			cancel()
			close(open)
			waitAdmitted(t, gw.URL, inFlight, 0, "the upstream answered")

			// The upstream never answers: the drain bound frees the slot.
			_, inFlight, up = gatedUpstream(t)
			gw = cappedGateway(t, up, 1, proxy.UpstreamOptions{Timeout: tt.timeout, DrainTimeout: 50 * time.Millisecond})
			abandon(gw.URL, inFlight)
			// The first request stays at the upstream for good.
			waitAdmitted(t, gw.URL, inFlight, 1, "the drain bound passed")
		})
	}
}
