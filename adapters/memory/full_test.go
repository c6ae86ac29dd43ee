package memory_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
	"github.com/tollgate/tollgate/ports/portstest"
)

// family is a key's family in these tests: what comes before its '=',
// as a descriptor's key before its value; a key without one has none.
func family(key string) string {
	f, _, ok := strings.Cut(key, "=")
	if !ok {
		return ""
	}
	return f
}

// TestFullStoreFamilies: the values of one family (an Envoy descriptor
// flooded with values) fill at most half the store, so that another
// family, and a tenant with no family, still get keys; and once the
// flood's budgets are whole again (an hour, with no sweeper running), a
// new value of the flooded family is admitted, its idle keys reclaimed
// on demand.
func TestFullStoreFamilies(t *testing.T) {
	t.Parallel()
	for _, a := range algorithms {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			clk := portstest.NewFakeClock(t0)
			l := a.new(memory.Options{Now: clk.Now, SweepInterval: -1, MaxKeys: 8, Family: family})
			defer l.Close()
			hour := domain.Rule{Limit: 5, Window: time.Hour}
			ctx := context.Background()
			admitted := 0
			for i := range 20 {
				_, err := l.Allow(ctx, one("rls:user="+strconv.Itoa(i), hour), nil)
				switch {
				case err == nil:
					admitted++
				case !errors.Is(err, ports.ErrStoreFull):
					t.Fatalf("value %d: %v", i, err)
				}
			}
			if got, want := admitted, 4; got != want {
				t.Errorf("values of one family given keys = %d, want %d (half of 8)", got, want)
			}
			if d := portstest.MustDecide(t, l, one("rls:path=/login", hour)); !d.Allowed {
				t.Errorf("another family with one family at its share: %+v, want allowed", d)
			}
			if d := portstest.MustDecide(t, l, one("rl:{acme}", hour)); !d.Allowed {
				t.Errorf("a key of no family with one family at its share: %+v, want allowed", d)
			}
			if _, err := l.Allow(ctx, one("rls:user=legit", hour), nil); !errors.Is(err, ports.ErrStoreFull) {
				t.Errorf("a new value of the flooded family within the hour: err %v, want ErrStoreFull", err)
			}
			// Two windows: a sliding window's count weighs on the next.
			clk.Advance(2*time.Hour + time.Second)
			if d := portstest.MustDecide(t, l, one("rls:user=legit", hour)); !d.Allowed {
				t.Errorf("a new value of the flooded family once its keys are idle: %+v, want allowed", d)
			}
			if got, want := l.Len(), 1; got != want {
				t.Errorf("Len after the reclaim = %d, want %d (every idle key dropped, legit's added)", got, want)
			}
		})
	}
}

// TestFullStoreReclaimsOncePerSecond: a full store sweeps on demand at
// most once a second, so that a flood of new keys cannot make every
// request scan the map: keys idle since the last reclaim wait for the
// next.
func TestFullStoreReclaimsOncePerSecond(t *testing.T) {
	t.Parallel()
	clk := portstest.NewFakeClock(t0)
	l, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{Now: clk.Now, SweepInterval: -1, MaxKeys: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hour := domain.Rule{Limit: 5, Window: time.Hour}
	portstest.MustDecide(t, l, one("rl:{a}", hour))
	portstest.MustDecide(t, l, one("rl:{b}", hour))
	for _, step := range []struct {
		at   time.Duration
		full bool
	}{
		{time.Hour - 100*time.Millisecond, true}, // nothing idle: a reclaim finds nothing
		{time.Hour + 100*time.Millisecond, true}, // idle, but within a second of that reclaim
		{time.Hour + 900*time.Millisecond, false},
	} {
		clk.Advance(t0.Add(step.at).Sub(clk.Now()))
		_, err := l.Allow(context.Background(), one("rl:{c}", hour), nil)
		if got := errors.Is(err, ports.ErrStoreFull); got != step.full {
			t.Errorf("a new key at t0+%v: err %v, want full %v", step.at, err, step.full)
		}
	}
}
