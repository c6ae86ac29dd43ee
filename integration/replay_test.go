package integration

import (
	"fmt"
	"testing"
	"time"

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
			red := redisLimiter{algorithm: a.Name}.new(conn.NewClient(srv.Client), redis.Options{Timeout: 5 * time.Second})
			prefix := uniquePrefix(t)
			for i, step := range replaySteps(prefix, a.Name) {
				var got [2]domain.Verdict
				for k, l := range []ports.Limiter{mem, red} {
					v, err := l.Allow(t.Context(), step)
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
	return fmt.Sprintf("cost %d, %d limits, count denied %v", req.Cost, len(req.Limits), req.CountDenied)
}

// replaySteps is the sequence: a tenant with four limits (one in shadow
// mode, one a daily calendar quota) spends costs of 1 to 4 until the
// small limit denies, then a second tenant counts its denials on one
// limit.
func replaySteps(prefix, algorithm string) []domain.Request {
	limit := func(tenant domain.TenantID, name string, n int64, shadow bool) domain.Limit {
		return domain.Limit{Name: name, Rule: domain.Rule{Limit: n, Window: time.Hour},
			Key: domain.Key(prefix, tenant, algorithm, "", name), Shadow: shadow}
	}
	var steps []domain.Request
	day := domain.Calendar{Unit: domain.PeriodDay}
	daily := domain.Limit{Name: "daily", Rule: domain.Rule{Limit: 30, Window: domain.NominalWindow(day.Unit)},
		Key: domain.Key(prefix, "a", domain.AlgorithmFixedWindow, "", "daily"), Calendar: &day}
	three := []domain.Limit{limit("a", "small", 7, false), limit("a", "big", 20, false), limit("a", "dry", 5, true), daily}
	for _, cost := range []int64{1, 2, 1, 3, 4, 1, 2, 1, 1, 3, 1} {
		steps = append(steps, domain.Request{Tenant: "a", Route: "default", Cost: cost, Limits: three})
	}
	// Big alone: what the denials above left it.
	steps = append(steps, domain.Request{Tenant: "a", Route: "default", Cost: 1, Limits: three[1:2]})
	counted := []domain.Limit{limit("b", "default", 3, false)}
	for range 6 {
		steps = append(steps, domain.Request{Tenant: "b", Route: "default", Cost: 1, Limits: counted, CountDenied: true})
	}
	return steps
}
