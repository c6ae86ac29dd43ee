package layers

import (
	"context"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// LocalOptions configure [FailLocal].
type LocalOptions struct {
	// Limiter decides in process while the store fails: the same
	// algorithm as the store's, in this replica's memory. Required.
	Limiter ports.Limiter
	// Replicas returns N, the number of replicas that share the store;
	// each replica's local budget is every limit divided by N, rounded
	// up. Nil, or a value below 1, means 1.
	Replicas func() int
	// OnError, if not nil, is told of every failed decision, as for
	// [FailOpen].
	OnError func(error)
}

// FailLocal returns the local fail mode: a request whose decision failed
// (the store did not answer, or its breaker is open) is decided by
// opts.Limiter with each limit divided by N (rounded up), so that N
// replicas together keep about the fleet's budget instead of none, or N
// times it. The verdict carries the local decisions (and so rate-limit
// headers that show the local budget), with outcome
// [domain.OutcomeLocalAllowed] or [domain.OutcomeLocalDenied]. Decisions
// return to the store as soon as it answers.
//
// A Reserve limit's local decision spends in the local limiter, which
// a settlement does not reach: the engine settles only what the store
// decided (outcomes allowed and shadow_denied), so a request admitted
// locally keeps its reservation there, the local budget's estimate of
// what it used.
//
// A local limiter whose memory is full ([ports.ErrStoreFull]) returns
// that error, so that the engine decides the request again as the
// unknown tenant, never unmetered. One that fails otherwise (a malformed
// request) admits, as [FailOpen] does, and OnError is told of that too.
func FailLocal(opts LocalOptions) ports.Layer {
	if opts.Limiter == nil {
		panic("layers: FailLocal needs a Limiter")
	}
	return fallback(opts.OnError, func(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
		n := 1
		if opts.Replicas != nil {
			n = max(opts.Replicas(), 1)
		}
		v, err := opts.Limiter.Allow(ctx, divide(req, n), dst)
		if errors.Is(err, ports.ErrStoreFull) {
			return domain.Verdict{}, err
		}
		if err != nil {
			if opts.OnError != nil {
				opts.OnError(fmt.Errorf("layers: the local fail mode could not decide either: %w", err))
			}
			return domain.Verdict{Allowed: true, Outcome: domain.OutcomeError}, nil
		}
		switch {
		case !v.Allowed:
			v.Outcome = domain.OutcomeLocalDenied
		case v.Outcome == domain.OutcomeAllowed:
			v.Outcome = domain.OutcomeLocalAllowed
		}
		return v, nil
	})
}

// divide returns req with every limit divided by n, rounded up, and never
// below what req spends from it (up to the whole limit): a route whose
// cost is above a replica's share would otherwise be denied for the whole
// outage, though the fleet's budget admits it. A Reserve limit is not
// raised so ([domain.Limit.Reserve]): it reserves what its share has
// left. It leaves req's own slice alone.
func divide(req domain.Request, n int) domain.Request {
	if n <= 1 {
		return req
	}
	limits := make([]domain.Limit, len(req.Limits))
	for i, l := range req.Limits {
		share := (l.Rule.Limit + int64(n) - 1) / int64(n)
		if !l.Concurrency && !l.Reserve { // a slot is one request, whatever its cost; a reservation fits what remains
			share = max(share, min(l.Cost, l.Rule.Limit))
		}
		l.Rule.Limit = share
		limits[i] = l
	}
	req.Limits = limits
	return req
}
