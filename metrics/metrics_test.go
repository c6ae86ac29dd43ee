package metrics_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/metrics/metricstest"
)

func slotsPolicy(t *testing.T) *domain.Policy {
	t.Helper()
	p, err := domain.NewPolicy([]domain.PolicyLimit{
		{Name: "inflight", Rule: domain.Rule{Limit: 5, Window: domain.ConcurrencyWindow}, Concurrency: true},
		{Name: "per-minute", Rule: domain.Rule{Limit: 60, Window: time.Minute}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestInFlight: tollgate_in_flight{limit} reads 0 for every concurrency
// limit of the policy before any request, and follows the slots held.
func TestInFlight(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, domain.AlgorithmFixedWindow)
	m.Routes(slotsPolicy(t))
	if got := metricstest.Series(t, reg, "tollgate_in_flight", "limit"); len(got) != 1 || got["inflight"] != 0 {
		t.Fatalf("tollgate_in_flight before any request: %v, want inflight at 0", got)
	}
	m.InFlight("inflight", 1)
	m.InFlight("inflight", 1)
	m.InFlight("inflight", -1)
	if got := metricstest.Series(t, reg, "tollgate_in_flight", "limit")["inflight"]; got != 1 {
		t.Errorf("tollgate_in_flight{limit=inflight} = %v, want 1", got)
	}
	(*metrics.Metrics)(nil).InFlight("inflight", 1) // a nil Metrics records nothing
}

// TestLimitDecisionsWithoutSlots: a decision that left the route's
// concurrency limits out (the check endpoint) counts its decisions under
// the limits they are, not under the concurrency limit before them.
func TestLimitDecisionsWithoutSlots(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, domain.AlgorithmFixedWindow)
	p := slotsPolicy(t)
	route := p.Routes()[0]
	m.Decided(route, domain.Verdict{Decisions: []domain.Decision{{Allowed: false}}, Outcome: domain.OutcomeDenied}, time.Millisecond)
	m.Decided(route, domain.Verdict{Allowed: true, Decisions: []domain.Decision{{Allowed: true}, {Allowed: true}}}, time.Millisecond)
	want := map[[2]string]float64{
		{"inflight", "allowed"}: 1, {"inflight", "denied"}: 0,
		{"per-minute", "allowed"}: 1, {"per-minute", "denied"}: 1,
	}
	g, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range g {
		if f.GetName() != "tollgate_limit_decisions_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			k := [2]string{labels["limit"], labels["outcome"]}
			if w, ok := want[k]; ok && s.GetCounter().GetValue() != w {
				t.Errorf("tollgate_limit_decisions_total%v = %v, want %v", k, s.GetCounter().GetValue(), w)
			}
		}
	}
}

// TestRLSLabelsNotUTF8: a rule label that is not UTF-8 counts under the
// label with its bad bytes replaced, and does not panic. A configuration
// can hold one (a value written as !!binary), and a valid request can
// match it (a pattern "k_\xc3*" that "k_é" begins with), so it would
// otherwise stop the process at the first such request.
func TestRLSLabelsNotUTF8(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, domain.AlgorithmFixedWindow)
	m.RLSDescriptor("d", "d.k_\xc3*", "ok")
	m.RLSDescriptor("d", "d.k_\xc3*", "ok")
	m.RLSRequest("d\xff", "OK")
	if got := metricstest.Series(t, reg, "tollgate_rls_descriptors_total", "rule")["d.k_\uFFFD*"]; got != 2 {
		t.Errorf("tollgate_rls_descriptors_total{rule=%q} = %v, want 2", "d.k_\uFFFD*", got)
	}
	if got := metricstest.Series(t, reg, "tollgate_rls_requests_total", "domain")["d\uFFFD"]; got != 1 {
		t.Errorf("tollgate_rls_requests_total{domain=%q} = %v, want 1", "d\uFFFD", got)
	}
}
