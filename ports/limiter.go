package ports

import (
	"context"
	"errors"

	"github.com/tollgate/tollgate/domain"
)

// Limiter decides one request against every limit that applies to it.
// It is the seam the decision engine sees; the stores implement it once
// per algorithm, and layers ([Layer]) wrap it.
//
// Allow decides req and spends from its limits by [domain.Settle]'s rule
// ([domain.Spends]) under the limiter's counting mode
// ([domain.Counting]), an option of the store given where the limiter
// is built: by default all or nothing (an admitted request spends each
// limit's Cost from every limit that admits it, a denied one spends
// nothing, and a shadow limit that would deny an admitted request spends
// nothing from itself). The Verdict holds one Decision per limit, in
// req.Limits' order; they are written into dst[:0] when it has room for
// len(req.Limits), else allocated. A caller that passes dst owns its
// array for as long as it reads the verdict, and gives each request its
// own; a layer that keeps a verdict past its request copies the
// Decisions.
//
// A concurrency limit ([domain.Limit.Concurrency]) spends a slot: an
// admitted request that takes one gets a Verdict whose Release gives it
// back on the same store, idempotent and safe for concurrent use, and
// the caller must call it once the request ends. A denied request takes
// no slot, whatever the counting mode. A store whose holders can vanish
// (a shared one) gives slots as leases that expire unless their holder
// renews them.
//
// req.Limits is not empty, every rule is valid, every limit's Cost is 0
// to [domain.MaxCostUnits], and the keys of one request share a subject
// (and so whatever a store places together by subject); a limiter may
// treat a new rule for a key as a change of budget. An error means the
// store failed, never "over the limit"; the Verdict is then the zero
// value. Implementations are safe for concurrent use by multiple
// goroutines, make at most one round trip to their store per call, and
// neither keep nor modify req.
type Limiter interface {
	Allow(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error)
}

// LimiterFunc adapts a function to a [Limiter]: a fake for tests, or a
// layer.
type LimiterFunc func(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error)

// Allow calls f(ctx, req, dst).
func (f LimiterFunc) Allow(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
	return f(ctx, req, dst)
}

// Layer wraps a Limiter in one concern of a decision (a fail mode, a deny
// cache, a breaker, a local fallback), as net/http middleware wraps a
// Handler. A layer knows the port, never the store under it.
type Layer func(Limiter) Limiter

// Chain returns l wrapped in layers, the first of them outermost: a
// request meets the layers in the order given, then l.
func Chain(l Limiter, layers ...Layer) Limiter {
	for i := len(layers) - 1; i >= 0; i-- {
		l = layers[i](l)
	}
	return l
}

// Usage reads and resets a store's budgets, for the admin API: the
// store's own state, not the layers around decisions (a store that fails
// is an error here, never a fail mode).
//
// Peek decides req at cost 0 (the limits' Cost is ignored) without spending,
// creating a key or changing a TTL: what each limit has left as it
// stands, in one round trip at most. Reset makes every limit of req
// start afresh: its state is removed (a calendar limit's current period,
// and the periods on either side). A limit without state is left as it
// is: nothing is created. Implementations are safe for concurrent use.
type Usage interface {
	Peek(ctx context.Context, req domain.Request) (domain.Verdict, error)
	Reset(ctx context.Context, req domain.Request) error
}

// ErrBreakerOpen is what a breaker layer answers, at once, while the
// store is known to be failing: the fail mode decides, as for a store
// error, but no store call was made (it is not counted as a failed one).
var ErrBreakerOpen = errors.New("the store is failing (breaker open)")

// ErrStoreFull is a request a store refused because it holds as many
// keys as it may (a bound against clients that invent tenants): nothing
// was decided or spent, and the store did not fail. Layers pass it
// through untouched; the engine decides the request again as the shared
// [domain.Unknown] tenant, whose keys a bounded store always admits.
var ErrStoreFull = errors.New("the store is full")

// ErrKeyType is a key of the gateway's that holds a value of another
// type: something else wrote it. The store answered; it is not failing.
var ErrKeyType = errors.New("a key holds a value of another type")

// Announcement is one gateway replica's claim, kept by a shared store,
// to be alive until Expires (the store's clock, in ms). The local fail
// mode counts replicas by them.
type Announcement struct {
	ID      string // the replica's id, unique in the fleet
	Expires int64  // unix ms, the store's clock
}

// Roll is what a shared store holds of the replicas at one announcement.
type Roll struct {
	// Alive are the announcements alive, the announcing replica's
	// included.
	Alive []Announcement
	// Listening is how many replicas the store itself sees listening
	// for the fleet's announcements, this replica among them: a count
	// the store keeps of live listeners, which writing keys cannot
	// raise. 0 means the store did not vouch: this replica was not
	// (yet) listening where it counted.
	Listening int
	// ListenErr, when not nil, is why this replica's last attempt to
	// listen failed (the announcement itself was made).
	ListenErr error
}

// Pinger reports whether a store answers. Admin readiness checks use it.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Settler replaces what admitted requests reserved with what they used:
// the second half of a token limit ([domain.Limit.Reserve]), whose cost
// is known only when the request's answer ends.
//
// Settle spends used − adm[i].Spent more (a negative difference gives
// back) from each Reserve limit i of req, in the window, period or entry
// its admission counted in (adm[i].Mark, from the verdict of the store
// that decided it): a window or period since ended is left as it is, a
// count never goes below zero, and a spend past the limit is counted
// all the same (the work was done). Limits that are not Reserve are left
// alone. A zero adm[i] (Spent and Mark 0) charges used in the current
// window or period: a report of work done elsewhere. It creates no key
// without a TTL, makes at most one round trip and is never resent, so
// a settlement lands at most once; the caller settles each admitted
// request once. A Reserve limit whose admission spent nothing (Mark
// [domain.NoMark]: the request was denied, or a shadow limit would have
// denied it) is left alone. Only a verdict the store decided is settled
// (outcome allowed or shadow_denied): a fail mode's verdict carries no
// decisions, or the local fallback's, whose marks the store cannot read,
// and the local reservation stands. Implementations are safe for
// concurrent use.
type Settler interface {
	Settle(ctx context.Context, req domain.Request, adm []domain.Decision, used int64) error
}
