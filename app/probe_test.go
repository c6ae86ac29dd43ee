package app_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
)

// metricOf returns the value of the sample named series (name and
// labels, as /metrics writes them) on g, or -1 when it is absent.
func metricOf(t *testing.T, g *apptest.Gateway, series string) float64 {
	t.Helper()
	for _, line := range strings.Split(g.Metrics(t), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return -1
}

// TestProbeFailuresAreNotDecisions: with the store down and no traffic,
// the open breaker's probes fail every 50 ms; they are no decision, so
// they neither log "failing open: admitting" nor count as store errors.
// They are logged as probe failures (at most one line a second) and
// counted apart.
func TestProbeFailuresAreNotDecisions(t *testing.T) {
	t.Parallel()
	// Nothing listens on port 1: every store call fails at once.
	g := apptest.Start(t, "TOLLGATE_STORE=redis", "TOLLGATE_REDIS_URL=redis://127.0.0.1:1/0", "TOLLGATE_FAIL_MODE=open", "TOLLGATE_REDIS_TIMEOUT=20ms")
	for deadline := time.Now().Add(10 * time.Second); metricOf(t, g, "tollgate_store_up") != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the breaker did not open within 10 s of failing requests")
		}
		resp, _ := get(t, g.Public+"/", "X-Tenant-ID", "acme")
		if resp.StatusCode != 200 {
			t.Fatalf("store down, fail mode open: %d, want 200", resp.StatusCode)
		}
	}
	const decisionLine = "rate-limit store error; failing open: admitting"
	lines, errs := strings.Count(g.Logs(), decisionLine), metricOf(t, g, "tollgate_store_errors_total")
	time.Sleep(2500 * time.Millisecond) // no traffic: only the probes, every 50 ms
	if got := strings.Count(g.Logs(), decisionLine); got != lines {
		t.Errorf("%d more %q lines in 2.5 s without a request, want none (probes are no decision)", got-lines, decisionLine)
	}
	if got := metricOf(t, g, "tollgate_store_errors_total"); got != errs {
		t.Errorf("tollgate_store_errors_total went from %v to %v in 2.5 s without a request, want unchanged", errs, got)
	}
	if got := metricOf(t, g, "tollgate_store_probe_failures_total"); got < 10 {
		t.Errorf("tollgate_store_probe_failures_total = %v after 2.5 s of probes every 50 ms, want at least 10", got)
	}
	if n := strings.Count(g.Logs(), "rate-limit store probe failed"); n < 1 || n > 4 {
		t.Errorf("%d probe-failure lines in about 2.5 s, want 1 to 4 (at most one a second):\n%s", n, g.Logs())
	}
}
