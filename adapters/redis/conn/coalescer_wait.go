package conn

import (
	"context"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// A caller's wait: its call, pooled, and when it gives up (see
// coalescer's doc for the rules).

// call is one queued command and its waiter. Calls are reused (the
// coalescer's pool, getCall and putCall): a call goes back to the pool
// only once its caller has received done, after which the flusher never
// touches it; an abandoned call is left to the garbage collector.
type call struct {
	ctx    context.Context
	cmd    *goredis.Cmd
	src    string       // the script, for the NOSCRIPT fallback
	state  atomic.Int32 // callQueued, callSent or callAbandoned
	sentAt atomic.Int64 // nanos since the coalescer's origin, set before callSent
	done   chan struct{}
	timer  *time.Timer     // the caller's checks; stopped between uses
	then   func(err error) // set: a posted call, nobody waits; the flusher calls it with the reply's error
}

// getCall returns a call of cmd ready to queue, from the coalescer's
// pool of calls whose caller and flusher are both done with them: a
// decision then allocates no call, channel or timer of its own. (A pool
// per coalescer: its channels and timers stay with the goroutines that
// made it, which testing/synctest's bubbles require.)
func (c *coalescer) getCall(ctx context.Context, cmd *goredis.Cmd, src string) *call {
	k, _ := c.calls.Get().(*call)
	if k == nil {
		k = &call{done: make(chan struct{}, 1)}
	}
	k.ctx, k.cmd, k.src = ctx, cmd, src
	k.state.Store(callQueued)
	k.sentAt.Store(0)
	return k
}

// putCall returns k, whose done its caller received, to the pool.
func (c *coalescer) putCall(k *call) {
	if k.timer != nil {
		k.timer.Stop()
	}
	k.ctx, k.cmd, k.src, k.then = nil, nil, "", nil
	c.calls.Put(k)
}

// arm starts k's timer for d (a first use creates it): its channel.
func (k *call) arm(d time.Duration) <-chan time.Time {
	if k.timer == nil {
		k.timer = time.NewTimer(d)
	} else {
		k.timer.Reset(d) // stopped: since Go 1.23 no stale tick is left
	}
	return k.timer.C
}

const (
	callQueued    = iota
	callSent      // taken into a batch: the flusher completes it
	callAbandoned // its caller gave up first: the flusher skips it
)

// abandon returns err for k, whose caller gives up: its command is
// dropped if not sent yet; if it was, the reply may still come (the
// flusher fills cmd and signals done, which nobody reads), unless it
// came already, and then the decision stands.
func (c *coalescer) abandon(k *call, err error) error {
	select {
	case <-k.done:
		// The reply came in time, and the caller woke to both at once
		// (a busy CPU).
		err := k.cmd.Err()
		c.putCall(k)
		return err
	default:
	}
	// Not sent yet: the flusher that takes it skips it. Sent: the
	// flusher signals done, which nobody reads. Either way a flusher may
	// still look at it, so it is not reused.
	k.state.CompareAndSwap(callQueued, callAbandoned)
	return err
}

// firstCheck is when a waiting caller first looks whether it is overdue.
func (c *coalescer) firstCheck() time.Duration {
	switch {
	case c.opts.timeout > 0 && c.opts.hardWait > 0:
		return min(c.opts.timeout, c.opts.hardWait)
	case c.opts.timeout > 0:
		return c.opts.timeout
	}
	return c.opts.hardWait
}

// overdue decides, at a check, whether k's caller gives up: not sent
// within hardWait (errNotSent); queued for the timeout while Redis
// answered nothing for as long (errNoAnswer: every lane is stuck on a
// silent Redis, so waiting for one would outlast the deadline); in
// flight for the timeout while Redis answered nothing since the send
// (errNoAnswer); in flight for hardWait (errNoAnswer). Otherwise it
// returns how long until the next check.
func (c *coalescer) overdue(k *call, queuedAt int64) (time.Duration, error) {
	now := c.nanos()
	if k.state.Load() == callQueued {
		waited := now - queuedAt
		silent := c.opts.timeout > 0 && waited >= int64(c.opts.timeout) && now-c.live.last.Load() >= int64(c.opts.timeout)
		switch {
		case c.opts.hardWait > 0 && waited >= int64(c.opts.hardWait):
			if k.state.CompareAndSwap(callQueued, callAbandoned) {
				return 0, errNotSent
			}
		case silent:
			if k.state.CompareAndSwap(callQueued, callAbandoned) {
				return 0, errNoAnswer
			}
		default:
			return c.firstCheck(), nil
		}
	}
	sent := k.sentAt.Load()
	inFlight := time.Duration(now - sent)
	if c.opts.hardWait > 0 && inFlight >= c.opts.hardWait {
		return 0, c.abandon(k, errNoAnswer)
	}
	if c.opts.timeout > 0 && inFlight >= c.opts.timeout && now-c.live.last.Load() >= int64(c.opts.timeout) {
		return 0, c.abandon(k, errNoAnswer)
	}
	next := c.firstCheck()
	if c.opts.timeout > 0 && inFlight < c.opts.timeout {
		next = c.opts.timeout - inFlight
	}
	return max(next, time.Millisecond), nil
}
