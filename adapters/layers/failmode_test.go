package layers_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var errStore = errors.New("store down")

func request() domain.Request {
	return domain.Request{Tenant: "acme", Route: "default",
		Limits: []domain.Limit{{Name: "default", Rule: domain.Rule{Limit: 1, Window: time.Minute}, Key: "rl:{acme}", Cost: 1}}}
}

func failing(err error) ports.Limiter {
	return ports.LimiterFunc(func(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) {
		return domain.Verdict{}, err
	})
}

func TestFailModes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		layer func(func(error)) ports.Layer
		admit bool
	}{
		{"open", layers.FailOpen, true},
		{"closed", layers.FailClosed, false},
	} {
		var seen []error
		l := ports.Chain(failing(errStore), tt.layer(func(err error) { seen = append(seen, err) }))
		v, err := l.Allow(t.Context(), request(), nil)
		if err != nil || v.Allowed != tt.admit || v.Unavailable == tt.admit || v.Outcome != domain.OutcomeError || v.Decisions != nil {
			t.Errorf("%s: %+v, %v; want allowed=%v, unavailable=%v, outcome error, no decisions", tt.name, v, err, tt.admit, !tt.admit)
		}
		if len(seen) != 1 || !errors.Is(seen[0], errStore) {
			t.Errorf("%s: onError saw %v, want the store error once", tt.name, seen)
		}
		// A caller gone mid-decision is no store error.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := l.Allow(ctx, request(), nil); err == nil || len(seen) != 1 {
			t.Errorf("%s: canceled caller: err %v, onError calls %d; want the error back and no call", tt.name, err, len(seen))
		}
		// A decision passes through untouched.
		want := domain.Verdict{Allowed: false, Outcome: domain.OutcomeDenied, Decisions: []domain.Decision{{Limit: 1}}}
		ok := ports.Chain(ports.LimiterFunc(func(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) { return want, nil }), tt.layer(nil))
		if v, err := ok.Allow(t.Context(), request(), nil); err != nil || v.Outcome != want.Outcome || len(v.Decisions) != 1 {
			t.Errorf("%s: a store decision came back as %+v, %v", tt.name, v, err)
		}
	}
}
