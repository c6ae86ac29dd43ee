package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// leaseMetrics are the series of the leases of hot keys: slices taken
// from the store and given back, requests decided from them, and the
// store operations that saved.
type leaseMetrics struct {
	slices   prometheus.Counter
	taken    prometheus.Counter
	returned prometheus.Counter
	decided  prometheus.Counter
	ops      prometheus.Counter
	// saved is decisions from leases less the operations they cost.
	decisions, operations atomic.Int64
}

func newLeaseMetrics() *leaseMetrics {
	l := &leaseMetrics{
		slices: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_lease_slices_total",
			Help: "Slices of hot keys' budgets this replica took from the store.",
		}),
		taken: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_lease_units_taken_total",
			Help: "Units of budget taken from the store in slices (counted there as spent at once).",
		}),
		returned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_lease_units_returned_total",
			Help: "Units of slices given back to the store unused, into the window they were taken in.",
		}),
		decided: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_lease_decisions_total",
			Help: "Requests decided from slices in memory, without the store.",
		}),
		ops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tollgate_lease_store_operations_total",
			Help: "Store operations the slices cost: their takes and their returns.",
		}),
	}
	return l
}

func (l *leaseMetrics) collectors() []prometheus.Collector {
	saved := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tollgate_lease_store_operations_saved",
		Help: "Store operations the leases saved since the start: requests decided from slices less the operations the slices cost.",
	}, func() float64 { return float64(l.decisions.Load() - l.operations.Load()) })
	return []prometheus.Collector{l.slices, l.taken, l.returned, l.decided, l.ops, saved}
}

// LeaseTaken counts a slice of units taken from the store. It
// implements layers.LeaseObserver.
func (m *Metrics) LeaseTaken(units int64) {
	if m == nil {
		return
	}
	m.leases.slices.Inc()
	m.leases.taken.Add(float64(units))
	m.leases.ops.Inc()
	m.leases.operations.Add(1)
}

// LeaseReturned counts a slice's return, one store operation, which
// gave back units.
func (m *Metrics) LeaseReturned(units int64) {
	if m == nil {
		return
	}
	m.leases.returned.Add(float64(units))
	m.leases.ops.Inc()
	m.leases.operations.Add(1)
}

// LeaseDecided counts a request decided from slices.
func (m *Metrics) LeaseDecided() {
	if m == nil {
		return
	}
	m.leases.decided.Inc()
	m.leases.decisions.Add(1)
}
