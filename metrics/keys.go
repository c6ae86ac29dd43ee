package metrics

import "github.com/prometheus/client_golang/prometheus"

// Keys are the series of the API keys issued at runtime, as one replica
// holds them: how many it holds, and its reads of the key store.
type Keys struct {
	held  prometheus.Gauge
	reads *prometheus.CounterVec // result
}

// NewKeys returns the key series, registered with reg.
func NewKeys(reg prometheus.Registerer) *Keys {
	k := &Keys{
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tollgate_api_keys",
			Help: "API keys issued at runtime that this replica holds (their SHA-256), live or in their grace.",
		}),
		reads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tollgate_api_key_reads_total",
			Help: "This replica's reads of the key store's changes, by result: ok, error. On Redis, runtime keys stop resolving a second after the start of the last read that was ok.",
		}, []string{"result"}),
	}
	k.reads.WithLabelValues("ok")
	k.reads.WithLabelValues("error")
	reg.MustRegister(k.held, k.reads)
	return k
}

// Read records a read of the key store that failed with err (nil: ok),
// after which the replica holds held keys.
func (k *Keys) Read(err error, held int) {
	if k == nil {
		return
	}
	result := "ok"
	if err != nil {
		result = "error"
	}
	k.reads.WithLabelValues(result).Inc()
	k.held.Set(float64(held))
}
