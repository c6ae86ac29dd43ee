package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/metrics/metricstest"
	"github.com/tollgate/tollgate/ports"
)

// writePolicy writes a policy file for the rest of t and returns its path.
func writePolicy(t testing.TB, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// slotKeys returns the keys of concurrency limits under prefix, and how
// many slots each holds.
func slotKeys(t testing.TB, rdb goredis.UniversalClient, prefix string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, k := range scanKeys(t, rdb, prefix+"*"+keys.KeyInFlight+"*") {
		out[k] = rdb.ZCard(context.Background(), k).Val()
	}
	return out
}

// noSlotsLeft fails t unless, within 100 ms (a release's round trip),
// no slot is taken under prefix on Redis and held() is 0.
func noSlotsLeft(t *testing.T, rdb goredis.UniversalClient, prefix string, held func() int) {
	t.Helper()
	deadline := time.Now().Add(100 * time.Millisecond)
	for held() != 0 || len(slotKeys(t, rdb, prefix)) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("100ms after the last request: %d slots held by the replica, on Redis %v; want none", held(), slotKeys(t, rdb, prefix))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// goroutinesBackTo waits up to 10 s for the process to run at most
// baseline goroutines again (and a couple of the runtime's own), and
// fails t otherwise, with the stacks.
func goroutinesBackTo(t *testing.T, baseline int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseline+2 {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines 10s after the storm, baseline %d:\n%s", runtime.NumGoroutine(), baseline, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConcurrencyStorm: 1000 requests from 200 clients at once, one
// tenant, against a concurrency limit of 5 on two replicas sharing one
// Redis (the same test on the memory store sees 10 at once): the upstream
// never serves more than 5 at once, every request is answered (200 or
// 429), no slot is left taken, and the process's goroutines come back to
// what they were.
func TestConcurrencyStorm(t *testing.T) {
	if testing.Short() {
		t.Skip("a storm: seconds")
	}
	srv := startRedis(t)
	up := apptest.NewUpstream(t)
	prefix := uniquePrefix(t)
	env := []string{"TOLLGATE_POLICY_FILE=" + writePolicy(t, `{"limits": [{"name": "inflight", "concurrency": 5}]}`),
		"TOLLGATE_UPSTREAM_URL=" + up.URL, "TOLLGATE_KEY_PREFIX=" + prefix, "TOLLGATE_REDIS_TIMEOUT=2s"}
	replicas := []*apptest.Gateway{startReplica(t, srv.URL, env...), startReplica(t, srv.URL, env...)}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	http.DefaultClient.CloseIdleConnections() // apptest's health checks
	time.Sleep(100 * time.Millisecond)
	baseline := runtime.NumGoroutine()

	// 200 clients at once, 5 requests each, back to back: slots are
	// taken and given back all through the storm, on both replicas.
	const requests, clients = 1000, 200
	var ok, denied, other atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			<-start
			for i := range requests / clients {
				req, _ := http.NewRequest(http.MethodGet, replicas[(c+i)%2].Public+"/sleep?ms=20", nil)
				req.Header.Set("X-Tenant-ID", "storm")
				resp, err := client.Do(req)
				if err != nil {
					other.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case 429:
					denied.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	t.Logf("1000 requests: %d admitted, %d denied, %d other; at most %d at the upstream", ok.Load(), denied.Load(), other.Load(), up.Most())
	if most := up.Most(); most > 5 {
		t.Errorf("%d requests at the upstream at once, want at most 5", most)
	}
	if ok.Load() < 5 || other.Load() != 0 || ok.Load()+denied.Load() != requests {
		t.Errorf("%d admitted, %d denied, %d other: want every request answered 200 or 429, at least 5 admitted", ok.Load(), denied.Load(), other.Load())
	}
	noSlotsLeft(t, srv.Client, prefix, func() int { return 0 })
	for i, g := range replicas {
		if got := gatewayGauge(t, g); got != "0" {
			t.Errorf("replica %d: tollgate_in_flight = %s, want 0", i, got)
		}
	}
	client.CloseIdleConnections()
	http.DefaultClient.CloseIdleConnections()
	up.CloseConnections() // the replicas' idle upstream connections
	goroutinesBackTo(t, baseline)
}

// gatewayGauge returns tollgate_in_flight{limit="inflight"} on g.
func gatewayGauge(t *testing.T, g *apptest.Gateway) string {
	t.Helper()
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), `tollgate_in_flight{limit="inflight"} `); ok {
			return v
		}
	}
	return "absent"
}

// buildGateway builds cmd/tollgate once per test run, into a directory
// of the test's.
var buildGateway = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "tollgate-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "tollgate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/tollgate/tollgate/cmd/tollgate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %v\n%s", err, out)
	}
	return bin, nil
})

// TestConcurrencyKilledReplica: a replica killed with SIGKILL while its
// requests hold every slot frees them within TOLLGATE_LEASE of its last
// renewal, and not before most of it has passed: the other replica
// admits again once the lease has run out.
func TestConcurrencyKilledReplica(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the gateway, real time: seconds")
	}
	srv := startRedis(t)
	up := apptest.NewUpstream(t)
	prefix := uniquePrefix(t)
	const lease = time.Second
	env := []string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=" + srv.URL, "TOLLGATE_KEY_PREFIX=" + prefix,
		"TOLLGATE_POLICY_FILE=" + writePolicy(t, `{"limits": [{"name": "inflight", "concurrency": 3}]}`),
		"TOLLGATE_UPSTREAM_URL=" + up.URL, "TOLLGATE_LEASE=" + lease.String(), "TOLLGATE_REDIS_TIMEOUT=2s"}
	cmd, public, _ := startProcess(t, env)

	for range 3 {
		go func() {
			req, _ := http.NewRequest(http.MethodGet, "http://"+public+"/hold", nil)
			req.Header.Set("X-Tenant-ID", "acme")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	up.WaitInFlight(t, 3)
	key := keys.Key(prefix, "acme", keys.KeyInFlight, "", "inflight")
	if n := srv.Client.ZCard(t.Context(), key).Val(); n != 3 {
		t.Fatalf("%s holds %d slots, want 3", key, n)
	}
	// Hold them past a lease: the replica renews them.
	time.Sleep(3 * lease / 2)
	other := startReplica(t, srv.URL, env...)
	if status, _ := get(t, other, "acme"); status != 429 {
		t.Fatalf("a lease and a half into the 3 requests: %d on the other replica, want 429 (renewed slots)", status)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL: no release, no goodbye
		t.Fatal(err)
	}
	killed := time.Now()
	cmd.Wait()
	// Each slot's score is its last renewal plus the lease, on Redis's
	// clock: the slots must come back by the latest of them.
	leases := srv.Client.ZRangeWithScores(t.Context(), key, 0, -1).Val()
	if len(leases) != 3 {
		t.Fatalf("after the kill %s holds %v, want the 3 slots", key, leases)
	}
	expiry := time.UnixMilli(int64(leases[2].Score))
	// Polled on Redis's clock: a request sent (well) after the lease ran
	// out must be admitted, and none may be before it ran out.
	redisNow := func() time.Time { return srv.Client.Time(t.Context()).Val() }
	for {
		sent := redisNow()
		status, _ := get(t, other, "acme")
		answered := redisNow()
		if status == 200 {
			if answered.Before(expiry) {
				t.Errorf("admitted %v before the lease of the killed replica's last renewal ran out", expiry.Sub(answered))
			}
			t.Logf("the killed replica's slots came back %v after SIGKILL, the first request sent after its last lease ran out admitted (lease %v)",
				time.Since(killed).Round(time.Millisecond), lease)
			break
		}
		if late := sent.Sub(expiry); late > 50*time.Millisecond {
			t.Fatalf("a request sent %v after the lease of the killed replica's last renewal ran out: %d, want its slot", late, status)
		}
		if time.Since(killed) > 3*lease {
			t.Fatalf("the killed replica's slots still taken %v after the kill (lease %v)", 3*lease, lease)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Every slot is back: three at once again.
	var wg sync.WaitGroup
	var admitted atomic.Int64
	for range 3 {
		wg.Go(func() {
			req, _ := http.NewRequest(http.MethodGet, other.Public+"/sleep?ms=300", nil)
			req.Header.Set("X-Tenant-ID", "acme")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				if resp.StatusCode == 200 {
					admitted.Add(1)
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 3 {
		t.Errorf("3 at once after the lease: %d admitted, want 3", got)
	}
}

// startProcess starts the gateway (buildGateway) as a process of its own
// on env, listening on free loopback addresses, and returns it once
// ready with its public and admin addresses (host:port): a test may kill
// it with SIGKILL; its cleanup kills it otherwise.
func startProcess(t *testing.T, env []string) (cmd *exec.Cmd, public, admin string) {
	t.Helper()
	bin, err := buildGateway()
	if err != nil {
		t.Fatal(err)
	}
	public, admin = freeAddr(t), freeAddr(t)
	cmd = exec.Command(bin)
	cmd.Env = append(slices.Clip(env), "TOLLGATE_LISTEN_ADDR="+public, "TOLLGATE_ADMIN_ADDR="+admin)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	waitReady(t, "http://"+admin+"/readyz")
	return cmd, public, admin
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	return "127.0.0.1:" + strconv.Itoa(freePort(t))
}

// waitReady polls url until it answers 200, for up to 30 s.
func waitReady(t *testing.T, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready after 30s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConcurrencyNoLeaks: 10 000 requests on Redis, ending every way a
// response ends, mixed: the last byte written, a streamed body finished,
// the client hanging up mid-stream, the upstream failing (502) or timing
// out (504), a panic in a handler, and denials. Once the upstream has
// ended every exchange (a request nobody waits for holds its slot until
// then), no slot is taken on Redis, none is held by the replica, and the
// gauge reads 0.
func TestConcurrencyNoLeaks(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("10 000 requests: seconds")
	}
	srv := startRedis(t)
	up := apptest.NewUpstream(t)
	prefix := uniquePrefix(t)
	client, err := conn.Open(srv.URL, conn.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	leases := newLeases(t, client, 2*time.Second)
	store, err := redis.New(client, domain.AlgorithmSlidingWindow, redis.Options{Leases: leases})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "per-minute", Rule: domain.Rule{Limit: 1_000_000, Window: time.Minute}},
		{Name: "inflight", Rule: domain.Rule{Limit: 8, Window: domain.ConcurrencyWindow}, Concurrency: true},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, domain.AlgorithmSlidingWindow)
	e := engine.New(&engine.Snapshot{Policy: policy}, engine.Options{
		Limiter: ports.Chain(store, layers.NewDenyCache(layers.DenyCacheOptions{}).Layer(), layers.FailOpen(nil)),
		Keys:    keys.Layout{Prefix: prefix, Algorithm: domain.AlgorithmSlidingWindow}, Algorithm: domain.AlgorithmSlidingWindow, Observer: m,
	})
	target, _ := url.Parse(up.URL)
	quiet := slog.New(slog.DiscardHandler)
	upstream := proxy.NewUpstream(target, proxy.UpstreamOptions{Timeout: 50 * time.Millisecond, Log: quiet})
	gw := httptest.NewServer(proxy.New(proxy.Options{
		Engine: e,
		Upstream: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/panic" {
				panic("a handler's bug")
			}
			upstream.ServeHTTP(w, r)
		}),
		Log:     quiet,
		Metrics: m,
	}))
	t.Cleanup(gw.Close)
	httpc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	ends := []struct {
		path   string
		hangUp bool // the client goes away after the first line
	}{
		{"/", false},                 // the last byte written
		{"/stream?n=3&ms=1", false},  // a streamed body finished
		{"/stream?n=100&ms=5", true}, // the client hangs up mid-stream
		{"/broken", false},           // 502
		{"/sleep?ms=200", false},     // 504
		{"/panic", false},            // 500 from the recoverer
		{"/sleep?ms=2", false},       // a short wait: contention, and denials
		{"/stream?n=2&ms=0", false},  // another stream
		{"/sleep?ms=200", true},      // the client hangs up waiting for headers
		{"/", false},
	}
	const requests, workers = 10_000, 48
	var next atomic.Int64
	codes := sync.Map{} // status → *atomic.Int64
	count := func(code int) {
		c, _ := codes.LoadOrStore(code, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := next.Add(1); i <= requests; i = next.Add(1) {
				end := ends[int(i)%len(ends)]
				ctx, cancel := context.WithCancel(t.Context())
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL+end.path, nil)
				req.Header.Set("X-Tenant-ID", "t"+strconv.Itoa(int(i)%3))
				if end.hangUp && strings.HasPrefix(end.path, "/sleep") {
					time.AfterFunc(5*time.Millisecond, cancel)
				}
				resp, err := httpc.Do(req)
				if err != nil {
					count(0)
					cancel()
					continue
				}
				count(resp.StatusCode)
				if end.hangUp {
					bufio.NewReader(resp.Body).ReadString('\n')
					cancel()
				} else {
					io.Copy(io.Discard, resp.Body)
				}
				resp.Body.Close()
				cancel()
			}
		})
	}
	wg.Wait()
	var summary []string
	codes.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%v: %d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("10 000 requests, by status (0: the client gave up): %s", strings.Join(summary, ", "))
	for _, code := range []int{200, 429, 500, 502, 504} {
		if c, ok := codes.Load(code); !ok || c.(*atomic.Int64).Load() == 0 {
			t.Errorf("no answer %d among the 10 000: the mix does not end requests every way", code)
		}
	}
	up.WaitInFlight(t, 0)
	noSlotsLeft(t, srv.Client, prefix, leases.Held)
	if got := metricstest.Value(t, reg, "tollgate_in_flight"); got != 0 {
		t.Errorf("tollgate_in_flight = %v, want 0", got)
	}
}
