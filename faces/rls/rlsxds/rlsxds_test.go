package rlsxds_test

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
	"github.com/tollgate/tollgate/faces/rls/rlsxds"
	"github.com/tollgate/tollgate/faces/rls/rlsxds/xdstest"
	"github.com/tollgate/tollgate/internal/freeport"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/internal/tlsfiles"
	"github.com/tollgate/tollgate/internal/tlsfiles/tlstest"
)

// wait bounds every wait for something the client does at once: it ends
// as soon as the thing happens, and only a hung test reaches it.
const wait = 30 * time.Second

// domain is a configuration of one domain, d, whose key k allows rpu a
// minute.
func domain(name string, rpu uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: name, Domain: name, Descriptors: []*rlsconfv3.RateLimitDescriptor{
		{Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: rpu}},
	}}
}

// broken is a configuration envoyproxy/ratelimit refuses: key k twice.
func broken(name string) *rlsconfv3.RateLimitConfig {
	c := domain(name, 1)
	c.Descriptors = append(c.Descriptors, &rlsconfv3.RateLimitDescriptor{Key: "k"})
	return c
}

// client runs the subscription in the background and records what it
// is given.
type client struct {
	mu       sync.Mutex // guards applied, rejected
	applied  []*rlsconf.Config
	rejected []error
	changed  chan struct{}
	log      logtest.Buffer
}

func run(t *testing.T, o rlsxds.Options) *client {
	t.Helper()
	c := &client{changed: make(chan struct{}, 100)}
	o.Apply = func(cfg *rlsconf.Config) {
		c.mu.Lock()
		c.applied = append(c.applied, cfg)
		c.mu.Unlock()
		c.changed <- struct{}{}
	}
	o.Reject = func(err error) {
		c.mu.Lock()
		c.rejected = append(c.rejected, err)
		c.mu.Unlock()
		c.changed <- struct{}{}
	}
	if o.NodeID == "" {
		o.NodeID = "envoy-ratelimit"
	}
	if o.MinBackoff == 0 {
		o.MinBackoff, o.MaxBackoff = 10*time.Millisecond, 100*time.Millisecond
	}
	o.Log = slog.New(slog.NewJSONHandler(&c.log, nil))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rlsxds.Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	return c
}

// waitFor waits until ok holds of what c was given.
func (c *client) waitFor(t *testing.T, what string, ok func(applied []*rlsconf.Config, rejected []error) bool) {
	t.Helper()
	deadline := time.After(wait)
	for {
		c.mu.Lock()
		done := ok(c.applied, c.rejected)
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.changed:
		case <-deadline:
			t.Fatalf("%s: not after %s; log: %s", what, wait, c.log.String())
		}
	}
}

// limitOf returns the requests per unit of d's key k in cfg, or -1.
func limitOf(cfg *rlsconf.Config, d string) int {
	r, _ := cfg.Match(d, []rlsconf.Entry{{Key: "k", Value: "x"}})
	if r == nil {
		return -1
	}
	return int(r.RequestsPerUnit)
}

// TestSubscription: snapshots apply and are ACKed; a broken one is
// NACKed with its reason, keeping the version applied, and not applied;
// the next good one applies.
func TestSubscription(t *testing.T) {
	t.Parallel()
	srv := xdstest.New("envoy-ratelimit")
	addr := srv.Start(t, "")
	srv.Set(t, "1", domain("a", 5), domain("b", 7))
	c := run(t, rlsxds.Options{Addr: addr})

	srv.WaitRequest(t, wait, "ACK of 1", xdstest.IsACK("1"))
	if first := srv.Requests()[0]; first.GetNode().GetId() != "envoy-ratelimit" || first.GetTypeUrl() != rlsxds.TypeURL || first.GetVersionInfo() != "" {
		t.Errorf("first request %v, want node envoy-ratelimit, type %s, no version", first, rlsxds.TypeURL)
	}
	c.waitFor(t, "version 1 applied", func(a []*rlsconf.Config, _ []error) bool {
		return len(a) == 1 && limitOf(a[0], "a") == 5 && limitOf(a[0], "b") == 7
	})

	srv.Set(t, "2", broken("a"), domain("b", 9))
	nack := srv.WaitRequest(t, wait, "NACK of 2", xdstest.IsNACK("1"))
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, "a: duplicate descriptor composite key") {
		t.Errorf("NACK's message %q, want the reason naming resource a", msg)
	}
	c.waitFor(t, "version 2 rejected", func(_ []*rlsconf.Config, r []error) bool { return len(r) == 1 })

	srv.Set(t, "3", domain("a", 11))
	srv.WaitRequest(t, wait, "ACK of 3", xdstest.IsACK("3"))
	c.waitFor(t, "version 3 applied", func(a []*rlsconf.Config, _ []error) bool {
		return len(a) == 2 && limitOf(a[1], "a") == 11 && limitOf(a[1], "b") == -1
	})
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.rejected) != 1 {
		t.Errorf("%d rejections (%v), want 1: a refused version is reported once however often the server sends it again", len(c.rejected), c.rejected)
	}
	for _, r := range srv.Requests() {
		if r.GetVersionInfo() == "2" {
			t.Errorf("request %v acknowledges the refused version 2", r)
		}
	}
}

// TestServerDownThenUp: the client retries until the server listens,
// then applies its snapshot; after the server goes away and comes back
// it subscribes again from the version it holds.
func TestServerDownThenUp(t *testing.T) {
	t.Parallel()
	port, err := freeport.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	c := run(t, rlsxds.Options{Addr: addr})
	// Two failed attempts: the client is retrying.
	deadline := time.Now().Add(wait)
	for len(c.log.Lines(t, "rate limit service: xDS stream ended; retrying")) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no retries logged: %s", c.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	srv := xdstest.New("envoy-ratelimit")
	srv.Set(t, "1", domain("a", 5))
	srv.Start(t, addr)
	c.waitFor(t, "version 1 applied", func(a []*rlsconf.Config, _ []error) bool { return len(a) == 1 && limitOf(a[0], "a") == 5 })

	srv.Stop()
	again := xdstest.New("envoy-ratelimit")
	again.Set(t, "2", domain("a", 6))
	again.Start(t, addr)
	again.WaitRequest(t, wait, "a request with the version held", func(r *discovery.DiscoveryRequest) bool { return r.GetVersionInfo() == "1" })
	c.waitFor(t, "version 2 applied", func(a []*rlsconf.Config, _ []error) bool { return len(a) == 2 && limitOf(a[1], "a") == 6 })
}

// TestMutualTLS: with the server's CA and a client certificate the
// subscription works; without the certificate the server refuses it,
// and nothing is applied.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := tlstest.NewCA(t, "ca")
	caPath := ca.WriteCA(t, dir, "ca.crt")
	serverCert, serverKey := ca.WritePair(t, dir, "server", "envoy-gateway", "localhost", "127.0.0.1")
	serverFiles, err := tlsfiles.Load(tlsfiles.Files{Cert: serverCert, Key: serverKey, CA: caPath}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := xdstest.New("envoy-ratelimit", grpc.Creds(credentials.NewTLS(serverFiles.ServerConfig())))
	addr := srv.Start(t, "")
	srv.Set(t, "1", domain("a", 5))

	clientCert, clientKey := ca.WritePair(t, dir, "client", "envoy", "client")
	for _, tc := range []struct {
		name  string
		files tlsfiles.Files
		ok    bool
	}{
		{"CA and client certificate", tlsfiles.Files{Cert: clientCert, Key: clientKey, CA: caPath}, true},
		{"CA alone", tlsfiles.Files{CA: caPath}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files, err := tlsfiles.Load(tc.files, 0, nil)
			if err != nil {
				t.Fatal(err)
			}
			c := run(t, rlsxds.Options{Addr: addr, Creds: files.ClientCredentials("")})
			if tc.ok {
				c.waitFor(t, "version 1 applied", func(a []*rlsconf.Config, _ []error) bool { return len(a) == 1 })
				return
			}
			deadline := time.Now().Add(wait)
			for len(c.log.Lines(t, "rate limit service: xDS stream ended; retrying")) < 2 {
				if time.Now().After(deadline) {
					t.Fatalf("no refusals logged: %s", c.log.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			if len(c.applied) != 0 {
				t.Errorf("applied %d configurations without a client certificate", len(c.applied))
			}
		})
	}
}
