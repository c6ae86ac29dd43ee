package redis

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// coalescer makes concurrent decisions share round trips. Each decision
// is one atomic unit (one EVALSHA of its algorithm's script), and a few
// lanes carry them to Redis: a lane is one round trip in flight, on one
// pooled connection.
//
//   - A caller that finds a lane free and nobody queued runs its own
//     command on it, on its own context: a lone caller pays nothing for
//     the coalescing, not even a goroutine hand-off.
//   - Otherwise it queues, and waits for its result or its context,
//     whichever comes first: a queued caller whose deadline passes
//     returns at once, and its command is dropped if it was not sent.
//   - When a lane's round trip ends and callers are queued, the lane
//     goes to a flusher goroutine, which sends everything queued (up to
//     maxBatch) as one pipeline, and again while callers keep queueing.
//     Batches fill from the queue that builds up while the lanes are
//     busy: no timer, no waiting for a batch to fill.
//
// A batch is never retried: a script that ran but whose reply was lost
// would count twice. Its commands fail with the batch's error, and the
// fail mode decides. Only a NOSCRIPT reply (the script cache was
// flushed: the script did not run) is re-sent, as EVAL with the source,
// which also reloads the cache.
//
// It works on any go-redis UniversalClient: on a ClusterClient a
// pipeline splits by slot and node, so each node still gets one round
// trip per batch.
type coalescer struct {
	rdb      goredis.UniversalClient
	lanes    int
	maxBatch int
	slack    time.Duration // added to a pipeline's deadline (see send)

	// Lanes are tokens: free holds the lanes nobody uses, and a lane
	// handed to a flusher travels on kick. Channels, not a mutex: a
	// burst of hundreds of callers on a sync.Mutex turns into a convoy
	// (starvation mode hands the lock from goroutine to goroutine, each
	// waiting to be scheduled), and the flusher waits at its back.
	free  chan struct{}
	kick  chan struct{}
	queue chan *call // callers waiting for a lane
	stop  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

// call is one queued command and its waiter.
type call struct {
	ctx   context.Context
	cmd   *goredis.Cmd
	src   string       // the script, for the NOSCRIPT fallback
	state atomic.Int32 // callQueued, callSent or callAbandoned
	done  chan struct{}
}

const (
	callQueued    = iota
	callSent      // taken into a batch: the flusher completes it
	callAbandoned // its caller gave up first: the flusher skips it
)

// queueDepth bounds the callers waiting for a lane; past it a caller
// waits (within its deadline) for room.
const queueDepth = 1 << 13

func newCoalescer(rdb goredis.UniversalClient, lanes, maxBatch int, slack time.Duration) *coalescer {
	c := &coalescer{
		rdb:      rdb,
		lanes:    lanes,
		maxBatch: maxBatch,
		slack:    slack,
		free:     make(chan struct{}, lanes),
		kick:     make(chan struct{}, lanes),
		queue:    make(chan *call, queueDepth),
		stop:     make(chan struct{}),
	}
	for range lanes {
		c.free <- struct{}{}
	}
	c.wg.Add(lanes)
	for range lanes {
		go c.flusher()
	}
	return c
}

// eval runs cmd (an EVALSHA of the script src) and returns its error;
// the reply is cmd's. It returns by ctx's deadline at the latest.
func (c *coalescer) eval(ctx context.Context, cmd *goredis.Cmd, src string) error {
	if len(c.queue) == 0 {
		select {
		case <-c.free:
			c.direct(ctx, cmd, src)
			c.release()
			return cmd.Err()
		default:
		}
	}
	k := &call{ctx: ctx, cmd: cmd, src: src, done: make(chan struct{}, 1)}
	select {
	case c.queue <- k:
	case <-ctx.Done():
		return ctx.Err()
	}
	// A lane freed while this caller queued would find the queue empty
	// and go back to free: take it and hand it to a flusher. (Whoever
	// frees a lane puts it back first and looks at the queue after, so
	// one of the two sees the other.)
	c.claim()

	select {
	case <-k.done:
		return cmd.Err()
	case <-ctx.Done():
		select {
		case <-k.done:
			// The reply came in time, and the caller woke to both at
			// once (a busy CPU): the decision stands.
			return cmd.Err()
		default:
		}
		// If it was not sent yet, the flusher skips it. If it was, the
		// reply may still come: the flusher fills cmd and signals done,
		// which nobody reads.
		k.state.CompareAndSwap(callQueued, callAbandoned)
		return ctx.Err()
	}
}

// claim hands a free lane, if there is one, to a flusher.
func (c *coalescer) claim() {
	select {
	case <-c.free:
		c.kick <- struct{}{} // at most lanes tokens exist: never blocks
	default:
	}
}

// direct runs one command on the caller's own context, on a lane the
// caller holds.
func (c *coalescer) direct(ctx context.Context, cmd *goredis.Cmd, src string) {
	_ = processScript(ctx, c.rdb, cmd, src)
}

// processor is what runs one command: a client, or an AutoPipeliner.
type processor interface {
	Process(ctx context.Context, cmd goredis.Cmder) error
}

// processScript runs cmd, an EVALSHA of the script src, on p, and once
// more as EVAL of src when Redis has lost the script (NOSCRIPT: it did
// not run). The reply is cmd's; it returns cmd.Err().
func processScript(ctx context.Context, p processor, cmd *goredis.Cmd, src string) error {
	_ = p.Process(ctx, cmd)
	if isNoScript(cmd.Err()) {
		retry := evalOf(ctx, cmd, src)
		_ = p.Process(ctx, retry)
		adopt(cmd, retry)
	}
	return cmd.Err()
}

// release gives back a lane, then hands one to a flusher if callers are
// queued: whoever frees a lane looks at the queue after, so a queued
// caller is never left without one.
func (c *coalescer) release() {
	c.free <- struct{}{}
	if len(c.queue) > 0 {
		c.claim()
	}
}

// flusher sends the queue's batches on the lanes it is handed.
func (c *coalescer) flusher() {
	defer c.wg.Done()
	batch := make([]*call, 0, c.maxBatch)
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		for {
			batch = batch[:0]
		drain:
			for len(batch) < c.maxBatch {
				select {
				case k := <-c.queue:
					batch = append(batch, k)
				default:
					break drain
				}
			}
			if len(batch) == 0 {
				break
			}
			c.send(batch)
			clear(batch)
		}
		c.release()
	}
}

// send runs batch as one pipeline. Callers whose context ended while
// they were queued are skipped. Each caller returns by its own deadline
// whatever the pipeline does; the pipeline's own deadline is the latest
// of theirs plus the client's timeout (or none when a caller has none:
// the connection's read and write timeouts bound it then). The slack
// keeps a reply that is already on the wire, for callers still within
// their deadline, from being thrown away because the flusher itself was
// scheduled late on a busy CPU: a timed-out pipeline costs its
// connection, and every caller in it its decision.
func (c *coalescer) send(batch []*call) {
	live := batch[:0]
	var latest time.Time
	unbounded := false
	for _, k := range batch {
		if k.ctx.Err() != nil || !k.state.CompareAndSwap(callQueued, callSent) {
			continue // its caller returned (or is returning) ctx.Err()
		}
		live = append(live, k)
		if d, ok := k.ctx.Deadline(); !ok {
			unbounded = true
		} else if d.After(latest) {
			latest = d
		}
	}
	if len(live) == 0 {
		return
	}
	ctx := context.Background()
	if !unbounded {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest.Add(c.slack))
		defer cancel()
	}
	c.pipeline(ctx, live, func(k *call) *goredis.Cmd { return k.cmd })

	// NOSCRIPT: the script did not run; send it again with its source.
	var missing []*call
	for _, k := range live {
		if isNoScript(k.cmd.Err()) {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		retries := make(map[*call]*goredis.Cmd, len(missing))
		c.pipeline(ctx, missing, func(k *call) *goredis.Cmd {
			r := evalOf(ctx, k.cmd, k.src)
			retries[k] = r
			return r
		})
		for k, r := range retries {
			adopt(k.cmd, r)
		}
	}
	for _, k := range live {
		k.done <- struct{}{}
	}
}

// pipeline sends cmdOf(k) for every k in one pipeline (one round trip
// per node). Errors land on each command.
func (c *coalescer) pipeline(ctx context.Context, ks []*call, cmdOf func(*call) *goredis.Cmd) {
	if len(ks) == 1 {
		_ = c.rdb.Process(ctx, cmdOf(ks[0]))
		return
	}
	pipe := c.rdb.Pipeline()
	for _, k := range ks {
		_ = pipe.Process(ctx, cmdOf(k))
	}
	_, _ = pipe.Exec(ctx)
}

// close stops the flushers. Calls still queued keep waiting for their
// contexts; the gateway closes the client only after its requests.
func (c *coalescer) close() {
	c.once.Do(func() {
		close(c.stop)
		c.wg.Wait()
	})
}

// isNoScript reports whether err is Redis's NOSCRIPT: the script cache
// does not hold the script (SCRIPT FLUSH, a restart, a failover).
func isNoScript(err error) bool { return err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") }

// evalOf returns the EVAL of src with evalsha's keys and arguments.
func evalOf(ctx context.Context, evalsha *goredis.Cmd, src string) *goredis.Cmd {
	args := append([]any(nil), evalsha.Args()...)
	args[0], args[1] = "eval", src
	return goredis.NewCmd(ctx, args...)
}

// adopt gives cmd the reply (or error) of retry.
func adopt(cmd, retry *goredis.Cmd) {
	cmd.SetErr(retry.Err())
	cmd.SetVal(retry.Val())
}
