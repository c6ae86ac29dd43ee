package integration

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/rls/rlsxds/xdstest"
	"github.com/tollgate/tollgate/internal/freeport"
)

// gatewayImage is the gateway's image, as make image builds it:
// TOLLGATE_TEST_GATEWAY_IMAGE, else tollgate.local/tollgate:dev.
func gatewayImage() string {
	if img := os.Getenv("TOLLGATE_TEST_GATEWAY_IMAGE"); img != "" {
		return img
	}
	return "tollgate.local/tollgate:dev"
}

// TestEnvoyGatewayImage: the gateway's image, run as Envoy Gateway runs
// envoyproxy/ratelimit's (command /bin/ratelimit, user 65534, a
// read-only root file system, its Secret on /certs, its environment),
// answers /healthcheck and /metrics, serves gRPC over TLS, takes its
// configuration over xDS with mutual TLS, and decides on Redis. make
// test builds the image first; without it the test fails saying so.
func TestEnvoyGatewayImage(t *testing.T) {
	t.Parallel()
	requireDocker(t)
	ctx := context.Background()
	image := gatewayImage()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		t.Fatalf("the gateway's image %s: %v (build it: make image, or scripts/gateway-image.sh; TOLLGATE_TEST_GATEWAY_IMAGE names another)", image, err)
	}
	srv := startRedis(t)
	redisURL, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	eg := apptest.NewEnvoyGateway(t)
	// A Secret volume's files are readable by the pod's user (0644).
	if err := os.Chmod(eg.Certs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.Chmod(filepath.Join(eg.Certs, f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port := func() string {
		p, err := freeport.Loopback()
		if err != nil {
			t.Fatal(err)
		}
		return strconv.Itoa(p)
	}
	httpPort, grpcPort, promPort := port(), port(), port()
	env := map[string]string{}
	for _, kv := range eg.Environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = strings.ReplaceAll(v, eg.Certs, "/certs")
	}
	for k, v := range map[string]string{
		"PORT": httpPort, "GRPC_PORT": grpcPort, "PROMETHEUS_ADDR": "127.0.0.1:" + promPort,
		"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": redisURL.Host, "TOLLGATE_KEY_PREFIX": uniquePrefix(t),
	} {
		env[k] = v
	}
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:      image,
			Name:       containerName("envoy-ratelimit"),
			Labels:     containerLabels(),
			Entrypoint: []string{"/bin/ratelimit"},
			Env:        env,
			User:       "65534:65534",
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.NetworkMode = "host" // the test's xDS server and Redis on loopback
				hc.ReadonlyRootfs = true
				hc.Binds = []string{eg.Certs + ":/certs:ro"}
			},
			WaitingFor: wait.ForLog(`"msg":"tollgate listening"`).WithStartupTimeout(30 * time.Second),
		},
		Started: true,
	})
	testcontainers.CleanupContainer(t, ctr)
	if err != nil {
		t.Fatalf("run %s as /bin/ratelimit: %v", image, err)
	}

	resp, err := http.Get("http://127.0.0.1:" + httpPort + "/healthcheck")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/healthcheck = %d, want 200", resp.StatusCode)
	}
	if resp, err := http.Get("http://127.0.0.1:" + promPort + "/metrics"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics on PROMETHEUS_ADDR: %v, %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}

	c := egClient(t, eg, "127.0.0.1:"+grpcPort)
	if _, err := c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "d", Descriptors: egAsk1("x")}); status.Code(err) != codes.Unknown {
		t.Errorf("before the first snapshot: %v, want UNKNOWN", err)
	}
	eg.XDS.Set(t, "1", egDomain(2, false))
	eg.XDS.WaitRequest(t, 30*time.Second, "ACK of 1", xdstest.IsACK("1"))
	waitConfigured(t, c)
	for i, want := range []pb.RateLimitResponse_Code{pb.RateLimitResponse_OK, pb.RateLimitResponse_OK, pb.RateLimitResponse_OVER_LIMIT} {
		if r := egAsk(t, c, "x"); r.OverallCode != want {
			t.Errorf("hit %d: %v, want %v", i+1, r, want)
		}
	}
}
