// Package metricstest reads tollgate's Prometheus series back, for tests.
package metricstest

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Series returns the series of the metric name in g (a counter's or a
// gauge's value), keyed by the values of labels, in that order, joined
// by one space: Series(t, reg, "tollgate_requests_total", "route",
// "code")["default 200"]. With no labels every series of the metric
// adds up under "". It fails t if g cannot be gathered.
func Series(t testing.TB, g prometheus.Gatherer, name string, labels ...string) map[string]float64 {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			key := make([]string, len(labels))
			for i, l := range labels {
				key[i] = have[l]
			}
			out[strings.Join(key, " ")] += s.GetCounter().GetValue() + s.GetGauge().GetValue()
		}
	}
	return out
}

// Value returns the metric name in g, every series added up. It fails t
// if g has no series of that name.
func Value(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	s := Series(t, g, name)
	v, ok := s[""]
	if !ok {
		t.Fatalf("no %s series", name)
	}
	return v
}
