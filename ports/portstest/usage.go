package portstest

import (
	"context"
	"testing"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// testUsage runs the [ports.Usage] contract against u, h's limiter: Peek
// reads every limit (a calendar quota included) without spending or
// writing a key, and Reset makes each budget whole and leaves no key.
// Its rules' windows are an hour, so that a real store's clock moves
// nothing between two steps; the tests never wait.
func testUsage(t *testing.T, h LimiterHarness, l ports.Limiter, u ports.Usage) {
	ctx := context.Background()
	rate := domain.Rule{Limit: 5, Window: time.Hour}
	quota := domain.Limit{Name: "monthly", Calendar: &domain.Calendar{Unit: domain.PeriodMonth}, Cost: 1,
		Rule: domain.Rule{Limit: 7, Window: domain.NominalWindow(domain.PeriodMonth)}}
	request := func(tenant domain.TenantID) domain.Request {
		req := h.Request(tenant, 1, NamedRule{Name: domain.DefaultLimit, Rule: rate})
		q := quota
		q.Key = h.Keys.Limit(tenant, "", q.Name, ports.KeyCalendar)
		req.Limits = append(req.Limits, q)
		return req
	}
	keys := func(tenant domain.TenantID) int {
		if h.TTLs == nil {
			return 0
		}
		return len(h.TTLs(t, KeyPrefix+"{"+string(tenant)+"}"))
	}
	peek := func(req domain.Request, want ...int64) domain.Verdict {
		t.Helper()
		v, err := u.Peek(ctx, req)
		if err != nil {
			t.Fatalf("Peek: %v", err)
		}
		if len(v.Decisions) != len(want) {
			t.Fatalf("Peek: %d decisions, want %d", len(v.Decisions), len(want))
		}
		for i, d := range v.Decisions {
			if d.Remaining != want[i] || d.Limit != req.Limits[i].Rule.Limit {
				t.Errorf("Peek, limit %q: %+v, want remaining %d of %d", req.Limits[i].Name, d, want[i], req.Limits[i].Rule.Limit)
			}
		}
		return v
	}

	t.Run("Peek reads without spending or writing", func(t *testing.T) {
		tenant := Tenant()
		req := request(tenant)
		peek(req, 5, 7)
		if n := keys(tenant); n != 0 {
			t.Errorf("Peek of a tenant never seen wrote %d keys", n)
		}
		for range 3 {
			MustAllow(t, l, req)
		}
		before := keys(tenant)
		for range 3 {
			v := peek(req, 2, 4)
			// A sliding window is whole again once the previous window's
			// weight is gone: up to two windows.
			if d := v.Decisions[0]; d.ResetAfter <= 0 || d.ResetAfter > 2*rate.Window {
				t.Errorf("Peek: ResetAfter %v, want in (0, %v]", d.ResetAfter, 2*rate.Window)
			}
		}
		if after := keys(tenant); after != before {
			t.Errorf("keys after Peek: %d, before: %d", after, before)
		}
		if d := MustDecide(t, l, h.Request(tenant, 1, NamedRule{Name: domain.DefaultLimit, Rule: rate})); d.Remaining != 1 {
			t.Errorf("a request after three peeks: %+v, want remaining 1", d)
		}
	})

	t.Run("Peek of a spent budget", func(t *testing.T) {
		tenant := Tenant()
		req := request(tenant)
		for range rate.Limit + 2 {
			MustAllow(t, l, req)
		}
		peek(req, 0, 2)
	})

	t.Run("Reset makes every budget whole", func(t *testing.T) {
		tenant := Tenant()
		req := request(tenant)
		for range 9 {
			MustAllow(t, l, req)
		}
		if err := u.Reset(ctx, req); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if n := keys(tenant); n != 0 {
			t.Errorf("%d keys left after Reset", n)
		}
		peek(req, 5, 7)
		if v := MustAllow(t, l, req); !v.Allowed || v.Decisions[0].Remaining != 4 || v.Decisions[1].Remaining != 6 {
			t.Errorf("first request after Reset: %+v, want allowed, remaining 4 and 6", v)
		}
	})

	t.Run("Reset of a tenant never seen creates nothing", func(t *testing.T) {
		tenant := Tenant()
		if err := u.Reset(ctx, request(tenant)); err != nil {
			t.Fatalf("Reset: %v", err)
		}
		if n := keys(tenant); n != 0 {
			t.Errorf("Reset of a tenant never seen wrote %d keys", n)
		}
	})
}
