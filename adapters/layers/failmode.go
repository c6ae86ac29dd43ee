// Package layers holds the layers around a decision ([ports.Layer]): the
// fail mode, and the deny cache, breaker and local fallback that build on
// it, with the replica count the local fallback divides limits by
// ([ReplicaCount]). A layer knows the port, never the store under it; the
// composition root stacks them in the order a request meets them.
package layers

import (
	"context"
	"errors"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// FailOpen returns the layer that admits a request whose decision failed
// (the store did not answer): a Verdict allowed, without decisions (so
// without rate-limit headers), with outcome [domain.OutcomeError].
// onError, if not nil, is told of every such failure; it must be cheap
// and safe for concurrent use (the gateway counts the error and logs at
// most one line a second).
func FailOpen(onError func(error)) ports.Layer {
	return failMode(true, onError)
}

// FailClosed is [FailOpen] for the closed fail mode: a failed decision
// denies, without decisions, as [domain.Verdict].Unavailable; the
// gateway answers 503.
func FailClosed(onError func(error)) ports.Layer {
	return failMode(false, onError)
}

func failMode(admit bool, onError func(error)) ports.Layer {
	return fallback(onError, func(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error) {
		return domain.Verdict{Allowed: admit, Outcome: domain.OutcomeError, Unavailable: !admit}, nil
	})
}

// fallback returns the layer that passes decisions through and, when one
// fails, tells onError (if not nil) and answers with decide's verdict.
// A caller gone mid-decision gets the error back: nobody reads an
// answer, and it is no store error. So does a request a full store
// refused ([ports.ErrStoreFull]): the store answered, and the engine
// decides it again as the unknown tenant. decide's own error is returned
// as it is (the local fail mode's full memory: [ports.ErrStoreFull]).
func fallback(onError func(error), decide func(context.Context, domain.Request, []domain.Decision) (domain.Verdict, error)) ports.Layer {
	return func(next ports.Limiter) ports.Limiter {
		return ports.LimiterFunc(func(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
			v, err := next.Allow(ctx, req, dst)
			if err == nil {
				return v, nil
			}
			if ctx.Err() != nil || errors.Is(err, ports.ErrStoreFull) {
				return domain.Verdict{}, err
			}
			if onError != nil {
				onError(err)
			}
			return decide(ctx, req, dst)
		})
	}
}
