package metricstest_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/metrics/metricstest"
)

// TestSeries: series are keyed by the asked labels in order; without
// labels they add up; gauges read like counters.
func TestSeries(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total"}, []string{"route", "code"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g"})
	reg.MustRegister(c, g)
	c.WithLabelValues("default", "200").Add(3)
	c.WithLabelValues("default", "429").Add(1)
	c.WithLabelValues("export", "200").Add(2)
	g.Set(7)

	got := metricstest.Series(t, reg, "c_total", "code", "route")
	want := map[string]float64{"200 default": 3, "429 default": 1, "200 export": 2}
	if len(got) != len(want) {
		t.Fatalf("Series = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Series[%q] = %v, want %v", k, got[k], v)
		}
	}
	if v := metricstest.Value(t, reg, "c_total"); v != 6 {
		t.Errorf("Value(c_total) = %v, want 6", v)
	}
	if v := metricstest.Value(t, reg, "g"); v != 7 {
		t.Errorf("Value(g) = %v, want 7", v)
	}
	if s := metricstest.Series(t, reg, "absent"); len(s) != 0 {
		t.Errorf("Series(absent) = %v, want none", s)
	}
}
