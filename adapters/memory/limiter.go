package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// state is one key's state under a domain policy: *domain.FixedWindowCount,
// *domain.SlidingLog, *domain.SlidingWindow or *domain.TokenBucket.
type state[S any] interface {
	*S
	Decide(now time.Time, rule domain.Rule, cost int64) domain.Decision
	Spend(now time.Time, rule domain.Rule, cost int64)
}

// maxLimits is how many limits a request may carry here; a policy has a
// handful, and the entries of one request are locked together.
const maxLimits = 16

// errTooManyLimits and errDuplicateKey are requests the limiter cannot
// decide: a caller's bug, reported rather than deadlocking.
var (
	errTooManyLimits = fmt.Errorf("memory: more than %d limits in one request", maxLimits)
	errDuplicateKey  = errors.New("memory: two limits of one request share a key")
)

// limiter is what the memory limiters share: a map of keys, each a domain
// policy's state under its own mutex, and a sweeper that drops the keys
// whose budget is whole again (dropping them changes no decision).
//
// A request of several limits locks their entries in key order (so two
// requests never wait on each other in a cycle), decides every limit,
// and spends only when the request is admitted, from every limit that
// admitted it ([domain.Settle]'s rule: a shadow limit that would deny
// spends nothing).
type limiter[S any, P state[S]] struct {
	clock   clock
	keys    sync.Map // string → *limiterEntry[S]
	sweeper *sweeper
}

// limiterEntry is one key.
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

// Allow implements [ports.Limiter]. It fails only on a malformed request
// (more than 16 limits, or two with one key). For keys it already holds,
// it takes their mutexes and allocates nothing, but for its verdict's
// decisions when req.Decisions has no room for them.
func (l *limiter[S, P]) Allow(_ context.Context, req domain.Request) (domain.Verdict, error) {
	n := len(req.Limits)
	if n > maxLimits {
		return domain.Verdict{}, errTooManyLimits
	}
	var (
		entries [maxLimits]*limiterEntry[S]
		order   [maxLimits]int // indices of req.Limits in key order
	)
	for i := range n {
		order[i] = i
		for j := i; j > 0 && req.Limits[order[j]].Key < req.Limits[order[j-1]].Key; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	for i := 1; i < n; i++ {
		if req.Limits[order[i]].Key == req.Limits[order[i-1]].Key {
			return domain.Verdict{}, errDuplicateKey
		}
	}
	for {
		retry := false
		for k := range n {
			i := order[k]
			e := l.entry(req.Limits[i])
			e.mu.Lock()
			entries[i] = e
			if e.swept {
				retry = true
				for _, j := range order[:k+1] {
					entries[j].mu.Unlock()
				}
				l.keys.CompareAndDelete(req.Limits[i].Key, e)
				break
			}
		}
		if retry {
			continue
		}
		// The clock is read under the locks, so one key's decisions see
		// time in the order they are made.
		now, nanos := l.clock.read()
		decide := func(i int, cost int64) domain.Decision {
			return P(&entries[i].state).Decide(now, req.Limits[i].Rule, cost)
		}
		v := domain.Settle(req, decide)
		for i := range n {
			e := entries[i]
			if v.Allowed && v.Decisions[i].Allowed { // Settle's rule: a shadow denial spends nothing
				P(&e.state).Spend(now, req.Limits[i].Rule, req.Cost)
			}
			e.idleAt = nanos + int64(v.Decisions[i].ResetAfter)
			e.mu.Unlock()
		}
		return v, nil
	}
}

// entry returns lim's entry, creating it.
func (l *limiter[S, P]) entry(lim domain.Limit) *limiterEntry[S] {
	v, ok := l.keys.Load(lim.Key)
	if !ok {
		l.sweeper.saw(lim.Rule.Window)
		v, _ = l.keys.LoadOrStore(lim.Key, new(limiterEntry[S]))
	}
	return v.(*limiterEntry[S])
}

// Len returns the number of keys held, idle ones not yet swept included.
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

// sweep drops every key whose budget is whole again.
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
