package app_test

import (
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
)

// BenchmarkGatewayDeniedTop measures denied requests/s through the whole
// gateway (HTTP, tenant, decision, 429) on the memory store without the
// top tenants (TOLLGATE_TOP_TENANTS=0) and with them (20), over 1000
// tenants all over their budget: every denial of a new tenant replaces
// a counter of the sketch, its most expensive case. The deny cache is
// off, so that each denial is a decision. The two gateways run side by
// side and take turns in fifteen short interleaved rounds; it reports
// each one's median denied/s and the ratio on/off.
func BenchmarkGatewayDeniedTop(b *testing.B) {
	configs := []struct{ name, top string }{{"off", "0"}, {"on", "20"}}
	gws := make([]*apptest.Gateway, len(configs))
	const tenants = 1000
	for i, c := range configs {
		gws[i] = apptest.Start(b, "TOLLGATE_LIMIT=1", "TOLLGATE_WINDOW=1h", "TOLLGATE_DENY_CACHE=false",
			"TOLLGATE_ADMIN_TOKEN="+adminToken, "TOLLGATE_TOP_TENANTS="+c.top)
		for t := range tenants {
			deniedGet(b, gws[i], t) // the budget
		}
	}
	const rounds, goroutines = 15, 32
	per := max(b.N/(rounds*len(configs)), 256)
	rates := make([][]float64, len(configs))
	var notDenied atomic.Int64
	b.ResetTimer()
	for round := range rounds {
		for k := range gws {
			i := (round + k) % len(gws)
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for range goroutines {
				wg.Go(func() {
					for n := next.Add(1); n <= int64(per); n = next.Add(1) {
						if deniedGet(b, gws[i], int(n)%tenants) != http.StatusTooManyRequests {
							notDenied.Add(1)
						}
					}
				})
			}
			wg.Wait()
			rates[i] = append(rates[i], float64(per)/time.Since(start).Seconds())
		}
	}
	b.StopTimer()
	median := func(xs []float64) float64 { return slices.Sorted(slices.Values(xs))[len(xs)/2] }
	for i, c := range configs {
		b.ReportMetric(median(rates[i]), c.name+"-denied/s")
	}
	b.ReportMetric(median(rates[1])/median(rates[0]), "on/off")
	b.ReportMetric(float64(notDenied.Load()), "not-429")
}

var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

func deniedGet(b *testing.B, g *apptest.Gateway, tenant int) int {
	req, _ := http.NewRequest(http.MethodGet, g.Public+"/", nil)
	req.Header.Set("X-Tenant-ID", "tenant-"+strconv.Itoa(tenant))
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
