package memory

import (
	"reflect"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports/portstest"
)

// TestAllowOneIsAllowMany: the path of a request of one plain limit
// decides, spends and answers as the path of every request does, step by
// step, for every algorithm, counting mode, kind of windows, shadow and
// quota mode and a run of costs that admits, denies and checks.
func TestAllowOneIsAllowMany(t *testing.T) {
	t.Parallel()
	oneIsMany[domain.FixedWindow](t, domain.AlgorithmFixedWindow)
	oneIsMany[byRule[domain.SlidingLog, *domain.SlidingLog]](t, domain.AlgorithmSlidingLog)
	oneIsMany[byRule[domain.SlidingWindow, *domain.SlidingWindow]](t, domain.AlgorithmSlidingWindow)
	oneIsMany[byRule[domain.TokenBucket, *domain.TokenBucket]](t, domain.AlgorithmTokenBucket)
}

func oneIsMany[S any, P state[S]](t *testing.T, algorithm string) {
	t.Helper()
	t0 := time.Date(2026, 12, 7, 9, 0, 0, 300, time.UTC)
	costs := []int64{1, 0, 3, 1, 7, 2, 0, 1, 1, 4, 0, 2, 1, 9, 1, 1, 0, 3}
	for _, c := range []domain.Counting{domain.CountAdmitted, domain.CountHits, domain.CountEvery} {
		if !c.HonouredBy(algorithm) {
			continue
		}
		for _, w := range []domain.Windows{domain.WindowsFromFirst, domain.WindowsEpoch} {
			for _, mode := range []struct{ shadow, quota bool }{{}, {shadow: true}, {quota: true}, {true, true}} {
				clk := portstest.NewFakeClock(t0)
				opts := Options{Now: clk.Now, SweepInterval: -1, View: View{Counting: c, Windows: w}}
				one, many := newLimiter[S, P](opts), newLimiter[S, P](opts)
				lim := domain.Limit{Name: "l", Rule: domain.Rule{Limit: 5, Window: 10 * time.Second}, Key: "rl:k",
					Shadow: mode.shadow, Quota: mode.quota}
				for step, cost := range costs {
					lim.Cost = cost
					req := domain.Request{Tenant: "acme", Route: "r", Limits: []domain.Limit{lim}}
					got, err := one.allowOne(&req, nil)
					if err != nil {
						t.Fatal(err)
					}
					want, err := many.allowMany(&req, nil)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Errorf("%s, counting %v, windows %v, %+v, step %d (cost %d): allowOne = %+v, allowMany = %+v",
							algorithm, c, w, mode, step, cost, got, want)
					}
					clk.Advance(1700 * time.Millisecond)
				}
				one.Close()
				many.Close()
			}
		}
	}
}
