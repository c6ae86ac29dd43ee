package metrics

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/domain"
)

// TestRoutesForgetsTheLastPolicy: each reload's policy has routes of its
// own; the series cache holds the current policy's only (it held every
// policy ever loaded, for the life of the process), and a request still
// on a route of the last one counts on the same series.
func TestRoutesForgetsTheLastPolicy(t *testing.T) {
	t.Parallel()
	m := New(prometheus.NewRegistry(), domain.AlgorithmFixedWindow)
	limit := domain.PolicyLimit{Name: "per-minute", Rule: domain.Rule{Limit: 10, Window: time.Minute}}
	var old *domain.Route
	for i := range 10 {
		p, err := domain.NewPolicy([]domain.PolicyLimit{limit}, []domain.Route{{Name: "search", Path: "/search", Cost: 1}})
		if err != nil {
			t.Fatal(err)
		}
		m.Routes(p)
		if i == 8 {
			old = p.Routes()[0]
		}
	}
	if n := size(m.routes.Load()); n != 2 {
		t.Errorf("after 10 policies of 2 routes: %d routes cached, want 2", n)
	}
	if a, b := m.route(old), m.route(old); a != b || a.limits[0][0] != m.limitDecisions.WithLabelValues(old.Name, "per-minute", limitOutcomeLabels[0]) {
		t.Error("a route of the last policy does not count on its series")
	}
}

func size(m *sync.Map) int {
	n := 0
	m.Range(func(any, any) bool { n++; return true })
	return n
}
