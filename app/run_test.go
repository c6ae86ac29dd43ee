package app_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/testhttp"
)

func TestRunBadConfigExitsTwoWithOneLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		environ []string
		want    []string
	}{
		{[]string{"TOLLGATE_LIMIT=0"}, []string{"TOLLGATE_LIMIT", `"0"`, "from 1"}},
		{[]string{"TOLLGATE_WINDOW=soon", "TOLLGATE_STORE=x"}, []string{"TOLLGATE_WINDOW"}},
		{[]string{"TOLLGATE_STORE=x", "TOLLGATE_FAIL_MODE=x"}, []string{"TOLLGATE_STORE", "TOLLGATE_FAIL_MODE"}},
		{[]string{"TOLLGATE_REDIS_URL=redis://:pw-secret@host:99999999"}, []string{"TOLLGATE_REDIS_URL"}},
		// URLs that parse as URLs but not as go-redis options.
		{[]string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=redis://:pw-secret@localhost:6379/abc"}, []string{"TOLLGATE_REDIS_URL", "redis://"}},
		{[]string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=redis://:pw-secret@localhost:6379/0?foo=bar"}, []string{"TOLLGATE_REDIS_URL"}},
		{[]string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=redis://:pw-secret@localhost:6379/0?pool_size=x"}, []string{"TOLLGATE_REDIS_URL"}},
		{[]string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=redis://:pw-secret@localhost:6379/0/1"}, []string{"TOLLGATE_REDIS_URL"}},
		// A lone user-info field is a password to go-redis: masked too.
		{[]string{"TOLLGATE_REDIS_URL=redis://pw-secret@host:6379/0?dial_timeout=-1s"}, []string{"TOLLGATE_REDIS_URL", "xxxxx@host"}},
		{[]string{"TOLLGATE_REDIS_MODE=sentinel"}, []string{"TOLLGATE_REDIS_MODE", `"sentinel"`, "single", "cluster"}},
		// A seed list is a cluster's URL, not a single Redis's; a cluster
		// has no unix socket and only database 0.
		{[]string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=redis://:pw-secret@a:7000?addr=b:7001"}, []string{"TOLLGATE_REDIS_URL"}},
		{[]string{"TOLLGATE_REDIS_MODE=cluster", "TOLLGATE_REDIS_URL=unix:///run/redis.sock"}, []string{"TOLLGATE_REDIS_URL", "seed list"}},
		{[]string{"TOLLGATE_REDIS_MODE=cluster", "TOLLGATE_REDIS_URL=redis://:pw-secret@a:7000/3"}, []string{"TOLLGATE_REDIS_URL", "database 0"}},
		{[]string{"TOLLGATE_REDIS_MODE=cluster", "TOLLGATE_REDIS_URL=redis://:pw-secret@a:7000?addr=b"}, []string{"TOLLGATE_REDIS_URL"}},
		{[]string{"TOLLGATE_ALGORITHM=leaky_bucket"}, []string{"TOLLGATE_ALGORITHM", "fixed_window, sliding_log, sliding_window, token_bucket"}},
		{[]string{"TOLLGATE_TRUSTED_PROXIES=10.0.0.0/8,10.1.2.3/40"}, []string{"TOLLGATE_TRUSTED_PROXIES", `"10.0.0.0/8,10.1.2.3/40"`, "CIDRs"}},
		{[]string{"TOLLGATE_CHECK_ADDR=127.0.0.1:0", "TOLLGATE_CHECK_DENY_STATUS=401"}, []string{"TOLLGATE_CHECK_DENY_STATUS", `"401"`, "429, or 403"}},
		// A token too short to be a secret, never printed back.
		{[]string{"TOLLGATE_ADMIN_TOKEN=pw-secret"}, []string{"TOLLGATE_ADMIN_TOKEN", "9 bytes, not shown", "16 to 1024"}},
		{[]string{"TOLLGATE_ADMIN_TOKEN=pw-secret pw-secret pw-secret"}, []string{"TOLLGATE_ADMIN_TOKEN"}},
		// Every listener but admin off: nothing would be rate-limited.
		{[]string{"TOLLGATE_LISTEN_ADDR=off"}, []string{"TOLLGATE_LISTEN_ADDR", `"off"`, "TOLLGATE_CHECK_ADDR"}},
	}
	for _, tt := range tests {
		var stderr bytes.Buffer
		err := app.Run(t.Context(), []string{"tollgate"}, tt.environ, io.Discard, &stderr)
		if got := app.ExitCode(err); got != 2 {
			t.Errorf("Run(%v) exit = %d (%v), want 2", tt.environ, got, err)
			continue
		}
		msg := err.Error()
		if strings.Contains(msg, "\n") || strings.Contains(msg, "pw-secret") {
			t.Errorf("Run(%v) message %q: want one line without credentials", tt.environ, msg)
		}
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("Run(%v) message %q lacks %q", tt.environ, msg, w)
			}
		}
		if stderr.Len() != 0 {
			t.Errorf("Run(%v) logged before failing: %q", tt.environ, stderr.String())
		}
	}
}

func TestRunUnexpectedArgument(t *testing.T) {
	t.Parallel()
	err := app.Run(t.Context(), []string{"tollgate", "serve"}, nil, io.Discard, io.Discard)
	if app.ExitCode(err) != 2 {
		t.Errorf("Run with an argument: exit %d (%v), want 2", app.ExitCode(err), err)
	}
	var out bytes.Buffer
	if err := app.Run(t.Context(), []string{"tollgate", "-h"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"TOLLGATE_REDIS_TIMEOUT", "TOLLGATE_FAIL_MODE", "TOLLGATE_REPLICAS", "TOLLGATE_DENY_CACHE", "TOLLGATE_REDIS_MODE",
		"TOLLGATE_CHECK_ADDR", "TOLLGATE_CHECK_DENY_STATUS", "TOLLGATE_TRUSTED_PROXIES", "TOLLGATE_ANONYMOUS", "TOLLGATE_IPV6_PREFIX"} {
		if !strings.Contains(out.String(), v) {
			t.Errorf("-h output lacks %s:\n%s", v, out.String())
		}
	}
	for _, a := range domain.Algorithms {
		if !strings.Contains(out.String(), a.Name+" ") || !strings.Contains(out.String(), a.Summary) {
			t.Errorf("-h output lacks algorithm %s from the table:\n%s", a.Name, out.String())
		}
	}
}

func TestRunVersion(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"-version", "--version"} {
		var out bytes.Buffer
		if err := app.Run(t.Context(), []string{"tollgate", arg}, []string{"TOLLGATE_LIMIT=nope"}, &out, io.Discard); err != nil {
			t.Fatalf("tollgate %s: %v (it must not read the configuration)", arg, err)
		}
		if got, want := out.String(), app.BuildVersion()+"\n"; got != want || !strings.HasPrefix(got, "tollgate ") {
			t.Errorf("tollgate %s printed %q, want %q", arg, got, want)
		}
	}
}

func TestRunListenError(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t)
	addr := strings.TrimPrefix(g.Public, "http://")
	err := app.Run(t.Context(), []string{"tollgate"}, []string{"TOLLGATE_LISTEN_ADDR=" + addr, "TOLLGATE_ADMIN_ADDR=127.0.0.1:0"}, io.Discard, io.Discard)
	if code := app.ExitCode(err); code != 2 || !strings.Contains(err.Error(), "listen") {
		t.Errorf("Run on a busy port = %v (exit %d), want a listen error, exit 2", err, code)
	}
}

// TestGatewayEndToEnd runs the real wiring in process: config from the
// environment, the memory store, the echo upstream, the admin listener.
func TestGatewayEndToEnd(t *testing.T) {
	t.Parallel()
	g := apptest.Start(t, "TOLLGATE_LIMIT=5", "TOLLGATE_WINDOW=1h")

	get := func(tenant string) *http.Response {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.Public+"/orders?page=2", nil)
		if tenant != "" {
			req.Header.Set("X-Tenant-ID", tenant)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	for i := range 5 {
		resp := get("acme")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: status %d, want 200", i+1, resp.StatusCode)
		}
		if i == 0 {
			var echo map[string]string
			if err := json.NewDecoder(resp.Body).Decode(&echo); err != nil {
				t.Fatal(err)
			}
			if echo["tenant"] != "acme" || echo["method"] != "GET" || echo["path"] != "/orders" {
				t.Errorf("echo = %v", echo)
			}
		}
	}
	resp := get("acme")
	if resp.StatusCode != 429 {
		t.Fatalf("request 6: status %d, want 429", resp.StatusCode)
	}
	for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("429 lacks %s", h)
		}
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != `"default";q=5;w=3600` {
		t.Errorf("RateLimit-Policy = %q", got)
	}
	// The next denial comes from the deny cache, with the same answer.
	again := get("acme")
	if again.StatusCode != 429 || again.Header.Get("Retry-After") == "" || again.Header.Get("RateLimit-Policy") != `"default";q=5;w=3600` {
		t.Errorf("request 7 (deny cache): status %d, headers %v", again.StatusCode, again.Header)
	}
	// Unresolved traffic shares one budget.
	for range 5 {
		get("")
	}
	if got := get("bad tenant!").StatusCode; got != 429 {
		t.Errorf("unknown's sixth request: status %d, want 429", got)
	}

	// The admin listener is never limited.
	for range 10 {
		r, err := http.Get(g.Admin + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 200 {
			t.Fatalf("/readyz = %d", r.StatusCode)
		}
	}
	r, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	body, _ := io.ReadAll(r.Body)
	for _, want := range []string{
		`tollgate_decisions_total{algorithm="fixed_window",outcome="allowed"} 10`,
		`tollgate_decisions_total{algorithm="fixed_window",outcome="denied"} 2`,
		`tollgate_decisions_total{algorithm="fixed_window",outcome="cached_denied"} 1`,
		`tollgate_store_errors_total 0`,
		`tollgate_decision_duration_seconds_count{algorithm="fixed_window"} 13`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), "acme") {
		t.Error("/metrics has a per-tenant series")
	}
}

// TestRunGracefulShutdown: a stop closes the listeners at once (the
// proxy's and the check listener's), lets the in-flight request finish,
// and Run returns nil.
func TestRunGracefulShutdown(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		io.WriteString(w, "finished")
	}))
	defer up.Close()
	g := apptest.Start(t, "TOLLGATE_UPSTREAM_URL="+up.URL, "TOLLGATE_CHECK_ADDR=127.0.0.1:0")

	type result struct {
		status int
		body   string
		err    error
	}
	inflight := make(chan result, 1)
	go func() {
		resp, err := http.Get(g.Public + "/slow")
		if err != nil {
			inflight <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		inflight <- result{resp.StatusCode, string(b), err}
	}()
	<-arrived
	stopped := make(chan error, 1)
	go func() { stopped <- g.Stop() }()

	// New connections are refused while the request is still in flight.
	deadline := time.Now().Add(5 * time.Second)
	for _, base := range []string{g.Public, g.Check} {
		for {
			c, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second)
			if err != nil {
				break
			}
			c.Close()
			if time.Now().After(deadline) {
				t.Fatalf("listener %s still accepting 5s after the stop", base)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	select {
	case err := <-stopped:
		t.Fatalf("Run returned (%v) before the in-flight request finished", err)
	default:
	}
	close(release)
	if r := <-inflight; r.err != nil || r.status != 200 || r.body != "finished" {
		t.Errorf("in-flight request = %d %q %v, want 200 finished", r.status, r.body, r.err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The log is read by another goroutine: give it a moment.
	for deadline := time.Now().Add(2 * time.Second); !strings.Contains(g.Logs(), `"msg":"stopped"`); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no stopped line in logs:\n%s", g.Logs())
		}
	}
}

// get sends GET url with headers, given as name-value pairs, and returns
// the response and its body.
func get(t *testing.T, url string, headers ...string) (*http.Response, string) {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(headers); i += 2 {
		h.Set(headers[i], headers[i+1])
	}
	return testhttp.Do(t, http.MethodGet, url, "", h)
}

func TestRunPerTenantBudgets(t *testing.T) {
	t.Parallel()
	path := writeTenants(t, `{"tenants": [
	  {"id": "acme",   "api_keys": ["k-acme"],   "limit": 2, "window": "1m"},
	  {"id": "globex", "api_keys": ["k-globex"], "limit": 3, "window": "2m"},
	  {"id": "hooli",  "api_keys": ["k-hooli"]}
	]}`)
	base, logs := startGateway(t, "TOLLGATE_TENANTS_FILE="+path, "TOLLGATE_LIMIT=1", "TOLLGATE_WINDOW=30s")
	tests := []struct {
		tenant  string
		headers []string
		policy  string
		want    []int
	}{
		{"acme", []string{"Authorization", "Bearer k-acme"}, `"default";q=2;w=60`, []int{200, 200, 429}},
		{"globex", []string{"X-API-Key", "k-globex"}, `"default";q=3;w=120`, []int{200, 200, 200, 429}},
		{"hooli", []string{"X-API-Key", "k-hooli"}, `"default";q=1;w=30`, []int{200, 429}},
		{"unknown", []string{"X-Tenant-ID", "acme"}, `"default";q=1;w=30`, []int{200, 429}},
	}
	for _, tt := range tests {
		t.Run(tt.tenant, func(t *testing.T) {
			t.Parallel()
			for i, want := range tt.want {
				resp, body := get(t, base+"/x", tt.headers...)
				if resp.StatusCode != want {
					t.Errorf("request %d: status %d, want %d", i+1, resp.StatusCode, want)
				}
				if got := resp.Header.Get("RateLimit-Policy"); got != tt.policy {
					t.Errorf("request %d: RateLimit-Policy %q, want %q", i+1, got, tt.policy)
				}
				if want != http.StatusOK {
					continue
				}
				var echo struct{ Tenant string }
				if err := json.Unmarshal([]byte(body), &echo); err != nil || echo.Tenant != tt.tenant {
					t.Errorf("request %d: echo %q, want tenant %q", i+1, body, tt.tenant)
				}
			}
		})
	}
	t.Cleanup(func() {
		for _, key := range []string{"k-acme", "k-globex", "k-hooli"} {
			if strings.Contains(logs.String(), key) {
				t.Errorf("log holds API key %s", key)
			}
		}
	})
}

// TestRunReloadsOnSIGHUP sends a real SIGHUP to the test process while
// Run serves: Run must reload the tenants file rather than let the signal
// kill the process.
func TestRunReloadsOnSIGHUP(t *testing.T) {
	t.Parallel()
	path := writeTenants(t, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limit": 1}]}`)
	base, logs := startGateway(t, "TOLLGATE_TENANTS_FILE="+path)
	policy := func() string {
		resp, _ := get(t, base+"/", "X-API-Key", "k-acme")
		return resp.Header.Get("RateLimit-Policy")
	}
	if got, want := policy(), `"default";q=1;w=60`; got != want {
		t.Fatalf("before reload: RateLimit-Policy %q, want %q", got, want)
	}

	rewrite(t, path, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limit": 7},
	  {"id": "globex", "api_keys": ["k-globex"]}]}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new budget", func() bool { return policy() == `"default";q=7;w=60` })
	// Any line with tenants=2: another test's SIGHUP may have reloaded
	// the first file too. Waited for: the new tenants serve a moment
	// before the line that says so is written.
	waitFor(t, "a reload log line with tenants=2", func() bool {
		for _, l := range logs.Lines(t, "tenants file reloaded") {
			if l["tenants"] == float64(2) {
				return true
			}
		}
		return false
	})

	rewrite(t, path, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limit": 0}]}`)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the rejection log line", func() bool {
		return len(logs.Lines(t, "tenants file rejected; keeping the previous tenants and policy")) > 0
	})
	if got, want := policy(), `"default";q=7;w=60`; got != want {
		t.Errorf("after a bad reload: RateLimit-Policy %q, want %q (the old table)", got, want)
	}
	if strings.Contains(logs.String(), "k-acme") {
		t.Errorf("log holds an API key:\n%s", logs)
	}
}

// TestRunStopsWhileAReloadHangs: a SIGHUP whose file never finishes
// reading (a FIFO nobody writes, as a hung network mount would) holds
// nothing: the gateway serves on with the tenants it had, and a stop
// signal stops it at once. Before, the reload ran on Run's loop, and the
// stop waited for it forever (SIGTERM ignored, the listeners open). Not
// parallel: the signal reaches every gateway of the process.
func TestRunStopsWhileAReloadHangs(t *testing.T) {
	path := writeTenants(t, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limit": 5}]}`)
	g := apptest.Start(t, "TOLLGATE_TENANTS_FILE="+path)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// unblock lets the reader of the FIFO go (it reads an empty file):
	// the reload's goroutine must not outlive the test.
	unblock := func() {
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	}
	t.Cleanup(unblock)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the reload is stuck opening the FIFO
	if resp, _ := get(t, g.Public+"/", "X-API-Key", "k-acme"); resp.StatusCode != http.StatusOK ||
		resp.Header.Get("RateLimit-Policy") != `"default";q=5;w=60` {
		t.Errorf("during the reload: %d, RateLimit-Policy %q; want 200 on the old tenants", resp.StatusCode, resp.Header.Get("RateLimit-Policy"))
	}
	stopped := make(chan error, 1)
	go func() { stopped <- g.Stop() }()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(5 * time.Second):
		unblock()
		<-stopped
		t.Fatalf("the stop waited for the reload: Run still running 5s after it\nlogs:\n%s", g.Logs())
	}
}

func TestRunRejectsOversizedHeader(t *testing.T) {
	t.Parallel()
	base, _ := startGateway(t)
	resp, _ := get(t, base+"/", "X-Big", strings.Repeat("a", 100<<10))
	if got, want := resp.StatusCode, http.StatusRequestHeaderFieldsTooLarge; got != want {
		t.Errorf("status %d, want %d", got, want)
	}
	// Just under the cap passes.
	resp, _ = get(t, base+"/", "X-Big", strings.Repeat("a", 60<<10))
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Errorf("60 KiB of headers: status %d, want %d", got, want)
	}
}

// TestRunIgnoresSIGHUPWithoutTenantsFile sends a real SIGHUP to the test
// process while a gateway without a tenants file serves: it is logged and
// ignored, and the gateway keeps serving. Before, it killed the process
// (exit 129). Not parallel, so that no other test's gateway is starting or
// stopping meanwhile; the gateway's signal.Notify is in place once Start
// returns, and the signal then never takes its default action.
func TestRunIgnoresSIGHUPWithoutTenantsFile(t *testing.T) {
	base, logs := startGateway(t)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the SIGHUP log line", func() bool {
		return len(logs.Lines(t, "SIGHUP ignored: no tenants file and no policy file")) > 0
	})
	if l := logs.Lines(t, "SIGHUP ignored: no tenants file and no policy file"); l[0]["level"] != "INFO" {
		t.Errorf("SIGHUP line %v, want level INFO", l[0])
	}
	if resp, _ := get(t, base+"/x", "X-Tenant-ID", "acme"); resp.StatusCode != http.StatusOK {
		t.Errorf("after SIGHUP: status %d, want 200", resp.StatusCode)
	}
}

// TestRunPprof: TOLLGATE_PPROF=true serves the profiles on the admin
// listener, beside the admin endpoints; by default they are not there.
func TestRunPprof(t *testing.T) {
	t.Parallel()
	status := func(url string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	on := apptest.Start(t, "TOLLGATE_PPROF=true")
	for _, path := range []string{"/debug/pprof/cmdline", "/debug/pprof/heap", "/healthz"} {
		if got := status(on.Admin + path); got != http.StatusOK {
			t.Errorf("TOLLGATE_PPROF=true: GET %s = %d, want 200", path, got)
		}
	}
	off := apptest.Start(t)
	if got := status(off.Admin + "/debug/pprof/cmdline"); got != http.StatusNotFound {
		t.Errorf("default: GET /debug/pprof/cmdline = %d, want 404", got)
	}
}

// TestRunLogsVersionAtStartup: the start-up line names the build, so a
// log shows which tollgate answered.
func TestRunLogsVersionAtStartup(t *testing.T) {
	t.Parallel()
	_, logs := startGateway(t)
	l := logs.Lines(t, "tollgate listening")
	if len(l) != 1 {
		t.Fatalf("start-up lines %v, want one", l)
	}
	if got := l[0]["version"]; got != app.BuildVersion() {
		t.Errorf("start-up version = %v, want %q", got, app.BuildVersion())
	}
}
