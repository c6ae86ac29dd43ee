package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"
	"github.com/tollgate/tollgate/adapters/keys"

	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
)

// answers counts a burst's answers: decided (with rate-limit headers:
// 200 or 429) or not (the fail mode, or anything else).
type answers struct {
	mu                    sync.Mutex
	admitted, denied, bad int
	other                 map[string]int // status and whether headers came: what went wrong
}

func (a *answers) add(code int, h http.Header) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case code == 200 && h.Get("X-RateLimit-Limit") != "":
		a.admitted++
	case code == 429 && h.Get("X-RateLimit-Limit") != "" && h.Get("Retry-After") != "":
		a.denied++
	default:
		a.bad++
		if a.other == nil {
			a.other = map[string]int{}
		}
		a.other[fmt.Sprintf("%d headers=%v", code, h.Get("X-RateLimit-Limit") != "")]++
	}
}

// burst sends n requests as tenant at once, spread over gws. The
// clients' connections are opened first (as a load balancer's
// keep-alive connections are), and each request is written in one go on
// its own: the burst the gateway sees is n requests at once, not n
// clients dialling, which on a shared 2-core machine would take the
// CPU the gateway needs.
func burst(t *testing.T, gws []*apptest.Gateway, tenant string, n int) *answers {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		u, err := url.Parse(gws[i%len(gws)].Public)
		if err != nil {
			t.Fatal(err)
		}
		if conns[i], err = net.Dial("tcp", u.Host); err != nil {
			t.Fatalf("dial %s: %v", u.Host, err)
		}
		defer conns[i].Close()
	}
	req := []byte("GET /burst HTTP/1.1\r\nHost: gateway\r\nX-Tenant-ID: " + tenant + "\r\n\r\n")
	var a answers
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, c := range conns {
		wg.Go(func() {
			<-start
			if _, err := c.Write(req); err != nil {
				t.Errorf("burst request: %v", err)
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("burst response: %v", err)
				return
			}
			resp.Body.Close()
			a.add(resp.StatusCode, resp.Header)
		})
	}
	close(start)
	wg.Wait()
	return &a
}

// TestColdStartBurst: two freshly started replicas on a healthy Redis,
// the default 50 ms deadline, a limit of 100, and 500 concurrent
// requests: every answer is decided by the store (no fail mode), exactly
// the limit is admitted, and no key is left without a TTL. Every
// algorithm, several fresh starts each.
//
// Not parallel: it is about load, so it runs while no other test of the
// package does. Under the race detector, which makes the gateway's own
// code 5–10× slower (and, on a 2-core machine, starves the Redis
// container of CPU in a burst), the deadline is stretched by raceScale.
func TestColdStartBurst(t *testing.T) {
	srv := startRedis(t)
	// The container's own address, not Docker's port proxy: the proxy
	// is one more process that needs the CPU the burst takes.
	redisURL := srv.directURL(t)
	const limit, n, starts = 100, 500, 3
	for _, algo := range domain.AlgorithmNames() {
		t.Run(algo, func(t *testing.T) {
			for round := range starts {
				prefix := uniquePrefix(t) + strconv.Itoa(round) + ":"
				env := []string{"TOLLGATE_ALGORITHM=" + algo, "TOLLGATE_LIMIT=" + strconv.Itoa(limit),
					"TOLLGATE_WINDOW=1h", "TOLLGATE_KEY_PREFIX=" + prefix}
				if raceScale > 1 {
					env = append(env, "TOLLGATE_REDIS_TIMEOUT="+(raceScale*250*time.Millisecond).String())
				}
				a, b := startReplica(t, redisURL, env...), startReplica(t, redisURL, env...)
				checkBurst(t, fmt.Sprintf("start %d", round+1), []*apptest.Gateway{a, b}, limit, n)
				srv.checkTTLs(t, prefix+"*", 2*time.Hour)
				for _, g := range []*apptest.Gateway{a, b} {
					if err := g.Stop(); err != nil {
						t.Errorf("start %d: Run: %v", round+1, err)
					}
				}
			}
		})
	}
}

// checkBurst sends n concurrent requests over gws and checks that every
// answer was decided by the store (none took the fail mode) and exactly
// limit were admitted.
func checkBurst(t *testing.T, what string, gws []*apptest.Gateway, limit, n int) {
	t.Helper()
	start := time.Now()
	got := burst(t, gws, "burst", n)
	if got.admitted == limit && got.denied == n-limit && got.bad == 0 {
		return
	}
	sum, longest := stalls(start, time.Now())
	t.Errorf("%s: %d concurrent requests, limit %d: %d admitted, %d denied, %d undecided %v; want %d, %d, 0 "+
		"(this process stalled %v during the burst, %v at most at once)",
		what, n, limit, got.admitted, got.denied, got.bad, got.other, limit, n-limit, sum, longest)
	for _, g := range gws {
		for _, line := range strings.Split(g.Logs(), "\n") {
			if strings.Contains(line, "store error") {
				t.Log(line)
				break
			}
		}
	}
}

// TestBurstUnderCPUHog: bursts are not failures, also on a host whose
// every core is taken by other processes (3 runnable per core: hogs make
// up what the host does not run already; Redis runs ahead of them, as
// the gateway's own starvation is the point): two fresh replicas, the default deadline, 500 concurrent
// requests against a limit of 100, on one Redis and on a Redis Cluster —
// every answer is the store's, and exactly the limit is admitted. A
// decision fails only when Redis has answered nothing for the deadline;
// its wait in this process's queue, and a round trip read late while
// Redis answers others, do not count. (With a 50 ms deadline that counted
// the queue, up to 63 of 500 failed open on one Redis and up to 406 of
// 500 on a cluster at load 5–7.5. Counting only Redis's silence, 50 ms
// still failed up to 407 of 500 at load 9–11, as a CPU-starved Redis
// itself went silent that long: the default is 250 ms.)
//
// Not parallel: it loads the host. It runs without the race detector
// (`make test` runs it so, after the race-detector run): the detector's
// own 5–10× CPU is not what a gateway in production pays.
func TestBurstUnderCPUHog(t *testing.T) {
	if raceScale > 1 {
		t.Skip("about the gateway's real CPU, not the race detector's: make test runs it without -race")
	}
	if testing.Short() {
		t.Skip("loads the host for seconds")
	}
	srv := startRedis(t)
	cl := sharedClusterFor(t)
	servers := []testcontainers.Container{srv.ctr}
	for _, n := range cl.Nodes {
		servers = append(servers, n.ctr)
	}
	favour(t, servers...)
	// Load 3 per core: what the host runs already, and hogs for the rest.
	ambient := runnable(t)
	t.Logf("%d processes runnable besides this one; hogs: %d", ambient, max(0, 3*runtime.NumCPU()-ambient))
	hog(t, max(0, 3*runtime.NumCPU()-ambient))
	const limit, n = 100, 500
	for _, target := range []struct {
		name string
		env  []string
		url  string
	}{
		{"redis", nil, srv.directURL(t)},
		{"cluster", []string{"TOLLGATE_REDIS_MODE=cluster"}, cl.Seed},
	} {
		for round := range 2 {
			prefix := uniquePrefix(t) + target.name + strconv.Itoa(round) + ":"
			env := append([]string{"TOLLGATE_LIMIT=" + strconv.Itoa(limit), "TOLLGATE_WINDOW=1h", "TOLLGATE_KEY_PREFIX=" + prefix}, target.env...)
			a, b := startReplica(t, target.url, env...), startReplica(t, target.url, env...)
			checkBurst(t, fmt.Sprintf("%s, round %d, under a CPU hog", target.name, round+1), []*apptest.Gateway{a, b}, limit, n)
			for _, g := range []*apptest.Gateway{a, b} {
				if err := g.Stop(); err != nil {
					t.Errorf("Run: %v", err)
				}
			}
		}
	}
}

// hog keeps n processes spinning on the host's cores until t ends, or
// the test binary dies (they get SIGKILL with their parent).
func hog(t *testing.T, n int) {
	t.Helper()
	for range n {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("hog: %v", err)
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	time.Sleep(time.Second) // the load is there before the burst
}

// runnable returns how many threads the host runs besides this test
// (a CPU hog beside the suite, other work): the mean over half a second
// of /proc/loadavg's runnable count, less this process's one.
func runnable(t *testing.T) int {
	t.Helper()
	sum := 0
	for range 10 {
		b, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			t.Logf("no /proc/loadavg (%v): the host counted idle", err)
			return 0
		}
		var l1, l5, l15 float64
		var running, total int
		if _, err := fmt.Sscanf(string(b), "%f %f %f %d/%d", &l1, &l5, &l15, &running, &total); err != nil {
			t.Logf("/proc/loadavg %q: %v: the host counted idle", b, err)
			return 0
		}
		sum += running - 1
		time.Sleep(50 * time.Millisecond)
	}
	return max(0, (sum+5)/10)
}

// favour runs the Redis servers in ctrs at nice -10 until t ends, ahead
// of the hog and of whatever else loads the host: the test is about the
// gateway's own starvation, and a Redis starved silent for the deadline
// fails decisions by design (at load 7 per core, with another CPU hog
// beside the test's, up to 410 of 500). It needs root; without, it
// says so and the servers run as they are.
func favour(t *testing.T, ctrs ...testcontainers.Container) {
	t.Helper()
	for _, c := range ctrs {
		st, err := c.State(t.Context())
		if err != nil || st.Pid == 0 {
			t.Fatalf("the pid of Redis's container: %v, %v", st, err)
		}
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*", st.Pid))
		for _, task := range tasks {
			tid, _ := strconv.Atoi(filepath.Base(task))
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, -10); err != nil {
				t.Logf("Redis (pid %d) left at its priority: %v", st.Pid, err)
				return
			}
			t.Cleanup(func() { _ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, 0) })
		}
	}
}

// TestStallEnds: Redis freezes for 3 s under a steady load, then thaws:
// from 250 ms after it thaws, the answers are decided by the store again
// (at most 1 % stray misses; no second of failures left behind while
// dead connections are replaced).
func TestStallEnds(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	g := startReplica(t, srv.directURL(t), "TOLLGATE_LIMIT=1000000", "TOLLGATE_KEY_PREFIX="+uniquePrefix(t))
	if code, h := get(t, g, "acme"); code != 200 || h.Get("X-RateLimit-Limit") == "" {
		t.Fatalf("healthy: status %d, headers %v", code, h)
	}

	type answer struct {
		sent    time.Time
		decided bool
	}
	var (
		mu   sync.Mutex
		log  []answer
		stop atomic.Bool
		wg   sync.WaitGroup
	)
	for i := range 16 {
		wg.Go(func() {
			for !stop.Load() {
				sent := time.Now()
				code, h := get(t, g, "tenant-"+strconv.Itoa(i))
				mu.Lock()
				log = append(log, answer{sent, code == 200 && h.Get("X-RateLimit-Limit") != ""})
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	srv.pause(t)
	time.Sleep(3 * time.Second)
	srv.unpause(t)
	thawed := time.Now()
	time.Sleep(1500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()

	var during, after, undecidedAfter int
	var lastUndecided time.Time
	for _, a := range log {
		switch {
		case a.sent.Before(thawed) && !a.decided:
			during++
		case a.sent.After(thawed.Add(250 * time.Millisecond)):
			after++
			if !a.decided {
				undecidedAfter++
				lastUndecided = a.sent
			}
		}
	}
	if during == 0 {
		t.Errorf("no answer took the fail mode while Redis was paused: the stall did not happen")
	}
	// One stray answer that missed its 50 ms on a loaded machine (the
	// race detector, the rest of the suite) is not a stall left behind;
	// the defect this guards against failed every answer for about a
	// second, the whole of the measured span.
	if after == 0 || undecidedAfter > after/100 {
		t.Errorf("from 250ms after the stall: %d of %d answers undecided (the last sent %v after the thaw)",
			undecidedAfter, after, lastUndecided.Sub(thawed))
		for _, line := range strings.Split(g.Logs(), "\n") {
			var m struct{ Time time.Time }
			if strings.Contains(line, "store error") && json.Unmarshal([]byte(line), &m) == nil && m.Time.After(thawed) {
				t.Logf("%v after the thaw: %s", m.Time.Sub(thawed), line)
			}
		}
	}
}

// decisionLoad is 64 goroutines deciding in a loop on one limiter of a client
// opened as the gateway opens it (warm, 1 s deadline), each on its own
// tenant of 16, under a fresh prefix.
type decisionLoad struct {
	prefix      string
	window      time.Duration
	ok, failed  atomic.Int64
	failedLater atomic.Int64 // failures while later is set
	later       atomic.Bool
	lastErr     atomic.Value
	stop        atomic.Bool
	wg          sync.WaitGroup
}

func startLoad(t *testing.T, srv *redisServer, l redisLimiter) *decisionLoad {
	t.Helper()
	c, err := conn.Open(srv.URL, conn.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Warm(t.Context()); err != nil {
		t.Fatal(err)
	}
	lim := l.new(c, redis.Options{Timeout: time.Second})
	ld := &decisionLoad{prefix: uniquePrefix(t), window: time.Hour}
	rule := domain.Rule{Limit: 1 << 40, Window: ld.window}
	for i := range 64 {
		ld.wg.Go(func() {
			req := one(keys.Key(ld.prefix, domain.TenantID("t"+strconv.Itoa(i%16)), l.algorithm, "", domain.DefaultLimit), rule)
			for !ld.stop.Load() {
				if _, err := lim.Allow(context.Background(), req, nil); err != nil {
					ld.failed.Add(1)
					ld.lastErr.Store(err.Error())
					if ld.later.Load() {
						ld.failedLater.Add(1)
					}
					continue
				}
				ld.ok.Add(1)
			}
		})
	}
	return ld
}

// end stops the load and checks that decisions succeeded and that no key
// is left without a TTL.
func (ld *decisionLoad) end(t *testing.T, srv *redisServer) {
	t.Helper()
	ld.stop.Store(true)
	ld.wg.Wait()
	t.Logf("%d decisions, %d failed (last: %v)", ld.ok.Load(), ld.failed.Load(), ld.lastErr.Load())
	if ld.ok.Load() == 0 {
		t.Fatal("no decision succeeded")
	}
	srv.checkTTLs(t, ld.prefix+"*", 2*ld.window)
}

// TestKilledConnections: Redis closes a connection of the coalescer's
// that is running scripts (CLIENT KILL ID) while 64 goroutines decide:
// only decisions in flight on it fail, at most one per goroutine;
// decisions go on without errors right after, and no key is left
// without a TTL.
func TestKilledConnections(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	for _, l := range redisLimiters {
		t.Run(l.name, func(t *testing.T) {
			ld := startLoad(t, srv, l)
			time.Sleep(300 * time.Millisecond)
			killed := killBusyConnection(t, srv)
			time.Sleep(100 * time.Millisecond)
			ld.later.Store(true)
			time.Sleep(300 * time.Millisecond)
			ld.end(t, srv)
			if f := ld.failed.Load(); f > 64 {
				t.Errorf("killed connection %s: %d decisions failed, want at most the 64 in flight", killed, f)
			}
			if f := ld.failedLater.Load(); f > 0 {
				t.Errorf("%d decisions failed 100ms and more after the kill, want 0", f)
			}
		})
	}
}

// TestScriptFlushUnderLoad: SCRIPT FLUSH while 64 goroutines decide
// costs no decision an error, on every algorithm: a batch that gets
// NOSCRIPT goes again as EVAL.
func TestScriptFlushUnderLoad(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	for _, l := range redisLimiters {
		t.Run(l.name, func(t *testing.T) {
			ld := startLoad(t, srv, l)
			for range 3 {
				time.Sleep(100 * time.Millisecond)
				if err := srv.Client.ScriptFlush(context.Background()).Err(); err != nil {
					t.Fatalf("SCRIPT FLUSH: %v", err)
				}
			}
			time.Sleep(100 * time.Millisecond)
			ld.end(t, srv)
			if f := ld.failed.Load(); f > 0 {
				t.Errorf("%d decisions failed across 3 SCRIPT FLUSH, want none", f)
			}
		})
	}
}

// killBusyConnection kills, with CLIENT KILL ID, a client connection whose
// last command was a script, and returns its id.
func killBusyConnection(t *testing.T, srv *redisServer) string {
	t.Helper()
	ctx := context.Background()
	list, err := srv.Client.ClientList(ctx).Result()
	if err != nil {
		t.Fatalf("CLIENT LIST: %v", err)
	}
	for _, line := range strings.Split(list, "\n") {
		fields := map[string]string{}
		for _, f := range strings.Fields(line) {
			if k, v, ok := strings.Cut(f, "="); ok {
				fields[k] = v
			}
		}
		if fields["cmd"] == "evalsha" || fields["cmd"] == "eval" {
			if err := srv.Client.ClientKillByFilter(ctx, "ID", fields["id"]).Err(); err != nil {
				t.Fatalf("CLIENT KILL ID %s: %v", fields["id"], err)
			}
			return fields["id"]
		}
	}
	t.Fatalf("no connection running scripts in CLIENT LIST:\n%s", list)
	return ""
}
