package proxy_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/faces/proxy"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/metrics/metricstest"
)

// TestProxyClientGoneIsNoAnswer: a client that hangs up while the
// upstream works gets no answer, so neither tollgate_requests_total nor
// the access log may call it a 200 (net/http's default status when
// nothing is written). It counts, and logs, as 499, nginx's "client
// closed request".
func TestProxyClientGoneIsNoAnswer(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{}, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	}))
	t.Cleanup(up.Close)
	target, err := url.Parse(up.URL)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "fixed_window")
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	gw := httptest.NewServer(proxy.New(proxy.Options{
		Engine:    newEngine(allowAll, defaultRule, nil),
		Upstream:  proxy.NewUpstream(target, proxy.UpstreamOptions{Log: log}),
		Describer: httpface.Describer{TenantHeader: "X-Gateway-Tenant"},
		Metrics:   m,
		AccessLog: true,
		Log:       log,
	}))
	t.Cleanup(gw.Close)

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gw.URL+"/x", nil)
	req.Header.Set("X-Gateway-Tenant", "acme")
	if resp, err := http.DefaultClient.Do(req); !errors.Is(err, context.Canceled) {
		if err == nil {
			resp.Body.Close()
		}
		t.Fatalf("the request: %v, want it canceled", err)
	}
	var lines []map[string]any
	for deadline := time.Now().Add(2 * time.Second); len(lines) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		lines = logs.Lines(t, "access")
	}
	if len(lines) != 1 || lines[0]["status"] != float64(httpface.StatusClientClosed) {
		t.Errorf("access lines %v, want one with status 499", lines)
	}
	got := metricstest.Series(t, reg, "tollgate_requests_total", "route", "code")
	if got["default 200"] != 0 || got["default 499"] != 1 {
		t.Errorf("tollgate_requests_total = %v, want default 499: 1 and no 200", got)
	}
}
