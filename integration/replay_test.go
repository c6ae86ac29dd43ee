package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// TestReplayMemoryAndRedis replays one sequence of requests (costs,
// several limits, a shadow limit, counted denials) through the memory
// store and through Redis, for every algorithm, and compares the
// verdicts: the same admissions, outcomes and remaining units, and
// times within what the two clocks drift apart during the run. The
// windows are hours, so nothing refills between steps. The two stores
// share no code but the domain's table: this is what says they agree.
func TestReplayMemoryAndRedis(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	for _, a := range domain.Algorithms {
		t.Run(a.Name, func(t *testing.T) {
			t.Parallel()
			mem, err := memory.New(a.Name, memory.Options{SweepInterval: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer mem.Close()
			red := redisLimiter{algorithm: a.Name}.new(conn.NewClient(srv.Client, testConn), redis.Options{Timeout: 5 * time.Second})
			// Counting denials where the algorithm can (the fixed window's
			// one limit without a policy file), as the gateway builds it.
			memCounting, redCounting := ports.Limiter(mem), red
			if a.Name == domain.AlgorithmFixedWindow {
				every, err := mem.View(memory.View{Counting: domain.CountEvery})
				if err != nil {
					t.Fatal(err)
				}
				memCounting = every
				redCounting = redisLimiter{algorithm: a.Name}.new(conn.NewClient(srv.Client, testConn), redis.Options{Timeout: 5 * time.Second, Counting: domain.CountEvery})
			}
			prefix := uniquePrefix(t)
			for i, rs := range replaySteps(prefix, a.Name) {
				step := rs.req
				var got [2]domain.Verdict
				lims := []ports.Limiter{mem, red}
				if rs.countDenied {
					lims = []ports.Limiter{memCounting, redCounting}
				}
				for k, l := range lims {
					v, err := l.Allow(t.Context(), step, nil)
					if err != nil {
						t.Fatalf("step %d on store %d: %v", i, k, err)
					}
					got[k] = v
				}
				m, r := got[0], got[1]
				if m.Allowed != r.Allowed || m.Outcome != r.Outcome || len(m.Decisions) != len(r.Decisions) {
					t.Fatalf("step %d (%s): memory %+v, redis %+v", i, describe(step), m, r)
				}
				for j := range m.Decisions {
					md, rd := m.Decisions[j], r.Decisions[j]
					if md.Allowed != rd.Allowed || md.Remaining != rd.Remaining || md.Limit != rd.Limit || md.Shadow != rd.Shadow || md.Window != rd.Window ||
						!near(md.ResetAfter, rd.ResetAfter) || !near(md.RetryAfter, rd.RetryAfter) {
						t.Errorf("step %d (%s), limit %s: memory %+v, redis %+v", i, describe(step), step.Limits[j].Name, md, rd)
					}
				}
			}
		})
	}
}

// near reports whether two times agree within the drift of one replay.
func near(a, b time.Duration) bool {
	d := a - b
	return d < 2*time.Second && d > -2*time.Second
}

func describe(req domain.Request) string {
	return fmt.Sprintf("cost %d, %d limits", req.Limits[0].Cost, len(req.Limits))
}

// replaySteps is the sequence: a tenant with four limits (one in shadow
// mode, one a daily calendar quota) spends costs of 1 to 4 until the
// small limit denies, then a second tenant counts its denials on one
// limit.
func replaySteps(prefix, algorithm string) []replayStep {
	limit := func(tenant domain.TenantID, name string, n int64, shadow bool) domain.Limit {
		return domain.Limit{Name: name, Rule: domain.Rule{Limit: n, Window: time.Hour},
			Key: keys.Key(prefix, tenant, algorithm, "", name), Shadow: shadow}
	}
	var steps []replayStep
	day := domain.Calendar{Unit: domain.PeriodDay}
	daily := domain.Limit{Name: "daily", Rule: domain.Rule{Limit: 30, Window: domain.NominalWindow(day.Unit)},
		Key: keys.Key(prefix, "a", domain.AlgorithmFixedWindow, "", "daily"), Calendar: &day}
	three := []domain.Limit{limit("a", "small", 7, false), limit("a", "big", 20, false), limit("a", "dry", 5, true), daily}
	for _, cost := range []int64{1, 2, 1, 3, 4, 1, 2, 1, 1, 3, 1} {
		steps = append(steps, replayStep{req: domain.Request{Tenant: "a", Route: "default", Limits: costing(three, cost)}})
	}
	// Big alone: what the denials above left it.
	steps = append(steps, replayStep{req: domain.Request{Tenant: "a", Route: "default", Limits: costing(three[1:2], 1)}})
	counted := []domain.Limit{limit("b", "default", 3, false)}
	for range 6 {
		steps = append(steps, replayStep{req: domain.Request{Tenant: "b", Route: "default", Limits: costing(counted, 1)}, countDenied: true})
	}
	return steps
}

// replayStep is one request of a replay, and whether the limiter that
// decides it counts denials (where its algorithm can).
type replayStep struct {
	req         domain.Request
	countDenied bool
}

// costing returns a copy of limits, each spending cost.
func costing(limits []domain.Limit, cost int64) []domain.Limit {
	out := append([]domain.Limit(nil), limits...)
	for i := range out {
		out[i].Cost = cost
	}
	return out
}
