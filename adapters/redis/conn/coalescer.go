package conn

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// coalescer makes concurrent decisions share round trips. Each decision
// is one atomic unit (one EVALSHA of its algorithm's script), and lanes
// carry them to Redis: a lane is one round trip in flight, on one pooled
// connection.
//
//   - A caller queues its command and hands a free lane, if there is
//     one, to a flusher goroutine, which sends everything queued (up to
//     maxBatch) as one pipeline, and again while callers keep queueing.
//     Batches fill from the queue that builds up while the lanes are
//     busy: no timer, no waiting for a batch to fill. A lone caller's
//     command leaves at once, alone.
//   - The caller waits for its result or its context, whichever comes
//     first: a caller whose context ends returns at once, and its
//     command is dropped if it was not sent.
//   - Lanes follow demand: the base lanes are always open, and when a
//     caller has waited spawnAfter with every lane busy (a round trip
//     longer than that: Redis across a network), another lane opens, up
//     to maxLanes; a lane beyond the base closes once it finds the queue
//     empty. On loopback a round trip is shorter than spawnAfter and the
//     base lanes carry deep batches; across a network, in-flight round
//     trips grow until a queued decision waits about spawnAfter for one,
//     never a whole round trip it is not on.
//
// A decision's deadline (timeout) is about Redis, not this process: a
// decision in flight fails once it has been in flight for timeout and
// Redis has been silent for timeout (no byte read from it on any
// connection, no round trip back): a stalled or unreachable Redis fails
// decisions after timeout, as before. While Redis is heard from, a
// decision waits for its own reply, up to hardWait from its send: a
// process starved of CPU, whose flushers read replies late, does not
// fail decisions Redis answered in time. The wait to be sent is bounded
// apart: a decision queued for timeout while Redis answered nothing for
// as long (every lane stuck on a frozen Redis) fails then, as one in
// flight does; one not sent by hardWait fails with errNotSent.
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
	rdb  goredis.UniversalClient
	opts coalescerOptions

	// Lanes are tokens: free holds the open lanes nobody uses, and a lane
	// handed to a flusher travels on kick. Channels, not a mutex: a
	// burst of hundreds of callers on a sync.Mutex turns into a convoy
	// (starvation mode hands the lock from goroutine to goroutine, each
	// waiting to be scheduled), and the flusher waits at its back.
	free     chan struct{}
	kick     chan struct{}
	open     atomic.Int32 // lanes open: in free, in flight, or travelling on kick
	live     *liveness    // when Redis was last heard from
	queue    chan *call   // callers waiting for a lane
	spawning atomic.Bool  // a spawn check is armed
	// The floor of recent light round trips (observeRTT), in ns (0: none
	// yet): lanes open past the base only when it is spawnAfter at least.
	rttFloor, rttMin, rttWin atomic.Int64
	stop                     chan struct{}
	wg                       sync.WaitGroup
	once                     sync.Once
	calls                    sync.Pool // of *call: getCall, putCall
}

// coalescerOptions configure a coalescer.
type coalescerOptions struct {
	lanes      int           // always open, at least 1
	maxLanes   int           // most in flight, at least lanes
	maxBatch   int           // commands in one pipeline
	timeout    time.Duration // a decision in flight this long fails unless Redis answered since; 0: the caller's context only
	hardWait   time.Duration // longest a decision waits to be sent, and then for its reply; 0: the caller's context only
	spawnAfter time.Duration // a caller waiting this long, every lane busy, opens a lane; 0: never
	connBound  bool          // the connections' read and write timeouts are at most hardWait: a batch needs no deadline of its own
}

// queueDepth bounds the callers waiting for a lane; past it a caller
// waits for room within its context and until its first check
// (firstCheck: the timeout or hardWait, the sooner), then fails with
// errNotSent.
const queueDepth = 1 << 13

// errNotSent is a decision that waited hardWait without being sent.
var errNotSent = errors.New("not sent to Redis in time (the process is overloaded)")

// errNoAnswer is a decision in flight for the timeout while Redis
// answered nothing. It wraps context.DeadlineExceeded.
var errNoAnswer = fmt.Errorf("no answer from Redis within the timeout: %w", context.DeadlineExceeded)

func newCoalescer(rdb goredis.UniversalClient, live *liveness, opts coalescerOptions) *coalescer {
	opts.lanes = max(opts.lanes, 1)
	opts.maxLanes = max(opts.maxLanes, opts.lanes)
	c := &coalescer{
		rdb:   rdb,
		opts:  opts,
		free:  make(chan struct{}, opts.maxLanes),
		kick:  make(chan struct{}, opts.maxLanes),
		queue: make(chan *call, queueDepth),
		stop:  make(chan struct{}),
		live:  live,
	}
	for range opts.lanes {
		c.free <- struct{}{}
	}
	c.open.Store(int32(opts.lanes))
	c.wg.Add(opts.maxLanes)
	for range opts.maxLanes {
		go c.flusher()
	}
	return c
}

// eval runs cmd (an EVALSHA of the script src) and returns its error;
// the reply is cmd's. It returns by ctx's end at the latest, by the
// timeout when Redis stops answering, and else within twice hardWait.
func (c *coalescer) eval(ctx context.Context, cmd *goredis.Cmd, src string) error {
	k := c.getCall(ctx, cmd, src)
	queuedAt := c.nanos()
	var check <-chan time.Time // nil: no timeout, no hardWait
	if d := c.firstCheck(); d > 0 {
		check = k.arm(d)
	}
	select {
	case c.queue <- k:
	case <-ctx.Done():
		c.putCall(k) // never queued
		return ctx.Err()
	case <-check:
		c.putCall(k)
		return errNotSent // the queue stayed full
	}
	// Hand a free lane, if any, to a flusher. (Whoever frees a lane puts
	// it back first and looks at the queue after, so one of the two sees
	// the other.)
	c.claim()
	c.armSpawn()
	for {
		select {
		case <-k.done:
			c.putCall(k)
			return cmd.Err()
		case <-ctx.Done():
			return c.abandon(k, ctx.Err())
		case <-check:
			wait, err := c.overdue(k, queuedAt)
			if err != nil {
				return err
			}
			k.timer.Reset(wait)
		}
	}
}

// post queues cmd, a command (not a script), and returns at once: the
// flusher sends it with the next batch and calls then with its error
// (then must be cheap: it runs on the flusher). It reports false, and
// queues nothing, when the queue is full. A posted command has no
// deadline of its own: the batch's bounds it.
func (c *coalescer) post(cmd *goredis.Cmd, then func(err error)) bool {
	k := c.getCall(context.Background(), cmd, "")
	k.then = then
	select {
	case c.queue <- k:
	default:
		c.putCall(k)
		return false
	}
	c.claim()
	c.armSpawn()
	return true
}

func (c *coalescer) nanos() int64 { return c.live.nanos() }

// flusher sends the queue's batches on the lanes it is handed.
func (c *coalescer) flusher() {
	defer c.wg.Done()
	batch := make([]*call, 0, c.opts.maxBatch)
	for {
		select {
		case <-c.kick:
		case <-c.stop:
			return
		}
		for {
			batch = batch[:0]
		drain:
			for len(batch) < c.opts.maxBatch {
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

// send runs batch as one pipeline, within hardWait from now: the
// connections' own read and write timeouts when they are that short
// (connBound: Open's), else a deadline of the batch's. Callers whose
// context ended or who gave up while queued are skipped; each caller
// returns by its own rules (eval) whatever the pipeline does. A round
// trip that brings Redis's replies back marks Redis as answering.
func (c *coalescer) send(batch []*call) {
	live := batch[:0]
	now := c.nanos()
	for _, k := range batch {
		k.sentAt.Store(now)
		if k.ctx.Err() != nil || !k.state.CompareAndSwap(callQueued, callSent) {
			continue // its caller returned (or is returning)
		}
		live = append(live, k)
	}
	if len(live) == 0 {
		return
	}
	ctx := context.Background()
	if c.opts.hardWait > 0 && !c.opts.connBound {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.hardWait)
		defer cancel()
	}
	// A light batch's round trip is what the network takes (observeRTT);
	// a deep one's is Redis's work too, and is not timed.
	var sent time.Time
	if len(live) <= 2 {
		sent = time.Now()
	}
	c.pipeline(ctx, live, func(k *call) *goredis.Cmd { return k.cmd })
	if !sent.IsZero() {
		c.observeRTT(time.Since(sent))
	}

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
	c.noteAnswer(live)
	// Last: once a caller has received done it may reuse its call.
	for _, k := range live {
		if then := k.then; then != nil { // posted: nobody waits
			err := k.cmd.Err()
			c.putCall(k)
			then(err)
			continue
		}
		k.done <- struct{}{}
	}
}

// noteAnswer records that Redis answered, when any command of live got
// a reply (a value, or an error Redis itself sent: NOSCRIPT, WRONGTYPE),
// not a network error or a timeout.
func (c *coalescer) noteAnswer(live []*call) {
	for _, k := range live {
		if err := k.cmd.Err(); err == nil || isReply(err) {
			c.live.heard()
			return
		}
	}
}

// pipeline sends cmdOf(k) for every k in one pipeline (one round trip
// per node), never twice ([once]). Errors land on each command.
func (c *coalescer) pipeline(ctx context.Context, ks []*call, cmdOf func(*call) *goredis.Cmd) {
	if len(ks) == 1 {
		_ = c.rdb.Process(ctx, once{cmdOf(ks[0])})
		return
	}
	pipe := c.rdb.Pipeline()
	for _, k := range ks {
		_ = pipe.Process(ctx, once{cmdOf(k)})
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
