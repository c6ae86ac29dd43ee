package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/rls/rlsxds/xdstest"
)

// egDomain is what Envoy Gateway's controller sends for a route with a
// global rate limit: domain d, descriptor k at rpu a day, so that no
// test's steps span the end of a window (and, when
// broken, k twice, which envoyproxy/ratelimit refuses).
func egDomain(rpu uint32, broken bool) *rlsconfv3.RateLimitConfig {
	c := &rlsconfv3.RateLimitConfig{Name: "d", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_DAY, RequestsPerUnit: rpu}},
	}}
	if broken {
		c.Descriptors = append(c.Descriptors, &rlsconfv3.RateLimitDescriptor{Key: "k"})
	}
	return c
}

// egClient is Envoy's rate limit client under Envoy Gateway: TLS,
// trusting the Secret's CA, no client certificate.
func egClient(t *testing.T, eg *apptest.EnvoyGateway, addr string) pb.RateLimitServiceClient {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(eg.CA.PEM)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

// egAsk1 is one descriptor, k=v.
func egAsk1(v string) []*ratelimitv3.RateLimitDescriptor {
	return []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: v}}}}
}

// egAsk asks for one hit of k=v in domain d.
func egAsk(t *testing.T, c pb.RateLimitServiceClient, v string) *pb.RateLimitResponse {
	t.Helper()
	resp, err := c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "d", Descriptors: egAsk1(v)})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// waitConfigured waits until c answers with a configuration loaded: an
// unknown domain is then OK, and spends nothing.
func waitConfigured(t *testing.T, c pb.RateLimitServiceClient) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "unconfigured", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: "v"}}},
		}})
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no configuration after 30 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEnvoyGatewayDropIn: two replicas run as Envoy Gateway deploys
// envoyproxy/ratelimit (its command, its environment, its certificates
// and its xDS server with mutual TLS), on one Redis and on a Redis
// Cluster: they share one budget, answer /healthcheck, take a changed
// configuration and keep theirs when a broken one is refused, and leave
// no key without a TTL.
func TestEnvoyGatewayDropIn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		redis func(t *testing.T) (environ []string, rdb goredis.UniversalClient)
	}{
		{"redis", func(t *testing.T) ([]string, goredis.UniversalClient) {
			srv := startRedis(t)
			u, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			return []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + u.Host}, srv.Client
		}},
		{"cluster", func(t *testing.T) ([]string, goredis.UniversalClient) {
			c := sharedClusterFor(t)
			u, err := url.Parse(c.Seed)
			if err != nil {
				t.Fatal(err)
			}
			return []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_TYPE=cluster", "REDIS_URL=" + u.Host}, c.Client
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			environ, rdb := tc.redis(t)
			prefix := uniquePrefix(t)
			eg := apptest.NewEnvoyGateway(t)
			environ = append(environ, "TOLLGATE_KEY_PREFIX="+prefix, "TOLLGATE_REDIS_TIMEOUT=2s")
			a, b := eg.Start(t, environ...), eg.Start(t, environ...)
			for _, g := range []*apptest.Gateway{a, b} {
				resp, err := http.Get(g.Admin + "/healthcheck")
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(body) != "OK" {
					t.Errorf("/healthcheck = %d %q, want 200 OK", resp.StatusCode, body)
				}
			}
			ca, cb := egClient(t, eg, a.RLS), egClient(t, eg, b.RLS)

			eg.XDS.Set(t, "1", egDomain(3, false))
			waitConfigured(t, ca)
			waitConfigured(t, cb)
			for i, step := range []struct {
				c    pb.RateLimitServiceClient
				code pb.RateLimitResponse_Code
				left uint32
			}{{ca, pb.RateLimitResponse_OK, 2}, {cb, pb.RateLimitResponse_OK, 1}, {ca, pb.RateLimitResponse_OK, 0}, {cb, pb.RateLimitResponse_OVER_LIMIT, 0}} {
				if r := egAsk(t, step.c, "x"); r.OverallCode != step.code || r.Statuses[0].LimitRemaining != step.left {
					t.Errorf("hit %d: %v, want %v with %d left of 3 shared by both replicas", i+1, r, step.code, step.left)
				}
			}

			eg.XDS.Set(t, "2", egDomain(100, true))
			// Refused; the limit of 3 stays.
			eg.XDS.WaitRequest(t, 30*time.Second, "NACK of 2", xdstest.IsNACK("1"))
			for _, c := range []pb.RateLimitServiceClient{ca, cb} {
				if r := egAsk(t, c, "x"); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 3 {
					t.Errorf("after a refused snapshot: %v, want OVER_LIMIT against 3 (kept)", r)
				}
			}

			eg.XDS.Set(t, "3", egDomain(5, false))
			deadline := time.Now().Add(30 * time.Second)
			for _, c := range []pb.RateLimitServiceClient{ca, cb} {
				for egAsk(t, c, "y").Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 {
					if time.Now().After(deadline) {
						t.Fatal("version 3 not applied after 30 s")
					}
					time.Sleep(20 * time.Millisecond)
				}
			}

			keys := scanKeys(t, rdb, prefix+"*")
			if len(keys) == 0 {
				t.Fatalf("no key under %s", prefix)
			}
			for _, k := range keys {
				if ttl, err := rdb.PTTL(context.Background(), k).Result(); err != nil || ttl <= 0 {
					t.Errorf("key %s: TTL %v, %v; want one", k, ttl, err)
				}
			}
		})
	}
}
