package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/testhttp"
)

// startReplica runs one gateway replica on srv with environ added.
func startReplica(t *testing.T, redisURL string, environ ...string) *apptest.Gateway {
	t.Helper()
	return apptest.Start(t, append([]string{
		"TOLLGATE_STORE=redis",
		"TOLLGATE_ALGORITHM=fixed_window",
		"TOLLGATE_REDIS_URL=" + redisURL,
	}, environ...)...)
}

var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 64},
}

// get sends one request as tenant to g's public listener and returns the
// status and response headers.
func get(t testing.TB, g *apptest.Gateway, tenant string) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, g.Public+"/anything", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Tenant-ID", tenant)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Errorf("GET %s as %s: %v", g.Public, tenant, err)
		return 0, nil
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// readyz returns the status of g's /readyz.
func readyz(t testing.TB, g *apptest.Gateway) int {
	t.Helper()
	resp, err := httpClient.Get(g.Admin + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestReplicasShareOneBudget: two gateways on one Redis spend one budget
// per tenant, and the budget comes back when the window's key expires.
// The window (from the first request) is long enough for six requests
// on a loaded machine: one that ended among them would admit a request
// the test wants denied.
func TestReplicasShareOneBudget(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	const window = 3 * time.Second
	env := []string{"TOLLGATE_LIMIT=3", "TOLLGATE_WINDOW=" + window.String(),
		"TOLLGATE_KEY_PREFIX=" + uniquePrefix(t), "TOLLGATE_REDIS_TIMEOUT=2s"}
	a, b := startReplica(t, srv.URL, env...), startReplica(t, srv.URL, env...)

	steps := []struct {
		gw   *apptest.Gateway
		name string
		want int
	}{
		{a, "A", 200}, {a, "A", 200}, {b, "B", 200}, {a, "A", 429}, {b, "B", 429},
	}
	began := time.Now()
	for i, s := range steps {
		code, h := get(t, s.gw, "acme")
		if code != s.want {
			t.Errorf("step %d: replica %s: status %d, want %d", i, s.name, code, s.want)
		}
		if code == 429 && h.Get("Retry-After") == "" {
			t.Errorf("step %d: 429 without Retry-After", i)
		}
	}
	if code, _ := get(t, b, "globex"); code != 200 {
		t.Errorf("another tenant on replica B: status %d, want 200", code)
	}
	if took := time.Since(began); t.Failed() && took > window {
		t.Logf("the requests took %v, longer than the window %v: a new window may have begun among them", took, window)
	}

	time.Sleep(window + 100*time.Millisecond)
	for _, s := range []struct {
		gw   *apptest.Gateway
		name string
	}{{b, "B"}, {a, "A"}} {
		if code, _ := get(t, s.gw, "acme"); code != 200 {
			t.Errorf("after the window, replica %s: status %d, want 200", s.name, code)
		}
	}
}

// TestReplicasStorm: 200 concurrent requests over two replicas with a
// limit of 50 admit exactly 50, and leave no key without a TTL.
func TestReplicasStorm(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	storm(t, srv.Client, srv.URL, "fixed_window", time.Minute)
}

// storm sends 200 concurrent requests of one tenant over two replicas of
// algo on rdb (at redisURL; environ added) with a limit of 50, and checks
// that exactly 50 are admitted and that the one key written has a TTL.
func storm(t *testing.T, rdb goredis.UniversalClient, redisURL, algo string, window time.Duration, environ ...string) {
	t.Helper()
	prefix := uniquePrefix(t)
	env := append([]string{"TOLLGATE_LIMIT=50", "TOLLGATE_WINDOW=" + window.String(), "TOLLGATE_KEY_PREFIX=" + prefix,
		"TOLLGATE_ALGORITHM=" + algo,
		// No store error may blur the count: a generous deadline, and an
		// error would show as a 503.
		"TOLLGATE_REDIS_TIMEOUT=5s", "TOLLGATE_FAIL_MODE=closed"}, environ...)
	gws := []*apptest.Gateway{startReplica(t, redisURL, env...), startReplica(t, redisURL, env...)}

	var mu sync.Mutex
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 200 {
		wg.Go(func() {
			<-start
			code, _ := get(t, gws[i%2], "storm")
			mu.Lock()
			codes[code]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if codes[200] != 50 || codes[429] != 150 {
		t.Errorf("%s: 200 concurrent requests, limit 50: statuses %v, want 50×200 and 150×429", algo, codes)
	}
	if n := checkTTLs(t, rdb, prefix+"*", 2*window); n != 1 {
		t.Errorf("%s: found %d keys under %s*, want 1", algo, n, prefix)
	}
}

// storeErrorLines returns the timestamps of the gateway's store-error log
// lines.
func storeErrorLines(t *testing.T, g *apptest.Gateway) []time.Time {
	t.Helper()
	var out []time.Time
	for _, line := range strings.Split(g.Logs(), "\n") {
		var m struct {
			Time time.Time
			Msg  string
		}
		if json.Unmarshal([]byte(line), &m) == nil && strings.HasPrefix(m.Msg, "rate-limit store error") {
			out = append(out, m.Time)
		}
	}
	return out
}

// checkLogRate fails t if two store-error lines are less than a second
// apart.
func checkLogRate(t *testing.T, name string, g *apptest.Gateway) {
	t.Helper()
	lines := storeErrorLines(t, g)
	if len(lines) == 0 {
		t.Errorf("%s: no store-error log line during the outage", name)
	}
	for i := 1; i < len(lines); i++ {
		if d := lines[i].Sub(lines[i-1]); d < time.Second {
			t.Errorf("%s: store-error lines %d and %d are %v apart, want >= 1s", name, i-1, i, d)
		}
	}
}

// outage is a pair of gateways on one Redis, fail open and fail closed,
// with a short deadline.
type outage struct {
	open, closed *apptest.Gateway
	timeout      time.Duration
}

func newOutage(t *testing.T, redisURL string) outage {
	const timeout = 100 * time.Millisecond
	env := []string{"TOLLGATE_LIMIT=1000", "TOLLGATE_KEY_PREFIX=" + uniquePrefix(t), "TOLLGATE_REDIS_TIMEOUT=" + timeout.String()}
	return outage{
		open:    startReplica(t, redisURL, append(env, "TOLLGATE_FAIL_MODE=open")...),
		closed:  startReplica(t, redisURL, append(env, "TOLLGATE_FAIL_MODE=closed")...),
		timeout: timeout,
	}
}

// maxAnswer is how long a request sent at start and answered at end may
// take while Redis misbehaves: the deadline plus a little (the race
// detector, the HTTP round trip), plus what the process stalled
// meanwhile on a loaded machine (stalled). A request that waits for a
// frozen Redis beyond its deadline still takes longer.
func (o outage) maxAnswer(start, end time.Time) time.Duration {
	return o.timeout + 300*time.Millisecond + stallWithin(start, end)
}

// duringFailure checks, for about d, that every request is answered in
// time by the fail mode: open admits without rate-limit headers, closed
// answers 503 with Retry-After: 1.
func (o outage) duringFailure(t *testing.T, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); {
		for _, c := range []struct {
			name string
			gw   *apptest.Gateway
			want int
		}{{"fail-open", o.open, 200}, {"fail-closed", o.closed, 503}} {
			start := time.Now()
			code, h := get(t, c.gw, "acme")
			end := time.Now()
			if took, most := end.Sub(start), o.maxAnswer(start, end); took > most {
				t.Errorf("%s: answered in %v, want <= %v (%v of it this process stalled)", c.name, took, most, stallWithin(start, end))
			}
			if code != c.want {
				t.Errorf("%s: status %d, want %d", c.name, code, c.want)
				continue
			}
			if c.want == 503 && h.Get("Retry-After") != "1" {
				t.Errorf("fail-closed: Retry-After %q, want 1", h.Get("Retry-After"))
			}
			if c.want == 200 && h.Get("X-RateLimit-Limit") != "" {
				t.Errorf("fail-open: rate-limit headers on an unmetered answer")
			}
		}
	}
}

// decisionsResume waits until both gateways decide again (rate-limit
// headers), within 10 s.
func (o outage) decisionsResume(t *testing.T) {
	t.Helper()
	for _, g := range []*apptest.Gateway{o.open, o.closed} {
		deadline := time.Now().Add(10 * time.Second)
		for {
			code, h := get(t, g, "acme")
			if code == 200 && h.Get("X-RateLimit-Limit") != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no decision 10s after Redis came back: last status %d", code)
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Connections pooled before the outage fail once each (no retries:
		// a retried INCR could count twice), so /readyz may need a few
		// probes, as a load balancer gives it.
		for code := readyz(t, g); code != 200; code = readyz(t, g) {
			if time.Now().After(deadline) {
				t.Fatalf("/readyz 10s after Redis came back: %d, want 200", code)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestRedisStoppedAndRestarted: with Redis down the fail modes answer at
// once, /readyz says 503, and the log gets at most a line a second; when
// Redis is back on the same address, decisions resume.
func TestRedisStoppedAndRestarted(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	srv := startRedis(t, withFixedHostPort(port))
	o := newOutage(t, fmt.Sprintf("redis://127.0.0.1:%d/0", port))
	o.decisionsResume(t) // healthy first

	srv.stop(t)
	for _, g := range []*apptest.Gateway{o.open, o.closed} {
		if code := readyz(t, g); code != 503 {
			t.Errorf("/readyz with Redis stopped: %d, want 503", code)
		}
	}
	o.duringFailure(t, 2500*time.Millisecond)
	checkLogRate(t, "fail-open", o.open)
	checkLogRate(t, "fail-closed", o.closed)

	srv.start(t)
	o.decisionsResume(t)
}

// TestRedisPaused: a frozen Redis (connections open, no answers) costs
// each request at most the deadline; decisions resume after it thaws.
func TestRedisPaused(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	o := newOutage(t, srv.URL)
	o.decisionsResume(t)

	srv.pause(t)
	paused := true
	defer func() {
		if paused {
			srv.unpause(t)
		}
	}()
	o.duringFailure(t, 1500*time.Millisecond)
	for _, g := range []*apptest.Gateway{o.open, o.closed} {
		start := time.Now()
		if code := readyz(t, g); code != 503 {
			t.Errorf("/readyz with Redis paused: %d, want 503", code)
		}
		end := time.Now()
		if took, most := end.Sub(start), o.maxAnswer(start, end); took > most {
			t.Errorf("/readyz with Redis paused took %v, want <= %v (%v of it this process stalled)", took, most, stallWithin(start, end))
		}
	}
	srv.unpause(t)
	paused = false
	o.decisionsResume(t)
}

// TestStartsWithRedisDown: a gateway whose Redis is down at start-up
// starts anyway, says so, fails by its mode, and decides once Redis is up
// (detecting the version then).
func TestStartsWithRedisDown(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	port := freePort(t)
	o := newOutage(t, fmt.Sprintf("redis://:s3cret-pw@127.0.0.1:%d/0", port))
	for name, g := range map[string]*apptest.Gateway{"fail-open": o.open, "fail-closed": o.closed} {
		logs := g.Logs()
		if !strings.Contains(logs, "redis is not answering; starting anyway") {
			t.Errorf("%s: no start-up warning about Redis in the logs:\n%s", name, logs)
		}
		if strings.Contains(logs, "s3cret-pw") {
			t.Errorf("%s: the Redis password is in the logs", name)
		}
		if code := readyz(t, g); code != 503 {
			t.Errorf("%s: /readyz with Redis down: %d, want 503", name, code)
		}
	}
	o.duringFailure(t, 300*time.Millisecond)

	startRedis(t, withFixedHostPort(port), withPassword("s3cret-pw"))
	o.decisionsResume(t)
}

// TestEveryAlgorithmOnRedisWithTenantBudgets runs the gateway on Redis
// with each algorithm in turn, API-key tenants with their own budgets, and
// one key prefix: each tenant spends its own budget under every
// algorithm, and switching algorithms on a live Redis never meets the
// previous algorithm's keys (no WRONGTYPE, no store error).
func TestEveryAlgorithmOnRedisWithTenantBudgets(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	tenants := filepath.Join(t.TempDir(), "tenants.json")
	if err := os.WriteFile(tenants, []byte(`{"tenants": [
	  {"id": "acme",   "api_keys": ["k-acme"],   "limit": 2, "window": "1h"},
	  {"id": "globex", "api_keys": ["k-globex"], "limit": 4, "window": "1h"}
	]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("it:algos:%d:", time.Now().UnixNano())
	for _, algo := range domain.AlgorithmNames() {
		g := startReplica(t, srv.URL, "TOLLGATE_ALGORITHM="+algo, "TOLLGATE_KEY_PREFIX="+prefix,
			"TOLLGATE_TENANTS_FILE="+tenants, "TOLLGATE_LIMIT=1", "TOLLGATE_FAIL_MODE=closed",
			// A first decision loads its script on a new connection: under
			// load that can take longer than the default 50ms.
			"TOLLGATE_REDIS_TIMEOUT=5s")
		for _, tt := range []struct {
			key    string
			want   []int
			policy string
		}{
			{"k-acme", []int{200, 200, 429}, `"default";q=2;w=3600`},
			{"k-globex", []int{200, 200, 200, 200, 429}, `"default";q=4;w=3600`},
			{"", []int{200, 429}, `"default";q=1;w=60`},
		} {
			for i, want := range tt.want {
				req, _ := http.NewRequest(http.MethodGet, g.Public+"/x", nil)
				if tt.key != "" {
					req.Header.Set("X-API-Key", tt.key)
				}
				resp, err := httpClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != want {
					t.Errorf("%s, key %q, request %d: status %d, want %d", algo, tt.key, i+1, resp.StatusCode, want)
				}
				if got := resp.Header.Get("RateLimit-Policy"); got != tt.policy {
					t.Errorf("%s, key %q: RateLimit-Policy %q, want %q", algo, tt.key, got, tt.policy)
				}
			}
		}
		if err := g.Stop(); err != nil {
			t.Errorf("%s: Run: %v", algo, err)
		}
		if strings.Contains(g.Logs(), "WRONGTYPE") || strings.Contains(g.Logs(), "store error") {
			t.Errorf("%s: store errors in the log:\n%s", algo, g.Logs())
		}
	}
	// Three tenants (unknown included) × four algorithms, each its own key.
	if n := srv.checkTTLs(t, prefix+"*", 2*time.Hour); n != 12 {
		t.Errorf("keys written = %d, want 12", n)
	}
}

// TestExamplesOnRedis runs docs/policies.md's walkthrough of the examples/ files
// through a gateway on real Redis: several limits per request in one
// script, a route's own limit, cost, and a shadow limit counting
// would-be denials without denying; then no key without a TTL.
func TestExamplesOnRedis(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	prefix := uniquePrefix(t)
	g := startReplica(t, srv.URL, append([]string{"TOLLGATE_KEY_PREFIX=" + prefix, "TOLLGATE_REDIS_TIMEOUT=5s",
		"TOLLGATE_FAIL_MODE=closed"}, apptest.ExampleEnviron...)...)
	apptest.CheckExamples(t, g)
	// acme's per-second key lives a second: on a loaded machine the
	// walkthrough's last acme request can be older than that. One more
	// request writes it again just before the keys are read, once the
	// window in force has ended (a request late in it found the key
	// with milliseconds to live, gone by the read).
	second := prefix + "{acme}:per-second"
	for deadline := time.Now().Add(2 * time.Second); srv.Client.Exists(t.Context(), second).Val() == 1 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if resp, _ := testhttp.Do(t, "GET", g.Public+"/v1/items", "", http.Header{"X-Api-Key": {"k-acme-2"}}); resp.StatusCode != 200 {
		t.Fatalf("a last acme request: %d, want 200", resp.StatusCode)
	}
	ttls := keyTTLs(t, srv.Client, prefix)
	for _, want := range []string{"{acme}:per-second", "{acme}:per-minute", "{acme}:per-day", "{initech}:route:export:exports"} {
		if _, ok := ttls[prefix+want]; !ok {
			t.Errorf("no key %s%s among %v", prefix, want, ttls)
		}
	}
	for k, ttl := range ttls {
		if ttl == -2 {
			continue // expired between the scan and its PTTL (a per-second key): it had a TTL
		}
		if ttl <= 0 || ttl > 48*time.Hour {
			t.Errorf("key %s: TTL %v, want in (0, 2 windows]", k, ttl)
		}
	}
}
