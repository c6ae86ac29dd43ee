package layers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// Breaker defaults.
const (
	// DefaultBreakerThreshold is how many decisions in a row must fail
	// to open the breaker.
	DefaultBreakerThreshold = 3
	// DefaultProbeInterval is how often an open breaker asks the store
	// whether it answers again.
	DefaultProbeInterval = 50 * time.Millisecond
	// MinConfirmTimeout is the shortest wait of the probe that confirms
	// a failing store before the breaker opens: long enough for a store
	// that is only busy (a burst queueing for connections) to answer.
	MinConfirmTimeout = 250 * time.Millisecond
)

// BreakerOptions configure [NewBreaker].
type BreakerOptions struct {
	// Probe asks the store whether it answers. Required.
	Probe ports.Pinger
	// Timeout is the store's deadline for one decision
	// (TOLLGATE_REDIS_TIMEOUT). The breaker opens only when no decision
	// has succeeded for that long, so slow but successful decisions under
	// load never open it. Zero means 50 ms.
	Timeout time.Duration
	// ProbeTimeout is how long each probe while open waits: a ping to a
	// partitioned store may close the breaker up to that long after it
	// answers again (a paused or restarted one answers the ping in flight
	// at once). Zero means Timeout, at most 100 ms.
	ProbeTimeout time.Duration
	// Threshold is how many decisions in a row must fail (and none
	// succeed for Timeout) to open the breaker. Zero means
	// DefaultBreakerThreshold.
	Threshold int
	// ProbeInterval is the time between the starts of two probes while
	// the breaker is open (a probe that takes longer is followed at
	// once). Zero means DefaultProbeInterval.
	ProbeInterval time.Duration
	// OnProbeError, if not nil, is told of every failed probe (a failed
	// store call). It must be cheap and safe for concurrent use.
	OnProbeError func(error)
	// OnChange, if not nil, is told the store's state each time it
	// changes: false when the breaker opens, true when it closes. It is
	// called from one goroutine at a time.
	OnChange func(up bool)
}

// Breaker is a circuit breaker for a store: its [Breaker.Layer] passes
// decisions to the store until they fail, and then, without calling the
// store, answers [ports.ErrBreakerOpen] at once, so that requests take the fail
// mode instead of each waiting for the store's deadline. While open it
// probes the store in the background every ProbeInterval and closes on
// the first probe that succeeds.
//
// It opens when Threshold decisions in a row have failed, none has
// succeeded for Timeout, and a probe given max(Timeout,
// [MinConfirmTimeout]) fails too, with no decision succeeding while it
// waits: a store that answers some decisions, or a ping, however
// slowly, is busy, not failing, and load alone never opens the breaker. Until the probe fails, decisions still go to the
// store. A decision whose caller went away, or that a full store
// refused ([ports.ErrStoreFull]), is neither a failure nor a success.
//
// Breaker is safe for concurrent use by multiple goroutines. Close stops
// its probe.
type Breaker struct {
	opts     BreakerOptions
	origin   time.Time
	open     atomic.Bool
	checking atomic.Bool  // a probe runs: confirming a failure, or while open
	fails    atomic.Int64 // decisions failed in a row
	okAt     atomic.Int64 // nanos since origin of the last success (written at most once a ms)

	mu     sync.Mutex // guards closed and the prober's start
	closed bool
	stop   chan struct{}
	wg     sync.WaitGroup
}

// NewBreaker returns a closed Breaker.
func NewBreaker(opts BreakerOptions) *Breaker {
	if opts.Probe == nil {
		panic("layers: NewBreaker needs a Probe")
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.Threshold <= 0 {
		opts.Threshold = DefaultBreakerThreshold
	}
	if opts.ProbeInterval <= 0 {
		opts.ProbeInterval = DefaultProbeInterval
	}
	if opts.ProbeTimeout <= 0 {
		opts.ProbeTimeout = min(opts.Timeout, 100*time.Millisecond)
	}
	b := &Breaker{opts: opts, origin: time.Now(), stop: make(chan struct{})}
	b.okAt.Store(-int64(opts.Timeout) - 1) // no success yet
	return b
}

// Up reports whether the breaker is closed: decisions go to the store.
func (b *Breaker) Up() bool { return !b.open.Load() }

// Layer returns the layer that decides through the breaker.
func (b *Breaker) Layer() ports.Layer {
	return func(next ports.Limiter) ports.Limiter {
		return ports.LimiterFunc(func(ctx context.Context, req domain.Request, dst []domain.Decision) (domain.Verdict, error) {
			if b.open.Load() {
				return domain.Verdict{}, ports.ErrBreakerOpen
			}
			v, err := next.Allow(ctx, req, dst)
			switch {
			case err == nil:
				b.succeeded()
			case errors.Is(err, ports.ErrStoreFull):
				// The store answered: it refused a new key, and is not
				// failing.
			case ctx.Err() == nil:
				b.failed()
			}
			return v, err
		})
	}
}

func (b *Breaker) nanos() int64 { return int64(time.Since(b.origin)) }

// succeeded records a decision the store made. It writes shared memory
// only when it has something to change, so that a healthy store's
// decisions do not contend on it.
func (b *Breaker) succeeded() {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if now := b.nanos(); now-b.okAt.Load() > int64(time.Millisecond) {
		b.okAt.Store(now)
	}
}

// failed records a failed decision, and opens the breaker when the store
// is failing.
func (b *Breaker) failed() {
	if b.fails.Add(1) < int64(b.opts.Threshold) || b.nanos()-b.okAt.Load() < int64(b.opts.Timeout) || b.checking.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || b.checking.Load() {
		return
	}
	b.checking.Store(true)
	b.wg.Go(b.confirm)
}

// confirm pings the store once, with a longer deadline than a
// decision's: if it answers, or a decision succeeds meanwhile, the
// failures were load and are forgotten; if not, the breaker opens and
// probes until the store answers.
func (b *Breaker) confirm() {
	defer b.checking.Store(false)
	okAt := b.okAt.Load()
	err := b.ping(max(b.opts.Timeout, MinConfirmTimeout))
	if err == nil || b.okAt.Load() != okAt {
		b.fails.Store(0)
		b.okAt.Store(b.nanos())
		return
	}
	if b.opts.OnProbeError != nil {
		b.opts.OnProbeError(err)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.open.Store(true)
	if b.opts.OnChange != nil {
		b.opts.OnChange(false)
	}
	b.mu.Unlock()
	b.probe()
}

// ping asks the store whether it answers, within timeout.
func (b *Breaker) ping(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return b.opts.Probe.Ping(ctx)
}

// probe runs while the breaker is open: it pings the store every
// ProbeInterval until a ping succeeds, then closes the breaker.
func (b *Breaker) probe() {
	t := time.NewTimer(b.opts.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		start := time.Now()
		err := b.ping(b.opts.ProbeTimeout)
		if err == nil {
			b.mu.Lock()
			b.fails.Store(0)
			b.okAt.Store(b.nanos())
			b.open.Store(false)
			if b.opts.OnChange != nil {
				b.opts.OnChange(true)
			}
			b.mu.Unlock()
			return
		}
		if b.opts.OnProbeError != nil {
			b.opts.OnProbeError(err)
		}
		t.Reset(max(b.opts.ProbeInterval-time.Since(start), 0))
	}
}

// Close stops the probe and waits for it. The breaker then stays as it
// is. Close is idempotent and always returns nil.
func (b *Breaker) Close() error {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		close(b.stop)
	}
	b.mu.Unlock()
	b.wg.Wait()
	return nil
}
