package conn

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// fakeWire is a UniversalClient whose round trips the test holds and
// releases: every Process and every pipeline's Exec is one trip,
// recorded as the commands' names and first keys, and it blocks until
// the test sends on gate (when gate is not nil) or the trip's context
// ends. reply answers each command.
type fakeWire struct {
	goredis.UniversalClient // nil: other methods panic

	gate  chan error // a trip waits for a value: nil lets it answer, an error fails the whole trip
	stuck bool       // a trip waits for its gate even past its context (a connection that hangs)
	reply func(cmd *goredis.Cmd)

	mu     sync.Mutex
	trips  [][]string // guarded by mu
	ctxs   []bool     // per trip: whether its context had a deadline
	resent int        // commands go-redis would send again after a lost reply (not NoRetry)
}

func (f *fakeWire) Process(ctx context.Context, cmd goredis.Cmder) error {
	f.trip(ctx, []goredis.Cmder{cmd})
	return cmd.Err()
}

func (f *fakeWire) Pipeline() goredis.Pipeliner { return &fakePipe{wire: f} }

func (f *fakeWire) trip(ctx context.Context, cmds []goredis.Cmder) {
	names := make([]string, len(cmds))
	for i, c := range cmds {
		a := c.Args() // an EVALSHA's first key, or a command's last argument
		names[i] = fmt.Sprint(a[0], " ", a[min(3, len(a)-1)])
	}
	_, hasDeadline := ctx.Deadline()
	f.mu.Lock()
	f.trips = append(f.trips, names)
	f.ctxs = append(f.ctxs, hasDeadline)
	for _, c := range cmds {
		if !c.NoRetry() {
			f.resent++
		}
	}
	f.mu.Unlock()
	var err error
	switch {
	case f.gate != nil && f.stuck:
		err = <-f.gate
	case f.gate != nil:
		select {
		case err = <-f.gate:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	for _, c := range cmds {
		if err != nil {
			c.SetErr(err)
		} else {
			f.reply(unwrap(c))
		}
	}
}

// unwrap returns the command c is, or the one a [once] holds.
func unwrap(c goredis.Cmder) *goredis.Cmd {
	if o, ok := c.(once); ok {
		return o.Cmd
	}
	return c.(*goredis.Cmd)
}

// recorded returns the trips so far, each sorted: callers started
// together queue in any order.
func (f *fakeWire) recorded() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]string, len(f.trips))
	for i, tr := range f.trips {
		out[i] = slices.Sorted(slices.Values(tr))
	}
	return out
}

type fakePipe struct {
	goredis.Pipeliner
	wire *fakeWire
	cmds []goredis.Cmder
}

func (p *fakePipe) Process(_ context.Context, cmd goredis.Cmder) error {
	p.cmds = append(p.cmds, cmd)
	return nil
}

func (p *fakePipe) Exec(ctx context.Context) ([]goredis.Cmder, error) {
	p.wire.trip(ctx, p.cmds)
	return p.cmds, nil
}

// echo answers an EVALSHA or EVAL with its first key.
func echo(cmd *goredis.Cmd) { cmd.SetVal(cmd.Args()[3]) }

func evalsha(ctx context.Context, key string) *goredis.Cmd {
	return goredis.NewCmd(ctx, "evalsha", "sha", 1, key)
}

// start runs eval(key) in a goroutine and returns where its error goes.
func start(c *coalescer, ctx context.Context, key string) (*goredis.Cmd, <-chan error) {
	cmd := evalsha(ctx, key)
	done := make(chan error, 1)
	go func() { done <- c.eval(ctx, cmd, "src") }()
	return cmd, done
}

// TestCoalescerLoneCaller: a caller alone goes out at once, as one
// command (no pipeline) on its own context.
func TestCoalescerLoneCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 2, maxBatch: 16, timeout: 50 * time.Millisecond, hardWait: time.Second})
		defer c.close()
		cmd := evalsha(t.Context(), "k1")
		if err := c.eval(t.Context(), cmd, "src"); err != nil || cmd.Val() != "k1" {
			t.Fatalf("eval = %v, %v; want k1", cmd.Val(), err)
		}
		if got := f.recorded(); len(got) != 1 || len(got[0]) != 1 || !f.ctxs[0] {
			t.Errorf("trips %v (deadlines %v): want one trip of one command, with a deadline", got, f.ctxs)
		}
	})
}

// TestCoalescerSharesRoundTrips: callers that arrive while every lane is
// busy leave together in the next round trip, each with its own reply.
func TestCoalescerSharesRoundTrips(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo, gate: make(chan error)}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxBatch: 64})
		defer c.close()
		ctx := t.Context()
		_, first := start(c, ctx, "k0")
		synctest.Wait() // k0 holds the one lane
		cmds := make([]*goredis.Cmd, 10)
		dones := make([]<-chan error, 10)
		for i := range cmds {
			cmds[i], dones[i] = start(c, ctx, fmt.Sprintf("k%d", i+1))
		}
		synctest.Wait() // all ten queued
		f.gate <- nil   // k0 answers; the lane goes to a flusher
		synctest.Wait()
		f.gate <- nil // the batch answers
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		for i, d := range dones {
			if err := <-d; err != nil || cmds[i].Val() != fmt.Sprintf("k%d", i+1) {
				t.Errorf("caller %d: %v, %v", i+1, cmds[i].Val(), err)
			}
		}
		if got := f.recorded(); len(got) != 2 || len(got[1]) != 10 {
			t.Errorf("trips %v: want k0 alone, then the ten queued callers in one pipeline", got)
		}
	})
}

// TestCoalescerQueuedDeadline: a queued caller whose deadline passes
// returns at once with its context's error, and its command is never
// sent.
func TestCoalescerQueuedDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo, gate: make(chan error)}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxBatch: 64})
		defer c.close()
		_, first := start(c, t.Context(), "slow")
		synctest.Wait()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		_, queued := start(c, ctx, "late")
		_, kept := start(c, t.Context(), "kept")
		if err := <-queued; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("queued caller past its deadline: %v, want context.DeadlineExceeded", err)
		}
		if waited := time.Since(t0); waited != 50*time.Millisecond {
			t.Errorf("queued caller returned after %v, want its 50ms deadline", waited)
		}
		f.gate <- nil // "slow" answers at last
		synctest.Wait()
		f.gate <- nil
		<-first
		<-kept
		if got := f.recorded(); !slices.Equal(got[len(got)-1], []string{"evalsha kept"}) {
			t.Errorf("trips %v: the expired caller's command was sent", got)
		}
	})
}

// TestCoalescerNeverRetries: a batch whose round trip fails fails every
// caller in it, once: nothing is sent again.
func TestCoalescerNeverRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo, gate: make(chan error)}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxBatch: 64})
		defer c.close()
		_, first := start(c, t.Context(), "k0")
		synctest.Wait()
		var dones []<-chan error
		for i := range 5 {
			_, d := start(c, t.Context(), fmt.Sprint("k", i+1))
			dones = append(dones, d)
		}
		synctest.Wait()
		f.gate <- nil
		synctest.Wait()
		lost := errors.New("read tcp: connection reset by peer")
		f.gate <- lost
		<-first
		for i, d := range dones {
			if err := <-d; !errors.Is(err, lost) {
				t.Errorf("caller %d: %v, want the batch's error", i+1, err)
			}
		}
		synctest.Wait()
		if got := f.recorded(); len(got) != 2 {
			t.Errorf("trips %v: want 2 (a failed batch is never sent again)", got)
		}
		if f.resent != 0 {
			t.Errorf("%d commands sent that go-redis may send again (a ClusterClient re-sends a batch after a lost reply): want every one NoRetry", f.resent)
		}
	})
}

// TestCoalescerNoScript: after SCRIPT FLUSH, EVALSHA answers NOSCRIPT
// (the script did not run): the commands go again as EVAL, in one round
// trip for the whole batch, and their callers get EVAL's replies.
func TestCoalescerNoScript(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{gate: make(chan error), reply: func(cmd *goredis.Cmd) {
			if cmd.Args()[0] == "evalsha" {
				cmd.SetErr(goredis.ErrNoScript)
				return
			}
			echo(cmd)
		}}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxBatch: 64})
		defer c.close()
		lone, first := start(c, t.Context(), "k0")
		synctest.Wait()
		f.gate <- nil // k0: NOSCRIPT
		synctest.Wait()
		var cmds []*goredis.Cmd
		var dones []<-chan error
		for i := range 3 {
			cmd, d := start(c, t.Context(), fmt.Sprint("k", i+1))
			cmds, dones = append(cmds, cmd), append(dones, d)
		}
		synctest.Wait()
		f.gate <- nil // k0's EVAL answers
		synctest.Wait()
		f.gate <- nil // the batch: NOSCRIPT
		synctest.Wait()
		f.gate <- nil // the batch's EVALs
		if err := <-first; err != nil || lone.Val() != "k0" {
			t.Errorf("lone caller after NOSCRIPT: %v, %v", lone.Val(), err)
		}
		for i, d := range dones {
			if err := <-d; err != nil || cmds[i].Val() != fmt.Sprint("k", i+1) {
				t.Errorf("caller %d after NOSCRIPT: %v, %v", i+1, cmds[i].Val(), err)
			}
		}
		want := [][]string{{"evalsha k0"}, {"eval k0"}, {"evalsha k1", "evalsha k2", "evalsha k3"}, {"eval k1", "eval k2", "eval k3"}}
		if got := f.recorded(); !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("trips %v, want %v", got, want)
		}
	})
}

// TestCoalescerTimeoutIsAboutRedis: a decision's timeout is about Redis,
// not this process: one that waited longer than the timeout for a lane
// (a busy process), then was answered, stands; one in flight past the
// timeout while another round trip came back (Redis answering, this
// process reading late) keeps waiting for its reply, up to hardWait; one
// in flight for the timeout while Redis answered nothing fails at it.
func TestCoalescerTimeoutIsAboutRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo, gate: make(chan error)}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxBatch: 64, timeout: 50 * time.Millisecond, hardWait: time.Second})
		defer c.close()
		_, first := start(c, t.Context(), "slow")
		synctest.Wait()
		cmd, queued := start(c, t.Context(), "patient")
		time.Sleep(40 * time.Millisecond)
		f.gate <- nil // "slow" answers after 40 ms
		synctest.Wait()
		time.Sleep(40 * time.Millisecond) // "patient" queued 40 ms, in flight 40 ms more
		f.gate <- nil
		if err := <-first; err != nil {
			t.Errorf("first: %v", err)
		}
		if err := <-queued; err != nil || cmd.Val() != "patient" {
			t.Errorf("queued 40 ms then answered in 40 ms: %v, %v; want its reply", cmd.Val(), err)
		}

		// Two lanes: "read-late" stays in flight 200 ms while the other
		// lane's round trips come back: it waits for its reply.
		f2 := &fakeWire{gate: make(chan error), reply: echo}
		c2 := newCoalescer(f2, newLiveness(), coalescerOptions{lanes: 2, maxBatch: 64, timeout: 50 * time.Millisecond, hardWait: time.Second})
		defer c2.close()
		gates := map[string]chan error{"read-late": make(chan error), "other": make(chan error)}
		f2.gate = nil
		f2.reply = func(cmd *goredis.Cmd) { echo(cmd) }
		block := &gatedWire{fakeWire: f2, gates: gates}
		c2.rdb = block
		late, lateDone := start(c2, t.Context(), "read-late")
		synctest.Wait()
		for range 4 {
			time.Sleep(40 * time.Millisecond)
			_, d := start(c2, t.Context(), "other")
			synctest.Wait()
			gates["other"] <- nil
			if err := <-d; err != nil {
				t.Fatalf("other: %v", err)
			}
		}
		gates["read-late"] <- nil // 160 ms after its send, Redis having answered meanwhile
		if err := <-lateDone; err != nil || late.Val() != "read-late" {
			t.Errorf("in flight 160 ms while Redis answered the other lane: %v, %v; want its reply", late.Val(), err)
		}

		// Redis answers nothing: the decision fails at the timeout.
		_, silent := start(c, t.Context(), "silent")
		t0 := time.Now()
		if err := <-silent; !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 50*time.Millisecond {
			t.Errorf("no answer at all: %v after %v, want DeadlineExceeded at 50ms", err, time.Since(t0))
		}
		f.gate <- errors.New("stalled") // let its round trip end
	})
}

// gatedWire is a fakeWire whose round trips each wait on the gate of
// their first command's key.
type gatedWire struct {
	*fakeWire
	gates map[string]chan error
}

func (g *gatedWire) Process(ctx context.Context, cmd goredis.Cmder) error {
	g.fakeWire.trip(ctx, []goredis.Cmder{cmd})
	key := fmt.Sprint(cmd.Args()[3])
	select {
	case err := <-g.gates[key]:
		if err != nil {
			cmd.SetErr(err)
		}
	case <-ctx.Done():
		cmd.SetErr(ctx.Err())
	}
	return cmd.Err()
}

// TestCoalescerHardWait: a decision that cannot be sent within hardWait
// (every lane stuck) fails with errNotSent, and its command is never
// sent.
func TestCoalescerHardWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo, gate: make(chan error), stuck: true}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxBatch: 64, hardWait: 300 * time.Millisecond})
		defer c.close()
		_, first := start(c, t.Context(), "stuck")
		synctest.Wait()
		t0 := time.Now()
		_, queued := start(c, t.Context(), "never")
		if err := <-queued; !errors.Is(err, errNotSent) || time.Since(t0) != 300*time.Millisecond {
			t.Errorf("queued behind a stuck lane: %v after %v, want errNotSent at 300ms", err, time.Since(t0))
		}
		f.gate <- nil
		<-first
		synctest.Wait()
		for _, trip := range f.recorded() {
			if slices.Contains(trip, "evalsha never") {
				t.Errorf("trips %v: the abandoned command was sent", f.recorded())
			}
		}
	})
}

// TestCoalescerQueuedBehindSilentRedis: a decision queued behind lanes
// stuck on a Redis that answers nothing (frozen, say) fails at the
// timeout, as one in flight does, not at hardWait; its command is never
// sent.
func TestCoalescerQueuedBehindSilentRedis(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo, gate: make(chan error), stuck: true}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxBatch: 64, timeout: 50 * time.Millisecond, hardWait: time.Second})
		defer c.close()
		_, first := start(c, t.Context(), "stuck")
		synctest.Wait()
		t0 := time.Now()
		_, queued := start(c, t.Context(), "never")
		if err := <-queued; !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 50*time.Millisecond {
			t.Errorf("queued behind a lane stuck on a silent Redis: %v after %v, want DeadlineExceeded at 50ms", err, time.Since(t0))
		}
		if err := <-first; !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the stuck decision: %v, want DeadlineExceeded", err)
		}
		f.gate <- nil
		synctest.Wait()
		for _, trip := range f.recorded() {
			if slices.Contains(trip, "evalsha never") {
				t.Errorf("trips %v: the abandoned command was sent", f.recorded())
			}
		}
	})
}

// TestCoalescerLanesFollowDemand: with Redis far (light round trips of
// 5 ms) and every lane busy for longer than spawnAfter, more lanes open
// for the queued callers, up to maxLanes, so no caller waits for a round
// trip it is not on; once the queue empties the extra lanes close again.
func TestCoalescerLanesFollowDemand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo, gate: make(chan error)}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxLanes: 4, maxBatch: 64, spawnAfter: time.Millisecond})
		defer c.close()
		c.observeRTT(5 * time.Millisecond)
		var dones []<-chan error
		for i := range 6 {
			_, d := start(c, t.Context(), fmt.Sprint("k", i))
			dones = append(dones, d)
			time.Sleep(2 * time.Millisecond) // each one waits past spawnAfter
			synctest.Wait()
		}
		if got, want := len(f.recorded()), 4; got != want {
			t.Errorf("round trips in flight with 6 callers, one every 2 ms, each stuck: %d, want %d (maxLanes)", got, want)
		}
		if got := c.open.Load(); got != 4 {
			t.Errorf("lanes open = %d, want 4", got)
		}
		for range 5 { // the four trips, and the queued callers' batch
			f.gate <- nil
			synctest.Wait()
		}
		if got := f.recorded(); len(got) != 5 || len(got[4]) != 2 {
			t.Errorf("trips %v: want the four, then k4 and k5 together", got)
		}
		for i, d := range dones {
			if err := <-d; err != nil {
				t.Errorf("caller %d: %v", i, err)
			}
		}
		synctest.Wait()
		if got := c.open.Load(); got != 1 {
			t.Errorf("lanes open once idle = %d, want the base 1", got)
		}
	})
}

// TestCoalescerLanesStayOnLoopback: with Redis near (light round trips
// of 50 µs), callers that wait are waiting for the CPU, not the network:
// no lane opens past the base, and they share the next round trips.
func TestCoalescerLanesStayOnLoopback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeWire{reply: echo, gate: make(chan error)}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxLanes: 4, maxBatch: 64, spawnAfter: time.Millisecond})
		defer c.close()
		c.observeRTT(50 * time.Microsecond)
		var dones []<-chan error
		for i := range 6 {
			_, d := start(c, t.Context(), fmt.Sprint("k", i))
			dones = append(dones, d)
			time.Sleep(2 * time.Millisecond)
			synctest.Wait()
		}
		if got := c.open.Load(); got != 1 {
			t.Errorf("lanes open with Redis near = %d, want the base 1", got)
		}
		for range 2 { // k0's trip, then the five queued together
			f.gate <- nil
			synctest.Wait()
		}
		if got := f.recorded(); len(got) != 2 || len(got[1]) != 5 {
			t.Errorf("trips %v: want k0, then the other five together", got)
		}
		for _, d := range dones {
			<-d
		}
	})
}

// TestCoalescerRTTFloor: a faster light round trip lowers the floor at
// once; a slower one raises it only when a whole window was slower.
func TestCoalescerRTTFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCoalescer(&fakeWire{reply: echo}, newLiveness(), coalescerOptions{lanes: 1})
		defer c.close()
		if c.rttFloor.Load() != 0 {
			t.Fatal("a floor before any round trip")
		}
		c.observeRTT(time.Millisecond)
		c.observeRTT(300 * time.Microsecond)
		if got := time.Duration(c.rttFloor.Load()); got != 300*time.Microsecond {
			t.Errorf("floor %v, want the fastest, 300µs", got)
		}
		time.Sleep(rttWindow)
		c.observeRTT(2 * time.Millisecond) // a new window: Redis moved away
		if got := time.Duration(c.rttFloor.Load()); got != 300*time.Microsecond {
			t.Errorf("floor %v one slow trip into a window, want still 300µs", got)
		}
		time.Sleep(rttWindow)
		c.observeRTT(3 * time.Millisecond)
		if got := time.Duration(c.rttFloor.Load()); got != 2*time.Millisecond {
			t.Errorf("floor %v after a whole window of slower trips, want its fastest, 2ms", got)
		}
	})
}

// TestCoalescerPost: a posted command does not wait: it leaves with the
// next batch of decisions, and then is told its reply's error; a failed
// batch tells it the error.
func TestCoalescerPost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reply := func(cmd *goredis.Cmd) { // echo, or 1 for a ZREM
			if cmd.Args()[0] == "zrem" {
				cmd.SetVal(int64(1))
				return
			}
			echo(cmd)
		}
		f := &fakeWire{reply: reply, gate: make(chan error)}
		c := newCoalescer(f, newLiveness(), coalescerOptions{lanes: 1, maxBatch: 64})
		defer c.close()
		_, first := start(c, t.Context(), "k0")
		synctest.Wait() // k0 holds the one lane
		told := make(chan error, 2)
		if !c.post(goredis.NewCmd(context.Background(), "zrem", "slots", "h1"), func(err error) { told <- err }) {
			t.Fatal("post: the queue is full")
		}
		_, second := start(c, t.Context(), "k1")
		synctest.Wait()
		select {
		case err := <-told:
			t.Fatalf("told %v before the command was sent", err)
		default:
		}
		f.gate <- nil // k0 answers; the posted command and k1 leave together
		synctest.Wait()
		f.gate <- nil
		if err := errors.Join(<-first, <-second, <-told); err != nil {
			t.Fatal(err)
		}
		if got := f.recorded(); len(got) != 2 || !slices.Equal(got[1], []string{"evalsha k1", "zrem h1"}) {
			t.Errorf("trips %v: want k0, then the posted command with k1", got)
		}
		// A failed trip: the posted command is told its error.
		c.post(goredis.NewCmd(context.Background(), "zrem", "slots", "h2"), func(err error) { told <- err })
		synctest.Wait()
		f.gate <- errors.New("connection reset")
		if err := <-told; err == nil {
			t.Error("a posted command in a failed trip: told nil")
		}
	})
}
