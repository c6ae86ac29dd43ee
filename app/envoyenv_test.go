package app_test

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/rls/rlsxds/xdstest"
	"github.com/tollgate/tollgate/internal/logtest"
)

// fetchBody returns the status and body of url.
func fetchBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestRunAsEnvoyRatelimit: run as /bin/ratelimit with the environment
// Envoy Gateway gives envoyproxy/ratelimit, tollgate serves gRPC over
// TLS on GRPC_PORT, /healthcheck and the admin endpoints on PORT,
// /metrics on PROMETHEUS_ADDR, takes its configuration over xDS with
// mutual TLS, and names what it does not honour.
func TestRunAsEnvoyRatelimit(t *testing.T) {
	t.Parallel()
	eg := apptest.NewEnvoyGateway(t)
	g := eg.Start(t)
	if g.Public != "" {
		t.Errorf("proxy listener %s, want off", g.Public)
	}
	if code, body := fetchBody(t, g.Admin+"/healthcheck"); code != http.StatusOK || body != "OK" {
		t.Errorf("/healthcheck = %d %q, want 200 OK", code, body)
	}
	listening := logtest.Lines(t, g.Logs(), "tollgate listening")
	prom, _ := listening[0]["prometheus"].(string)
	if code, body := fetchBody(t, "http://"+prom+"/metrics"); code != http.StatusOK || !strings.Contains(body, "tollgate_") {
		t.Errorf("/metrics on PROMETHEUS_ADDR (%s) = %d, want 200 with tollgate's metrics", prom, code)
	}
	if code, _ := fetchBody(t, "http://"+prom+"/healthz"); code != http.StatusNotFound {
		t.Errorf("/healthz on PROMETHEUS_ADDR = %d, want 404: only /metrics is served there", code)
	}
	if code, _ := fetchBody(t, g.Admin+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz on PORT = %d, want 200: the admin endpoints are there", code)
	}
	if l := logtest.Lines(t, g.Logs(), "envoyproxy/ratelimit variables ignored: tollgate does not honour them"); len(l) != 1 || l[0]["variables"] != "PROMETHEUS_MAPPER_YAML" {
		t.Errorf("the warning of ignored variables: %v, want one naming PROMETHEUS_MAPPER_YAML", l)
	}

	c := tlsClient(t, g.RLS, eg.CA, "", "") // Envoy Gateway's Envoy: server TLS, its CA
	_, err := ask(t, c, "a")
	if s := status.Convert(err); s.Code() != codes.Unknown || s.Message() != "no rate limit configuration loaded" {
		t.Errorf("before the first snapshot: %v, want UNKNOWN no rate limit configuration loaded", err)
	}
	eg.XDS.Set(t, "1", xdsRule(2))
	eg.XDS.WaitRequest(t, 30*time.Second, "ACK of 1", xdstest.IsACK("1"))
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := ask(t, c, "a")
		if err != nil || resp.OverallCode != want {
			t.Errorf("hit %d: %v, %v; want %v", i+1, resp, err, want)
		}
	}
}

// TestRunAsEnvoyRatelimitAdminAddr: with TOLLGATE_ADMIN_ADDR set, the
// admin endpoints are served there, and PORT serves /healthcheck alone.
func TestRunAsEnvoyRatelimitAdminAddr(t *testing.T) {
	t.Parallel()
	eg := apptest.NewEnvoyGateway(t)
	g := eg.Start(t, "TOLLGATE_ADMIN_ADDR=127.0.0.1:0")
	port, _ := logtest.Lines(t, g.Logs(), "tollgate listening")[0]["http"].(string)
	if port == "" || "http://"+port == g.Admin {
		t.Fatalf("PORT's listener %q beside the admin listener %s, want one of its own", port, g.Admin)
	}
	for _, tc := range []struct {
		url  string
		want int
	}{
		{"http://" + port + "/healthcheck", http.StatusOK},
		{"http://" + port + "/healthz", http.StatusNotFound},
		{g.Admin + "/healthz", http.StatusOK},
		{g.Admin + "/healthcheck", http.StatusNotFound},
	} {
		if code, _ := fetchBody(t, tc.url); code != tc.want {
			t.Errorf("GET %s = %d, want %d", tc.url, code, tc.want)
		}
	}
}

// TestRunAsEnvoyRatelimitErrors: a value of envoyproxy/ratelimit's
// environment that tollgate cannot honour stops the start (exit 2),
// naming the variable; the flag works as the name does.
func TestRunAsEnvoyRatelimitErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args    []string
		environ []string
		want    string
	}{
		{[]string{"/bin/ratelimit"}, []string{"GRPC_PORT=grpc"}, `GRPC_PORT="grpc"`},
		{[]string{"tollgate", "-envoy-ratelimit"}, []string{"CONFIG_TYPE=XDS"}, `CONFIG_TYPE="XDS"`},
		{[]string{"/bin/ratelimit"}, []string{"REDIS_URL=r:6379", "REDIS_TYPE=SENTINEL"}, "REDIS_TYPE"},
		{[]string{"/bin/ratelimit"}, []string{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=/nowhere.crt", "GRPC_SERVER_TLS_KEY=/nowhere.key", "HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0"},
			"TOLLGATE_RLS_TLS_CERT: /nowhere.crt"},
	} {
		exitsTwo(t, tc.args, tc.environ, tc.want)
	}
}

// TestEnvoyGatewayExample: docs/rls.md shows examples/envoy-gateway.yaml's
// ConfigMap as it is.
func TestEnvoyGatewayExample(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("../examples/envoy-gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../docs/rls.md")
	if err != nil {
		t.Fatal(err)
	}
	start := strings.Index(string(example), "apiVersion: v1\n")
	end := strings.Index(string(example), "\n---\n")
	if start < 0 || end < start {
		t.Fatalf("examples/envoy-gateway.yaml: no ConfigMap document first")
	}
	if configMap := string(example[start : end+1]); !strings.Contains(string(doc), "```yaml\n"+configMap+"```\n") {
		t.Errorf("docs/rls.md does not show examples/envoy-gateway.yaml's ConfigMap as it is:\n%s", configMap)
	}
}
