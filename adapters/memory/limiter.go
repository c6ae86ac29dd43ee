package memory

import (
	"context"
	"sync"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// state is one tenant's state under a domain policy: *domain.SlidingLog,
// *domain.SlidingWindow or *domain.TokenBucket.
type state[S any] interface {
	*S
	Admit(now time.Time, rule domain.Rule) domain.Decision
}

// limiter is what the memory limiters share: a map of tenants, each a
// domain policy's state under its own mutex, and a sweeper that drops the
// tenants whose budget is whole again (dropping them changes no decision).
type limiter[S any, P state[S]] struct {
	clock   clock
	keys    sync.Map // string → *limiterEntry[S]
	sweeper *sweeper
}

// limiterEntry is one tenant.
type limiterEntry[S any] struct {
	mu     sync.Mutex // guards state, idleAt, swept
	state  S
	idleAt int64 // clock nanos from which state is whole again
	swept  bool  // removed from the map: Allow retries on a fresh entry
}

func newLimiter[S any, P state[S]](opts Options) *limiter[S, P] {
	l := &limiter[S, P]{clock: newClock(opts.Now)}
	l.sweeper = startSweeper(opts.SweepInterval, l.sweep)
	return l
}

// Allow implements [ports.Limiter]. It never fails. For a tenant it
// already holds, it takes the tenant's mutex and does not allocate.
func (l *limiter[S, P]) Allow(_ context.Context, key string, rule domain.Rule) (domain.Decision, error) {
	for {
		v, ok := l.keys.Load(key)
		if !ok {
			v, _ = l.keys.LoadOrStore(key, new(limiterEntry[S]))
		}
		e := v.(*limiterEntry[S])
		e.mu.Lock()
		if e.swept {
			e.mu.Unlock()
			l.keys.CompareAndDelete(key, e)
			continue
		}
		// The clock is read under the lock, so one tenant's decisions
		// see time in the order they are made.
		now, nanos := l.clock.read()
		d := P(&e.state).Admit(now, rule)
		e.idleAt = nanos + int64(d.ResetAfter)
		e.mu.Unlock()
		return d, nil
	}
}

// Len returns the number of tenants held, idle ones not yet swept
// included.
func (l *limiter[S, P]) Len() int {
	n := 0
	l.keys.Range(func(_, _ any) bool { n++; return true })
	return n
}

// Close stops the sweeper. It is idempotent and always returns nil.
func (l *limiter[S, P]) Close() error {
	l.sweeper.close()
	return nil
}

// sweep drops every tenant whose budget is whole again.
func (l *limiter[S, P]) sweep() {
	_, now := l.clock.read()
	l.keys.Range(func(k, v any) bool {
		e := v.(*limiterEntry[S])
		e.mu.Lock()
		if !e.swept && e.idleAt <= now {
			e.swept = true
			l.keys.CompareAndDelete(k, e)
		}
		e.mu.Unlock()
		return true
	})
}
