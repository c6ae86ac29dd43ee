package app_test

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/rls/rlsxds/xdstest"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/tlsfiles"
	"github.com/tollgate/tollgate/internal/tlsfiles/tlstest"
)

// envoyGateway is what Envoy Gateway gives its rate limit service: its
// certificates in a Secret volume (tls.crt, tls.key, ca.crt) and an xDS
// server with mutual TLS, serving node envoy-ratelimit.
type envoyGateway struct {
	ca      *tlstest.CA
	certs   string // the Secret's directory
	xds     *xdstest.Server
	environ []string // the container's environment, on loopback ports
}

func newEnvoyGateway(t *testing.T) *envoyGateway {
	t.Helper()
	eg := &envoyGateway{ca: tlstest.NewCA(t, "envoy-gateway"), certs: t.TempDir()}
	caPath := eg.ca.WriteCA(t, eg.certs, "ca.crt")
	eg.ca.WritePair(t, eg.certs, "tls", "envoy", "localhost", "127.0.0.1")
	srvCert, srvKey := eg.ca.WritePair(t, t.TempDir(), "xds", "envoy-gateway", "localhost")
	srvFiles, err := tlsfiles.Load(tlsfiles.Files{Cert: srvCert, Key: srvKey, CA: caPath}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	eg.xds = xdstest.New("envoy-ratelimit", grpc.Creds(credentials.NewTLS(srvFiles.ServerConfig())))
	addr := eg.xds.Start(t, "")
	cert, key := filepath.Join(eg.certs, "tls.crt"), filepath.Join(eg.certs, "tls.key")
	eg.environ = []string{
		"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true", "RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=info", "USE_STATSD=false",
		"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=localhost:" + addr[strings.LastIndexByte(addr, ':')+1:],
		"CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + cert, "GRPC_SERVER_TLS_KEY=" + key, "GRPC_SERVER_TLS_CA_CERT=" + caPath,
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + cert, "CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + key,
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + caPath, "FORCE_START_WITHOUT_INITIAL_CONFIG=true",
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0", "PROMETHEUS_MAPPER_YAML=/etc/statsd-exporter/conf.yaml",
		// Loopback ports instead of 8080 and 8081.
		"HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0",
		// apptest's own listeners off: the environment names them.
		"TOLLGATE_LISTEN_ADDR=", "TOLLGATE_ADMIN_ADDR=",
	}
	return eg
}

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
	eg := newEnvoyGateway(t)
	g := apptest.StartArgs(t, []string{"/bin/ratelimit"}, eg.environ...)
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
	if l := logtest.Lines(t, g.Logs(), "envoyproxy/ratelimit variables ignored: tollgate does not honour them"); len(l) != 1 || l[0]["variables"] != "PROMETHEUS_MAPPER_YAML" {
		t.Errorf("the warning of ignored variables: %v, want one naming PROMETHEUS_MAPPER_YAML", l)
	}

	c := tlsClient(t, g.RLS, eg.ca, "", "") // Envoy Gateway's Envoy: server TLS, its CA
	_, err := ask(t, c, "a")
	if s := status.Convert(err); s.Code() != codes.Unknown || s.Message() != "no rate limit configuration loaded" {
		t.Errorf("before the first snapshot: %v, want UNKNOWN no rate limit configuration loaded", err)
	}
	eg.xds.Set(t, "1", xdsRule(2))
	eg.xds.WaitRequest(t, 30*time.Second, "ACK of 1", xdstest.IsACK("1"))
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		resp, err := ask(t, c, "a")
		if err != nil || resp.OverallCode != want {
			t.Errorf("hit %d: %v, %v; want %v", i+1, resp, err, want)
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
		var stderr bytes.Buffer
		err := app.Run(t.Context(), tc.args, tc.environ, io.Discard, &stderr)
		if app.ExitCode(err) != 2 || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Run(%v, %v) = %v (exit %d), want exit 2, one line naming %s", tc.args, tc.environ, err, app.ExitCode(err), tc.want)
		}
	}
}
