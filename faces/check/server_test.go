package check_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/metrics/metricstest"
)

// TestCheckNeverWaitsForTheBody: a check request announcing a body it
// does not send is answered at once, allowed or denied, and its
// connection closed, instead of net/http draining (waiting for) the body
// before the answer.
func TestCheckNeverWaitsForTheBody(t *testing.T) {
	t.Parallel()
	h, _, _ := newCheck(t, setup{})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	// items allows 10 per minute: ten 200s, then 429s.
	for i, want := range []int{200, 429} {
		if i == 1 {
			for range 10 {
				send(t, srv.Listener.Addr().String(), "")
			}
		}
		resp := send(t, srv.Listener.Addr().String(), "Content-Length: 100\r\n")
		if resp.StatusCode != want || !resp.Close {
			t.Errorf("with a body never sent: %d (Connection: close %v), want %d and the connection closed", resp.StatusCode, resp.Close, want)
		}
	}
}

// send writes one check request for GET /v1/items as acme, with extra
// header lines, over a fresh connection (and 10 bytes of body when it
// announces one), and reads the answer within 2 s.
func send(t *testing.T, addr, extra string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	req := "POST /check HTTP/1.1\r\nHost: tollgate\r\nX-Tenant-ID: acme\r\nX-Forwarded-Method: GET\r\nX-Forwarded-Uri: /v1/items\r\n" + extra + "\r\n"
	if extra != "" {
		req += "0123456789"
	}
	if _, err := fmt.Fprint(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer within 2 s: %v", err)
	}
	resp.Body.Close()
	return resp
}

// TestCheckMetrics: answers count by route and status, 400s on the
// route default, as on the proxy listener.
func TestCheckMetrics(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, "fixed_window")
	h, _, _ := newCheck(t, setup{metrics: m, denyStatus: 403})
	for range 3 {
		ask(h, "X-Tenant-ID", "acme", "X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/v1/search")
	}
	ask(h, "X-Forwarded-Uri", "/../x")
	ask(h, "X-Forwarded-Uri", "/status")
	got := metricstest.Series(t, reg, "tollgate_requests_total", "route", "code")
	for series, want := range map[string]float64{
		"search 200": 2, "search 403": 1, "default 400": 1, "status 200": 1,
	} {
		if got[series] != want {
			t.Errorf("tollgate_requests_total{%s} = %v, want %v (all: %v)", series, got[series], want, got)
		}
	}
}
