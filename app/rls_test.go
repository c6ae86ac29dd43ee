package app_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/internal/logtest"
)

// rlsYAML is one domain whose key k has rpu requests per minute.
func rlsYAML(rpu string) string {
	return "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + rpu + "}\n"
}

// writeAt writes data at path.
func writeAt(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestRunRLSConfigErrors: the variables are checked, and a configuration
// envoyproxy/ratelimit rejects stops the start (exit 2, naming the file).
func TestRunRLSConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "good.yaml"), rlsYAML("5"))
	writeAt(t, filepath.Join(dir, "bad.yaml"), "domain: d2\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	tests := []struct {
		environ []string
		want    []string
	}{
		{[]string{"TOLLGATE_RLS_ADDR=127.0.0.1:0"}, []string{"TOLLGATE_RLS_CONFIG", "required with TOLLGATE_RLS_ADDR"}},
		{[]string{"TOLLGATE_RLS_ADDR=nowhere", "TOLLGATE_RLS_CONFIG=" + dir}, []string{"TOLLGATE_RLS_ADDR", `"nowhere"`}},
		{[]string{"TOLLGATE_RLS_COUNT_DENIED=maybe"}, []string{"TOLLGATE_RLS_COUNT_DENIED"}},
		// Only the fixed window counts denied hits: refused, not ignored.
		{[]string{"TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_CONFIG=" + dir}, []string{"TOLLGATE_RLS_CONFIG", filepath.Join(dir, "bad.yaml"), "invalid rate limit unit"}},
		{[]string{"TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_CONFIG=" + filepath.Join(dir, "none")}, []string{"TOLLGATE_RLS_CONFIG", "none"}},
	}
	for _, tt := range tests {
		if logs := exitsTwo(t, []string{"tollgate"}, append(tt.environ, "TOLLGATE_LISTEN_ADDR=127.0.0.1:0", "TOLLGATE_ADMIN_ADDR=127.0.0.1:0"), tt.want...); logs != "" {
			t.Errorf("Run(%v) logged %q, want nothing", tt.environ, logs)
		}
	}
}

// exitsTwo runs app.Run with args and environ, fails t unless it returns
// exit status 2 at once with a one-line message holding every string of
// want, and returns what it logged.
func exitsTwo(t *testing.T, args, environ []string, want ...string) string {
	t.Helper()
	var stderr bytes.Buffer
	err := app.Run(t.Context(), args, environ, io.Discard, &stderr)
	if got := app.ExitCode(err); got != 2 {
		t.Errorf("Run(%v, %v) exit = %d (%v), want 2", args, environ, got, err)
		return stderr.String()
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Run(%v, %v) message %q lacks %q", args, environ, err, w)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("Run(%v, %v): message %q, want one line", args, environ, err)
	}
	return stderr.String()
}

// rlsClient dials the gateway's rate limit service.
func rlsClient(t *testing.T, g *apptest.Gateway) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(g.RLS, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// remaining asks for one hit of k=v in domain d and returns the answer's
// current limit and remaining.
func remaining(t *testing.T, c pb.RateLimitServiceClient, v string) (rpu, left uint32) {
	t.Helper()
	resp, err := c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: v}}},
	}})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp.Statuses[0].CurrentLimit.GetRequestsPerUnit(), resp.Statuses[0].LimitRemaining
}

// TestRunRLS: with TOLLGATE_LISTEN_ADDR=off the gateway serves only
// Envoy's rate limit service (and the admin listener): it answers,
// reports SERVING, counts in /metrics, applies a changed file within 2 s,
// keeps the old configuration on a broken change, and stops gracefully.
func TestRunRLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "rls.yaml"), rlsYAML("5"))
	g := apptest.Start(t, "TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_CONFIG="+dir)
	if g.Public != "" {
		t.Errorf("public listener %s, want off", g.Public)
	}
	conn := rlsClient(t, g)
	c := pb.NewRateLimitServiceClient(conn)
	if rpu, left := remaining(t, c, "a"); rpu != 5 || left != 4 {
		t.Fatalf("first hit: limit %d, remaining %d; want 5, 4", rpu, left)
	}
	h, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health: %v, %v; want SERVING", h, err)
	}
	resp, err := http.Get(g.Admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, series := range []string{`tollgate_rls_requests_total{code="OK",domain="d"} 1`,
		`tollgate_rls_descriptors_total{domain="d",outcome="ok",rule="d.k"} 1`, `tollgate_decisions_total{algorithm="fixed_window",outcome="allowed"} 1`} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics lacks %s:\n%s", series, grepLines(string(body), "tollgate_"))
		}
	}

	if strings.Contains(g.Logs(), "rate limit service: not read") {
		t.Errorf("a warning of files not read, with none:\n%s", g.Logs())
	}

	// A file rewritten in place applies within 2 s; a file beside it that
	// is not read is named.
	writeAt(t, filepath.Join(dir, "more.conf"), rlsYAML("9"))
	writeAt(t, filepath.Join(dir, "rls.yaml"), rlsYAML("7"))
	waitWithin(t, 2*time.Second, "the new limit", func() bool { rpu, _ := remaining(t, c, "b"); return rpu == 7 })
	waitWithin(t, time.Second, "the warning of more.conf", func() bool {
		lines := logtest.Lines(t, g.Logs(), "rate limit service: not read (only *.yaml and *.yml files directly in the directory are)")
		return len(lines) == 1 && fmt.Sprint(lines[0]["names"]) == "[more.conf]"
	})
	// A broken change is logged and the old configuration stays.
	writeAt(t, filepath.Join(dir, "rls.yaml"), "domain: d\nbogus: 1\n")
	waitWithin(t, 3*time.Second, "the rejection's log line", func() bool {
		return strings.Contains(g.Logs(), "rate limit service configuration rejected")
	})
	if rpu, _ := remaining(t, c, "c"); rpu != 7 {
		t.Errorf("after a broken change: limit %d, want 7 (kept)", rpu)
	}
	if err := g.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

// TestRunRLSNoDomain: a TOLLGATE_RLS_CONFIG directory that holds no
// domain (empty, or its files elsewhere: a ConfigMap mounted one level
// down) is said at start-up and after a reload that leaves none, as every
// request is then answered OK; the start-up names how many domains it
// read. It started without a word and admitted everything.
func TestRunRLSNoDomain(t *testing.T) {
	t.Parallel()
	const warning = "rate limit service: no domain configured; every request is answered OK"
	dir := t.TempDir()
	g := apptest.Start(t, "TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_CONFIG="+dir)
	lines := logtest.Lines(t, g.Logs(), warning)
	if len(lines) != 1 || lines[0]["dir"] != dir || lines[0]["level"] != "WARN" {
		t.Fatalf("start-up on an empty directory: %v, want one warning naming %s:\n%s", lines, dir, g.Logs())
	}
	if l := logtest.Lines(t, g.Logs(), "rate limit service configuration loaded"); len(l) != 1 || l[0]["domains"] != 0.0 {
		t.Errorf("start-up line of the configuration: %v, want domains 0", l)
	}
	writeAt(t, filepath.Join(dir, "rls.yaml"), rlsYAML("5"))
	waitWithin(t, 3*time.Second, "the reload", func() bool {
		return strings.Contains(g.Logs(), "rate limit service configuration reloaded")
	})
	if n := len(logtest.Lines(t, g.Logs(), warning)); n != 1 {
		t.Errorf("%d warnings after a reload that configures domain d, want the start-up's alone", n)
	}

	configured := t.TempDir()
	writeAt(t, filepath.Join(configured, "rls.yaml"), rlsYAML("5"))
	g = apptest.Start(t, "TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_CONFIG="+configured)
	if strings.Contains(g.Logs(), warning) {
		t.Errorf("a warning with domain d configured:\n%s", g.Logs())
	}
	if l := logtest.Lines(t, g.Logs(), "rate limit service configuration loaded"); len(l) != 1 || l[0]["domains"] != 1.0 {
		t.Errorf("start-up line of the configuration: %v, want domains 1", l)
	}
}

// waitWithin polls cond every 50 ms for at most d.
func waitWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within %v", what, d)
}

// grepLines returns the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
