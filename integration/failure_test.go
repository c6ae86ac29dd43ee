package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// scrape returns every series of g's /metrics (name and labels exactly
// as printed) with its value.
func scrape(t testing.TB, g *apptest.Gateway) map[string]float64 {
	t.Helper()
	resp, err := httpClient.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	series := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("metric %s: %q", name, v)
		}
		series[name] = f
	}
	return series
}

// metric returns the value of one series on g, or -1 when it is absent.
func metric(t testing.TB, g *apptest.Gateway, series string) float64 {
	t.Helper()
	if v, ok := scrape(t, g)[series]; ok {
		return v
	}
	return -1
}

func outcomes(t testing.TB, g *apptest.Gateway, outcome string) float64 {
	t.Helper()
	return metric(t, g, `tollgate_decisions_total{algorithm="fixed_window",outcome="`+outcome+`"}`)
}

// flood sends n requests as tenant to g from workers goroutines and
// returns the count per status.
func flood(t testing.TB, g *apptest.Gateway, tenant string, n, workers int) map[int]int {
	t.Helper()
	var mu sync.Mutex
	codes := map[int]int{}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				code, _ := get(t, g, tenant)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return codes
}

// TestDenyCacheFloodCostsTheStoreNothing: under a flood from one denied
// tenant, the store runs at most 0.05 commands per denied request (INFO
// commandstats), or 10 a second where a loaded machine stretches the
// flood (floodBound), for every algorithm. The window is an hour, so that the
// denials stand for the whole test (a sliding window aligned on the
// epoch admits again as soon as a boundary passes: that is no denial to
// cache). The tenant is denied once before the flood: it is a denied
// tenant's flood (a flood that starts with the budget left may cost one
// store call per concurrent request as it crosses the limit).
func TestDenyCacheFloodCostsTheStoreNothing(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	for _, algo := range domain.AlgorithmNames() {
		g := startReplica(t, srv.URL, "TOLLGATE_ALGORITHM="+algo, "TOLLGATE_LIMIT=5", "TOLLGATE_WINDOW=1h",
			"TOLLGATE_KEY_PREFIX="+uniquePrefix(t), "TOLLGATE_REDIS_TIMEOUT=2s", "TOLLGATE_FAIL_MODE=closed")
		if codes := flood(t, g, "flooder", 6, 1); codes[200] != 5 || codes[429] != 1 {
			t.Fatalf("%s: the budget of 5, then a denial: %v", algo, codes)
		}
		srv.resetStats(t)
		const n = 1000
		began := time.Now()
		codes := flood(t, g, "flooder", n, 16)
		took := time.Since(began)
		cmds := srv.decisionCommands(t)
		if codes[429] != n {
			t.Errorf("%s: flood of %d over the budget: %v, want every one 429", algo, n, codes)
		}
		perDenial := float64(cmds) / n
		t.Logf("%s: %d store commands for %d denied requests over %v: %.4f per denial", algo, cmds, n, took, perDenial)
		if most := floodBound(n, 10, took); float64(cmds) > most {
			t.Errorf("%s: %d store commands for %d denied requests over %v, want <= %v", algo, cmds, n, took, most)
		}
		// A denial is served for a second at most (then the store is
		// asked again, and its denial cached afresh): one store denial
		// per second of the flood, the rest from the cache.
		cached := metric(t, g, `tollgate_decisions_total{algorithm="`+algo+`",outcome="cached_denied"}`)
		fresh := metric(t, g, `tollgate_decisions_total{algorithm="`+algo+`",outcome="denied"}`) - 1
		if maxFresh := float64(took/layers.DefaultDenyCacheMaxAge) + 1; cached+fresh != n || fresh > maxFresh {
			t.Errorf("%s: %v cached and %v store denials in a flood of %d over %v, want all but %v at most from the cache", algo, cached, fresh, n, took, maxFresh)
		}
		if got := metric(t, g, `tollgate_decision_duration_seconds_count{algorithm="`+algo+`"}`); got != n+6 {
			t.Errorf("%s: decision durations observed %v, want %d (cached answers included)", algo, got, n+6)
		}
		if code, _ := get(t, g, "another"); code != 200 {
			t.Errorf("%s: another tenant: %d, want 200", algo, code)
		}
	}
}

// TestBreakerDuringAStall: while Redis is frozen (docker pause), after
// the first failures requests take the fail mode at once (p99 <= 5 ms
// after the first half second) instead of each waiting for the deadline;
// decisions are back on Redis within 250 ms of it answering; the probes
// are counted as store errors, the refused decisions are not.
//
// Not parallel: it measures latency, and runs alone in this binary (the
// parallel tests wait until the sequential ones are done). Its clients
// pace themselves (a request every millisecond or so each): they measure
// the breaker, not a CPU saturated by the test itself.
func TestBreakerDuringAStall(t *testing.T) {
	srv := startRedis(t)
	const timeout = 50 * time.Millisecond
	g := startReplica(t, srv.URL, "TOLLGATE_LIMIT=1000000", "TOLLGATE_KEY_PREFIX="+uniquePrefix(t),
		"TOLLGATE_REDIS_TIMEOUT="+timeout.String(), "TOLLGATE_FAIL_MODE=open")
	if code, h := get(t, g, "acme"); code != 200 || h.Get("X-RateLimit-Limit") == "" {
		t.Fatalf("healthy: %d %v", code, h)
	}

	srv.pause(t)
	paused := true
	defer func() {
		if paused {
			srv.unpause(t)
		}
	}()
	stalled := time.Now()
	const stall = 1500 * time.Millisecond
	var mu sync.Mutex
	var after []time.Duration // latencies of requests sent from half a second on
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ; time.Since(stalled) < stall; time.Sleep(time.Millisecond) {
				start := time.Now()
				code, h := get(t, g, "acme")
				end := time.Now()
				// What the request took, less what the process stalled
				// meanwhile (a loaded machine's wait, not the breaker's).
				took := end.Sub(start) - stallWithin(start, end)
				if code != 200 || h.Get("X-RateLimit-Limit") != "" {
					t.Errorf("fail open during the stall: %d with headers %v", code, h.Get("X-RateLimit-Limit"))
					return
				}
				if start.Sub(stalled) >= 500*time.Millisecond {
					mu.Lock()
					after = append(after, took)
					mu.Unlock()
				}
			}
		})
	}
	// The decisions' own latency, from the gateway's histogram: those
	// from the first half second on.
	time.Sleep(time.Until(stalled.Add(500 * time.Millisecond)))
	fast0, all0 := decisionsWithin(t, g, "0.005")
	wg.Wait()
	fast1, all1 := decisionsWithin(t, g, "0.005")
	n, fast := all1-all0, fast1-fast0
	t.Logf("stall: %v decisions after the first half second, %.2f%% within 5 ms", n, 100*fast/n)
	if fast < 0.99*n {
		t.Errorf("decisions during the stall within 5 ms: %v of %v, want >= 99%%", fast, n)
	}
	// And what the clients saw, through HTTP, on a machine this test
	// shares, less the process's stalls (logged; the median is
	// asserted: the typical request does not wait for the deadline).
	slices.Sort(after)
	p50, p99 := after[len(after)/2], after[len(after)*99/100]
	t.Logf("stall: %d requests after the first half second: p50 %v, p99 %v, max %v", len(after), p50, p99, after[len(after)-1])
	if p50 >= timeout/2 {
		t.Errorf("median request during the stall = %v, want well under the deadline %v", p50, timeout)
	}
	if up := metric(t, g, "tollgate_store_up"); up != 0 {
		t.Errorf("tollgate_store_up during the stall = %v, want 0", up)
	}
	// Failed store calls: the decisions' and the breaker's pings.
	errs := metric(t, g, "tollgate_store_errors_total") + metric(t, g, "tollgate_store_probe_failures_total")
	refused := outcomes(t, g, "error")
	// The first failures: each of 4 clients fails a decision every
	// deadline until the breaker opens, which takes the threshold's
	// deadline and then the confirming ping (layers.MinConfirmTimeout);
	// then a probe every 50 ms: about 50 in all, while the refused
	// decisions are thousands.
	firsts := 4 * float64((timeout+layers.MinConfirmTimeout)/timeout+1)
	if maxErrs := firsts + float64(stall/layers.DefaultProbeInterval) + 5; errs > maxErrs || errs < 10 {
		t.Errorf("tollgate_store_errors_total + tollgate_store_probe_failures_total = %v during a %v stall with %v decisions refused, want 10 to %v (probes and first failures only)", errs, stall, refused, maxErrs)
	}

	srv.unpause(t)
	paused = false
	thawed := time.Now()
	for {
		code, h := get(t, g, "acme")
		if code == 200 && h.Get("X-RateLimit-Limit") != "" {
			break
		}
		if time.Since(thawed) > 5*time.Second {
			t.Fatal("no decision on Redis 5s after it thawed")
		}
		time.Sleep(2 * time.Millisecond)
	}
	now := time.Now()
	back, waited := now.Sub(thawed), stallWithin(thawed, now)
	t.Logf("decisions back on Redis %v after it thawed (%v of it this process stalled)", back, waited)
	if back-waited > 250*time.Millisecond {
		t.Errorf("decisions back on Redis %v after it thawed (%v of it this process stalled), want <= 250ms", back, waited)
	}
	if up := metric(t, g, "tollgate_store_up"); up != 1 {
		t.Errorf("tollgate_store_up after the stall = %v, want 1", up)
	}
	if opens := metric(t, g, "tollgate_store_breaker_opens_total"); opens != 1 {
		t.Errorf("tollgate_store_breaker_opens_total = %v after one stall, want 1", opens)
	}
}

// TestLocalModeHoldsTheFleetBudget: two replicas in local mode during an
// outage admit about the budget between them (±10%), with N from
// TOLLGATE_REPLICAS or counted through Redis; the responses carry the
// local decision's headers; decisions return to Redis when it is back.
func TestLocalModeHoldsTheFleetBudget(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  []string
	}{
		{"TOLLGATE_REPLICAS=2", []string{"TOLLGATE_REPLICAS=2"}},
		{"counted", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			port := freePort(t)
			srv := startRedis(t, withFixedHostPort(port))
			prefix := uniquePrefix(t)
			env := append([]string{"TOLLGATE_LIMIT=100", "TOLLGATE_WINDOW=1m", "TOLLGATE_KEY_PREFIX=" + prefix,
				"TOLLGATE_REDIS_TIMEOUT=100ms", "TOLLGATE_FAIL_MODE=local"}, tt.env...)
			url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
			a, b := startReplica(t, url, env...), startReplica(t, url, env...)
			for _, g := range []*apptest.Gateway{a, b} {
				waitMetric(t, g, "tollgate_replicas", 2)
			}
			if tt.env == nil {
				if n := srv.checkTTLs(t, prefix+"replicas", 30*time.Second); n != 1 {
					t.Errorf("announcement keys: %d, want 1 (%sreplicas)", n, prefix)
				}
			}

			srv.stop(t)
			admitted, denied := 0, 0
			for i := range 300 {
				g := []*apptest.Gateway{a, b}[i%2]
				code, h := get(t, g, "acme")
				switch code {
				case 200:
					admitted++
				case 429:
					denied++
				default:
					t.Fatalf("request %d during the outage: status %d", i, code)
				}
				if p := h.Get("RateLimit-Policy"); p != `"default";q=50;w=60` {
					t.Fatalf("request %d during the outage: RateLimit-Policy %q, want the local budget q=50", i, p)
				}
			}
			t.Logf("outage: %d admitted, %d denied over two replicas, budget 100", admitted, denied)
			if admitted < 90 || admitted > 110 {
				t.Errorf("two replicas in local mode admitted %d of a budget of 100, want 90 to 110", admitted)
			}
			for name, g := range map[string]*apptest.Gateway{"A": a, "B": b} {
				// The first local denial is remembered: the rest are cached.
				la, ld, cd := outcomes(t, g, "local_allowed"), outcomes(t, g, "local_denied"), outcomes(t, g, "cached_denied")
				if la != 50 || ld < 1 || ld+cd != 100 {
					t.Errorf("replica %s: local_allowed %v, local_denied %v, cached_denied %v; want 50, and 100 denials", name, la, ld, cd)
				}
			}

			srv.start(t)
			for _, g := range []*apptest.Gateway{a, b} {
				deadline := time.Now().Add(5 * time.Second)
				for {
					// Another tenant: acme's local denials stand in the
					// deny cache until their Retry-After.
					code, h := get(t, g, "globex")
					if code == 200 && h.Get("RateLimit-Policy") == `"default";q=100;w=60` {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("decisions not back on Redis 5s after it restarted: %d %q", code, h.Get("RateLimit-Policy"))
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
}

// decisionsWithin returns how many decisions g has taken within le
// seconds (a bucket of its histogram) and how many in all.
func decisionsWithin(t testing.TB, g *apptest.Gateway, le string) (within, all float64) {
	t.Helper()
	m := scrape(t, g) // one scrape: the bucket and the count agree
	return m[`tollgate_decision_duration_seconds_bucket{algorithm="fixed_window",le="`+le+`"}`],
		m[`tollgate_decision_duration_seconds_count{algorithm="fixed_window"}`]
}

// TestBurstIsNoFailure: a burst of concurrent requests against a healthy
// Redis never opens the breaker, even when the burst is more than the
// store's deadline can take (some decisions time out while others
// succeed). The gateway is warmed first: a cold pool's first burst is
// the connection pool's concern (warm connections), not the breaker's.
func TestBurstIsNoFailure(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	g := startReplica(t, srv.URL, "TOLLGATE_KEY_PREFIX="+uniquePrefix(t), "TOLLGATE_LIMIT=100000")
	burst := func(n int) {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				get(t, g, fmt.Sprint("tenant-", i%50))
			})
		}
		close(start)
		wg.Wait()
	}
	deadline := time.Now().Add(10 * time.Second)
	for errs := outcomes(t, g, "error"); ; errs = outcomes(t, g, "error") {
		burst(32)
		if outcomes(t, g, "error") == errs {
			break // 32 at once, none failed: warm
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway still fails decisions of 32 concurrent requests after 10 s")
		}
	}
	opens, errs := metric(t, g, "tollgate_store_breaker_opens_total"), outcomes(t, g, "error")
	for range 5 {
		burst(100)
	}
	if got := metric(t, g, "tollgate_store_breaker_opens_total"); got != opens {
		t.Errorf("the breaker opened %v times in bursts against a healthy Redis", got-opens)
	}
	t.Logf("5 bursts of 100 on a warm gateway: %v took the fail mode (the store's deadline, not the breaker)", outcomes(t, g, "error")-errs)
}

// waitMetric waits up to 5 s for g's series to read want.
func waitMetric(t *testing.T, g *apptest.Gateway, series string, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for got := metric(t, g, series); got != want; got = metric(t, g, series) {
		if time.Now().After(deadline) {
			t.Fatalf("%s = %v after 5s, want %v", series, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLocalCountsHearResets: a reset made on one replica reaches the
// local fail mode's counts of the others, exactly the limits reset (the
// deny cache off, so that only the counts answer). Local budgets over
// two replicas: hourly 5, daily 6. b admits 5 in an outage (hourly
// spent, daily 1 left); Redis comes back; hourly alone is reset on a; in
// the next outage b admits 1 (hourly fresh, daily's last) and denies.
func TestLocalCountsHearResets(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	srv := startRedis(t, withFixedHostPort(port))
	prefix := uniquePrefix(t)
	policy := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(policy, []byte(`{"limits": [{"name": "hourly", "limit": 10, "window": "1h"}, {"name": "daily", "limit": 12, "window": "24h"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	env := []string{"TOLLGATE_POLICY_FILE=" + policy, "TOLLGATE_KEY_PREFIX=" + prefix, "TOLLGATE_REDIS_TIMEOUT=100ms",
		"TOLLGATE_FAIL_MODE=local", "TOLLGATE_REPLICAS=2", "TOLLGATE_DENY_CACHE=false", "TOLLGATE_ADMIN_TOKEN=" + usageToken}
	a, b := startReplica(t, url, env...), startReplica(t, url, env...)
	listening := func() {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			n, err := srv.Client.PubSubNumSub(t.Context(), prefix+"resets").Result()
			if err == nil && n[prefix+"resets"] == 2 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("replicas listening for resets: %v, %v; want 2", n, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	listening()
	const local = `"hourly";q=5;w=3600, "daily";q=6;w=86400`
	outage := func(step string, want []int) {
		t.Helper()
		srv.stop(t)
		var got []int
		for range want {
			code, h := get(t, b, "acme")
			if p := h.Get("RateLimit-Policy"); p != local {
				t.Fatalf("%s: RateLimit-Policy %q, want the local budgets %s", step, p, local)
			}
			got = append(got, code)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: b answered %v, want %v", step, got, want)
		}
		srv.start(t)
	}
	outage("the first outage", []int{200, 200, 200, 200, 200, 429})
	listening() // again, after the restart
	deadline := time.Now().Add(5 * time.Second)
	for code, h := get(t, a, "acme"); code != 200 || !strings.Contains(h.Get("RateLimit-Policy"), `"hourly";q=10`); code, h = get(t, a, "acme") {
		if time.Now().After(deadline) {
			t.Fatalf("a 5 s after Redis restarted: %d %q, want decided on Redis (q=10)", code, h.Get("RateLimit-Policy"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := adminCall(t, a, "POST", "/v1/tenants/acme/reset?limit=hourly"); code != 200 {
		t.Fatalf("reset of hourly on a: %d, want 200", code)
	}
	time.Sleep(300 * time.Millisecond) // b hears it
	outage("the next outage, after hourly was reset on a", []int{200, 429})
}

// TestReplicaAnnouncements: replicas announce themselves in one key
// with a TTL of at most 30 s, see each other on Redis's clock, stop
// seeing one whose announcement expired, and forget one that withdrew;
// a claim that outlasts any announcement (a forged member) is dropped,
// and a key of another type is ports.ErrKeyType.
func TestReplicaAnnouncements(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	prefix := uniquePrefix(t)
	r := fleet.NewReplicas(conn.NewClient(srv.Client, conn.Options{}), prefix)
	ctx := context.Background()
	ids := func(r ports.Roll) []string {
		var out []string
		for _, a := range r.Alive {
			out = append(out, a.ID)
		}
		slices.Sort(out)
		return out
	}
	steps := []struct {
		id   string
		ttl  time.Duration
		want []string
	}{{"a", time.Second, []string{"a"}}, {"b", 300 * time.Millisecond, []string{"a", "b"}}, {"a", time.Second, []string{"a", "b"}}}
	// vouched announces id through rs until Redis vouches for want
	// listeners (its listener subscribes after its first announcement,
	// in the background).
	vouched := func(rs *fleet.Replicas, id string, want int) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err := rs.Announce(ctx, id, time.Second)
			if err == nil && got.Listening == want && got.ListenErr == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("Announce(%s) = %+v, %v 5 s on; want %d listening", id, got, err, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	vouched(r, "a", 1)
	var last ports.Roll
	for _, s := range steps {
		// Redis vouches only for a's listener: b's own channel has none.
		got, err := r.Announce(ctx, s.id, s.ttl)
		want := map[string]int{"a": 1, "b": 0}[s.id]
		if err != nil || !slices.Equal(ids(got), s.want) || got.Listening != want || got.ListenErr != nil {
			t.Fatalf("Announce(%s) = %+v, %v; want %v, %d listening", s.id, got, err, s.want, want)
		}
		last = got
	}
	// Another Replicas listens once it announced, and no longer once it
	// withdraws.
	other := fleet.NewReplicas(conn.NewClient(srv.Client, conn.Options{}), prefix)
	vouched(other, "c", 2)
	if err := other.Withdraw(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Announce(ctx, "a", time.Second); err != nil || got.Listening != 1 || !slices.Contains(ids(got), "a") {
		t.Errorf("after the second withdrew: %+v, %v; want a alive, 1 listening", got, err)
	}
	if got, _ := r.Announce(ctx, "b", 300*time.Millisecond); !slices.Contains(ids(got), "b") {
		t.Errorf("b announced again: %+v", got) // for the expiry below
	}
	for _, a := range last.Alive {
		if exp := time.UnixMilli(a.Expires); exp.Before(time.Now().Add(-time.Second)) || exp.After(time.Now().Add(2*time.Second)) {
			t.Errorf("announcement %+v: expiry %v not about a TTL from now on Redis's clock", a, exp)
		}
	}
	if r.Key() != prefix+"replicas" {
		t.Errorf("key %q, want %q", r.Key(), prefix+"replicas")
	}
	if n := srv.checkTTLs(t, prefix+"*", 30*time.Second); n != 1 {
		t.Errorf("%d keys, want one", n)
	}
	time.Sleep(400 * time.Millisecond) // b's announcement expires
	// Forged members: one that claims an hour, which no replica can.
	future := time.Now().Add(time.Hour).UnixMilli()
	if err := srv.Client.ZAdd(ctx, r.Key(), goredis.Z{Score: float64(future), Member: "forged"}).Err(); err != nil {
		t.Fatal(err)
	}
	if got, err := r.Announce(ctx, "a", time.Hour); err != nil || !slices.Equal(ids(got), []string{"a"}) {
		t.Errorf("after b expired, with a forged member: %v, %v; want [a]", got, err)
	}
	srv.checkTTLs(t, prefix+"*", 30*time.Second) // capped
	if err := r.Withdraw(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if n, _ := srv.Client.Exists(ctx, r.Key()).Result(); n != 0 {
		t.Errorf("the key outlived the last replica's withdrawal")
	}
	// A key of another type: reported as such, never a count.
	if err := srv.Client.Set(ctx, r.Key(), "x", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Announce(ctx, "a", time.Second); !errors.Is(err, ports.ErrKeyType) {
		t.Errorf("Announce over a string key: %v, want ErrKeyType", err)
	}
}

// TestReplicaCountAgainstForgers: two replicas in the fail mode local,
// counting each other through Redis (one server, and a cluster), while
// something else renews 8 members of their announcements every 500 ms
// on Redis's clock, as a replica would: N stays 2, since only two
// replicas listen on the channel, and each replica logs the cut once.
func TestReplicaCountAgainstForgers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		start func(t *testing.T, env ...string) (goredis.UniversalClient, []*apptest.Gateway)
	}{
		{"redis", func(t *testing.T, env ...string) (goredis.UniversalClient, []*apptest.Gateway) {
			srv := startRedis(t)
			return srv.Client, []*apptest.Gateway{startReplica(t, srv.URL, env...), startReplica(t, srv.URL, env...)}
		}},
		{"cluster", func(t *testing.T, env ...string) (goredis.UniversalClient, []*apptest.Gateway) {
			c := sharedClusterFor(t)
			return c.Client, []*apptest.Gateway{startClusterReplica(t, c, env...), startClusterReplica(t, c, env...)}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := uniquePrefix(t)
			rdb, gws := tt.start(t, "TOLLGATE_FAIL_MODE=local", "TOLLGATE_KEY_PREFIX="+prefix)
			ctx := t.Context()
			forge := func() {
				now, err := rdb.Time(ctx).Result()
				if err != nil {
					t.Errorf("TIME: %v", err)
					return
				}
				for i := range 8 {
					m := goredis.Z{Score: float64(now.Add(3 * time.Second).UnixMilli()), Member: fmt.Sprint("forged-", i)}
					if err := rdb.ZAdd(ctx, prefix+"replicas", m).Err(); err != nil {
						t.Errorf("ZADD: %v", err)
					}
				}
			}
			for _, g := range gws {
				waitMetric(t, g, "tollgate_replicas", 2)
			}
			for i := range 12 { // 6 s: every forged member is seen renewed, many times
				forge()
				time.Sleep(500 * time.Millisecond)
				for k, g := range gws {
					if n := metric(t, g, "tollgate_replicas"); n != 2 {
						t.Fatalf("%d ms into the forgery: replica %d counts N = %v, want 2", 500*(i+1), k, n)
					}
				}
			}
			for k, g := range gws {
				if n := strings.Count(g.Logs(), "more members renew announcements than replicas listen"); n != 1 {
					t.Errorf("replica %d logged the cut %d times, want once:\n%s", k, n, g.Logs())
				}
			}
		})
	}
}

// TestReplicaListenersFollowTheMaster: on a Redis Cluster, the replicas'
// listeners follow the announcements key to its slot's new master after
// a failover: Redis vouches for both again within seconds, and nothing
// listens on the old master any more.
func TestReplicaListenersFollowTheMaster(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	prefix := uniquePrefix(t)
	key := prefix + "replicas"
	rs := []*fleet.Replicas{fleet.NewReplicas(conn.NewClient(c.Client, conn.Options{}), prefix), fleet.NewReplicas(conn.NewClient(c.Client, conn.Options{}), prefix)}
	ctx := t.Context()
	bothVouched := func(step string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			ok := true
			for i, r := range rs {
				roll, err := r.Announce(ctx, fmt.Sprint("r", i), time.Second)
				ok = ok && err == nil && roll.Listening == 2 && roll.ListenErr == nil
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: Redis does not vouch for both listeners after 10 s", step)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	bothVouched("before the failover")
	old := c.masterOf(t, key)
	var promoted *clusterNode
	for i, n := range c.Nodes[:clusterMasters] {
		if n == old {
			promoted = c.Nodes[clusterMasters+i] // its replica
		}
	}
	if err := promoted.Client.ClusterFailover(ctx).Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", promoted.Addr(), err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for c.masterOf(t, key) != promoted {
		if time.Now().After(deadline) {
			t.Fatalf("%s not the master of %s 10 s after CLUSTER FAILOVER", promoted.Addr(), key)
		}
		time.Sleep(50 * time.Millisecond)
	}
	bothVouched("after the failover")
	if n, err := old.Client.PubSubNumSub(ctx, key).Result(); err != nil || n[key] != 0 {
		t.Errorf("listeners left on the old master %s: %v, %v; want 0", old.Addr(), n, err)
	}
	for i, r := range rs {
		if err := r.Withdraw(ctx, fmt.Sprint("r", i)); err != nil {
			t.Error(err)
		}
	}
}

// BenchmarkGatewayDenied measures denied requests/s through the whole
// gateway (HTTP, tenant, decision, 429) for one tenant over its budget,
// 64 client goroutines: on the memory store, on Redis (deny cache on, the
// default) and on Redis without the deny cache. The three gateways run
// side by side and take turns in fifteen short interleaved rounds, so that a
// machine shared with other work loads them alike (each round starts
// with the next one); it reports each one's
// median denied/s and the ratios to the memory store's (docs/benchmarks.md
// bounds Redis with the cache at >= 0.9x), and per denial the Redis
// commands (INFO commandstats) and the answers that were not 429.
func BenchmarkGatewayDenied(b *testing.B) {
	srv := startRedis(b)
	configs := []struct {
		name string
		env  []string
	}{
		{"memory", []string{"TOLLGATE_STORE=memory"}},
		{"redis", []string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=" + srv.URL}},
		{"redis-no-deny-cache", []string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=" + srv.URL, "TOLLGATE_DENY_CACHE=false"}},
	}
	gws := make([]*apptest.Gateway, len(configs))
	for i, c := range configs {
		gws[i] = apptest.Start(b, append([]string{"TOLLGATE_LIMIT=1", "TOLLGATE_WINDOW=1h",
			"TOLLGATE_KEY_PREFIX=" + uniquePrefix(b), "TOLLGATE_REDIS_TIMEOUT=1s"}, c.env...)...)
		get(b, gws[i], "flooder") // the budget
		get(b, gws[i], "flooder") // the first denial
	}
	const rounds = 15
	per := max(b.N/(rounds*len(configs)), 64)
	rates := make([][]float64, len(configs))
	cmds := make([]int64, len(configs))
	other := make([]int64, len(configs))
	b.ResetTimer()
	for round := range rounds {
		for k := range gws {
			i := (round + k) % len(gws) // each takes every turn: no order bias
			g := gws[i]
			srv.resetStats(b)
			var next, bad atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for range benchGoroutines {
				wg.Go(func() {
					for next.Add(1) <= int64(per) {
						if code, _ := get(b, g, "flooder"); code != 429 {
							bad.Add(1)
						}
					}
				})
			}
			wg.Wait()
			rates[i] = append(rates[i], float64(per)/time.Since(start).Seconds())
			cmds[i] += srv.decisionCommands(b)
			other[i] += bad.Load()
		}
	}
	b.StopTimer()
	median := func(xs []float64) float64 {
		xs = slices.Sorted(slices.Values(xs))
		return xs[len(xs)/2]
	}
	for i, c := range configs {
		m := median(rates[i])
		b.ReportMetric(m, c.name+"-denied/s")
		b.ReportMetric(float64(cmds[i])/float64(rounds*per), c.name+"-redis-cmds/denial")
		b.ReportMetric(float64(other[i])/float64(rounds*per), c.name+"-not-429/op")
		if i > 0 {
			b.ReportMetric(m/median(rates[0]), c.name+"/memory")
		}
	}
}
