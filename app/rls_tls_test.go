package app_test

import (
	"crypto/tls"
	"crypto/x509"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/faces/rls/rlsxds/xdstest"
	"github.com/tollgate/tollgate/internal/freeport"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/tlsfiles"
	"github.com/tollgate/tollgate/internal/tlsfiles/tlstest"
)

// tlsClient dials addr over TLS trusting ca, presenting cert and key when
// set.
func tlsClient(t *testing.T, addr string, ca *tlstest.CA, cert, key string) pb.RateLimitServiceClient {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	cfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{kp}
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

// ask asks for one hit of k=v in domain d.
func ask(t *testing.T, c pb.RateLimitServiceClient, v string) (*pb.RateLimitResponse, error) {
	t.Helper()
	return c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "k", Value: v}}},
	}})
}

// serverName returns the common name of the certificate addr serves.
func serverName(t *testing.T, addr string, ca *tlstest.CA, cert, key string) string {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.PEM)
	kp, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost", Certificates: []tls.Certificate{kp}, NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// TestRunRLSMutualTLS: with TOLLGATE_RLS_TLS_* the rate limit service
// answers a client with a certificate signed by the client CA, refuses
// one without and one in plain text, and serves a certificate replaced
// on disk to new connections without a restart.
func TestRunRLSMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A day's window: the steps below span a rotation, and a minute's
	// window could end between them.
	writeAt(t, filepath.Join(dir, "rls.yaml"), strings.Replace(rlsYAML("5"), "unit: minute", "unit: day", 1))
	ca := tlstest.NewCA(t, "ca")
	certs := t.TempDir()
	cert, key := ca.WritePair(t, certs, "tls", "first", "localhost", "127.0.0.1")
	clientCert, clientKey := ca.WritePair(t, certs, "client", "envoy")
	g := apptest.Start(t, "TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_CONFIG="+dir,
		"TOLLGATE_RLS_TLS_CERT="+cert, "TOLLGATE_RLS_TLS_KEY="+key, "TOLLGATE_RLS_TLS_CLIENT_CA="+ca.WriteCA(t, certs, "ca.crt"))

	resp, err := ask(t, tlsClient(t, g.RLS, ca, clientCert, clientKey), "a")
	if err != nil || resp.OverallCode != pb.RateLimitResponse_OK || resp.Statuses[0].LimitRemaining != 4 {
		t.Fatalf("with a client certificate: %v, %v; want OK, 4 remaining", resp, err)
	}
	if _, err := ask(t, tlsClient(t, g.RLS, ca, "", ""), "a"); status.Code(err) != codes.Unavailable {
		t.Errorf("without a client certificate: %v, want UNAVAILABLE (refused at the handshake)", err)
	}
	conn, err := grpc.NewClient(g.RLS, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := ask(t, pb.NewRateLimitServiceClient(conn), "a"); status.Code(err) != codes.Unavailable {
		t.Errorf("in plain text: %v, want UNAVAILABLE", err)
	}

	if got := serverName(t, g.RLS, ca, clientCert, clientKey); got != "first" {
		t.Fatalf("served certificate %q, want first", got)
	}
	ca.WritePair(t, certs, "tls", "second", "localhost", "127.0.0.1")
	waitWithin(t, 10*time.Second, "the replaced certificate", func() bool {
		return serverName(t, g.RLS, ca, clientCert, clientKey) == "second"
	})
	if resp, err := ask(t, tlsClient(t, g.RLS, ca, clientCert, clientKey), "a"); err != nil || resp.Statuses[0].LimitRemaining != 3 {
		t.Errorf("after the rotation: %v, %v; want 3 remaining", resp, err)
	}
}

// xdsRule is domain d whose key k allows rpu a day: a test's steps
// never span the end of its window.
func xdsRule(rpu uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: "d", Domain: "d", Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_DAY, RequestsPerUnit: rpu}},
	}}
}

// TestRunRLSXDS: with TOLLGATE_RLS_XDS the rate limit service listens
// before its configuration arrives (SERVING, every call an error), takes
// each snapshot the xDS server sends over mutual TLS and acknowledges
// it, and refuses a broken one, keeping the limits in use.
func TestRunRLSXDS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t, "ca")
	certs := t.TempDir()
	caPath := ca.WriteCA(t, certs, "ca.crt")
	srvCert, srvKey := ca.WritePair(t, certs, "xds", "envoy-gateway", "localhost", "127.0.0.1")
	srvFiles, err := tlsfiles.Load(tlsfiles.Files{Cert: srvCert, Key: srvKey, CA: caPath}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	xds := xdstest.New("envoy-ratelimit", grpc.Creds(credentials.NewTLS(srvFiles.ServerConfig())))
	addr := xds.Start(t, "")
	clientCert, clientKey := ca.WritePair(t, certs, "client", "envoy")
	g := apptest.Start(t, "TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_RLS_ADDR=127.0.0.1:0",
		"TOLLGATE_RLS_XDS=localhost:"+addr[strings.LastIndexByte(addr, ':')+1:], "TOLLGATE_RLS_XDS_NODE_ID=envoy-ratelimit",
		"TOLLGATE_RLS_XDS_TLS_CA="+caPath, "TOLLGATE_RLS_XDS_TLS_CERT="+clientCert, "TOLLGATE_RLS_XDS_TLS_KEY="+clientKey)
	conn := rlsClient(t, g)
	c := pb.NewRateLimitServiceClient(conn)

	_, err = ask(t, c, "a")
	if s := status.Convert(err); s.Code() != codes.Unknown || s.Message() != "no rate limit configuration loaded" {
		t.Errorf("before the first snapshot: %v, want UNKNOWN no rate limit configuration loaded", err)
	}
	if h, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("health before the first snapshot: %v, %v; want SERVING", h, err)
	}

	xds.Set(t, "1", xdsRule(5))
	xds.WaitRequest(t, 30*time.Second, "ACK of 1", xdstest.IsACK("1"))
	if resp, err := ask(t, c, "a"); err != nil || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 || resp.Statuses[0].LimitRemaining != 4 {
		t.Fatalf("after version 1: %v, %v; want limit 5, 4 remaining", resp, err)
	}

	bad := xdsRule(9)
	bad.Descriptors = append(bad.Descriptors, &rlsconfv3.RateLimitDescriptor{Key: "k"})
	xds.Set(t, "2", bad)
	xds.WaitRequest(t, 30*time.Second, "NACK of 2", xdstest.IsNACK("1"))
	waitWithin(t, 10*time.Second, "the rejection's log line", func() bool {
		l := logtest.Lines(t, g.Logs(), "rate limit service configuration rejected; keeping the previous one")
		return len(l) == 1 && l[0]["xds"] != nil && strings.Contains(l[0]["err"].(string), "duplicate descriptor composite key")
	})
	if resp, err := ask(t, c, "a"); err != nil || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 5 || resp.Statuses[0].LimitRemaining != 3 {
		t.Errorf("after the broken version 2: %v, %v; want limit 5 (kept), 3 remaining", resp, err)
	}

	xds.Set(t, "3", xdsRule(7))
	xds.WaitRequest(t, 30*time.Second, "ACK of 3", xdstest.IsACK("3"))
	if resp, err := ask(t, c, "b"); err != nil || resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 7 {
		t.Errorf("after version 3: %v, %v; want limit 7", resp, err)
	}
}

// TestRunRLSTLSErrors: TLS and xDS settings that cannot work stop the
// start (exit 2), naming the variable.
func TestRunRLSTLSErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeAt(t, filepath.Join(dir, "rls.yaml"), rlsYAML("5"))
	ca := tlstest.NewCA(t, "ca")
	other := tlstest.NewCA(t, "other")
	cert, key := ca.WritePair(t, dir, "tls", "server", "localhost")
	_, otherKey := other.WritePair(t, dir, "other", "other", "localhost")
	notPEM := filepath.Join(dir, "rls.yaml")
	rls := []string{"TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_CONFIG=" + dir}
	xds := []string{"TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_XDS=127.0.0.1:18001"}
	for _, tc := range []struct {
		environ []string
		want    []string
	}{
		{append(rls, "TOLLGATE_RLS_TLS_CERT="+cert), []string{"TOLLGATE_RLS_TLS_CERT", "TOLLGATE_RLS_TLS_KEY"}},
		{append(rls, "TOLLGATE_RLS_TLS_CLIENT_CA="+ca.WriteCA(t, dir, "ca.crt")), []string{"TOLLGATE_RLS_TLS_CLIENT_CA"}},
		{append(rls, "TOLLGATE_RLS_TLS_CERT="+filepath.Join(dir, "none.crt"), "TOLLGATE_RLS_TLS_KEY="+key), []string{"TOLLGATE_RLS_TLS_CERT", "none.crt"}},
		{append(rls, "TOLLGATE_RLS_TLS_CERT="+cert, "TOLLGATE_RLS_TLS_KEY="+otherKey), []string{"TOLLGATE_RLS_TLS_CERT", cert, otherKey}},
		{append(rls, "TOLLGATE_RLS_TLS_CERT="+cert, "TOLLGATE_RLS_TLS_KEY="+key, "TOLLGATE_RLS_TLS_CLIENT_CA="+notPEM), []string{"TOLLGATE_RLS_TLS_CLIENT_CA", "no PEM certificate"}},
		{append(rls, "TOLLGATE_RLS_XDS=127.0.0.1:18001"), []string{"TOLLGATE_RLS_CONFIG", "TOLLGATE_RLS_XDS"}},
		{append(xds, "TOLLGATE_RLS_XDS=nowhere"), []string{"TOLLGATE_RLS_XDS", "nowhere"}},
		{append(xds, "TOLLGATE_RLS_XDS_TLS_CA="+notPEM), []string{"TOLLGATE_RLS_XDS_TLS_CA", "no PEM certificate"}},
		{append(xds, "TOLLGATE_RLS_XDS_TLS_KEY="+key), []string{"TOLLGATE_RLS_XDS_TLS_KEY"}},
	} {
		exitsTwo(t, []string{"tollgate"}, append(tc.environ, "TOLLGATE_LISTEN_ADDR=127.0.0.1:0", "TOLLGATE_ADMIN_ADDR=127.0.0.1:0"), tc.want...)
	}
}

// TestRunRLSXDSServerLate: started before its xDS server listens, the
// rate limit service serves (every call an error), retries, and decides
// once the server is up and has sent its configuration.
func TestRunRLSXDSServerLate(t *testing.T) {
	t.Parallel()
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	g := apptest.Start(t, "TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_RLS_ADDR=127.0.0.1:0", "TOLLGATE_RLS_XDS="+addr)
	c := pb.NewRateLimitServiceClient(rlsClient(t, g))
	waitWithin(t, 30*time.Second, "a retry logged", func() bool {
		return len(logtest.Lines(t, g.Logs(), "rate limit service: xDS stream ended; retrying")) > 0
	})
	if _, err := ask(t, c, "a"); status.Code(err) != codes.Unknown {
		t.Errorf("with no xDS server: %v, want UNKNOWN", err)
	}
	xds := xdstest.New("default") // TOLLGATE_RLS_XDS_NODE_ID's default
	xds.Set(t, "1", xdsRule(5))
	xds.Start(t, addr)
	waitWithin(t, 30*time.Second, "the configuration once the server is up", func() bool {
		resp, err := ask(t, c, "a")
		return err == nil && resp.Statuses[0].CurrentLimit.GetRequestsPerUnit() == 5
	})
}
