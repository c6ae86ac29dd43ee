package redis

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/ports"
)

var _ ports.Counter = (*Counter)(nil)

// Mode is how a [Counter] talks to Redis. Both modes cost one round trip
// per increment and leave every key with a TTL.
type Mode int32

const (
	// ModeAuto picks the mode from the server's version: [Detect] at
	// start-up, or lazily (see [NewCounter]).
	ModeAuto Mode = iota
	// ModePipeline sends INCR, PEXPIRE … NX and PTTL in one MULTI/EXEC
	// pipeline: one round trip. It needs Redis ≥ 7.0 (EXPIRE NX).
	ModePipeline
	// ModeScript runs one Lua script (scripts/fixedwindow.lua) with
	// EVALSHA, falling back to EVAL when the server lacks it. It works on
	// any Redis with scripting.
	ModeScript
)

// String returns "auto", "pipeline" or "script".
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModePipeline:
		return "pipeline"
	case ModeScript:
		return "script"
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

// CounterOptions configure a [Counter]. The zero value is usable: ModeAuto
// and no deadline beyond the caller's context.
type CounterOptions struct {
	Options
	// Mode forces a mode; the default, ModeAuto, detects it.
	Mode Mode
}

// Redetection bounds for ModeAuto when the start-up detection failed.
const (
	redetectInterval = 5 * time.Second // at most one attempt per interval
	detectTimeout    = time.Second     // per attempt
)

// Counter is the fixed-window [ports.Counter] on Redis: the count of a
// tenant lives under the tenant's key, and the key's TTL is the window's
// clock, so every replica shares one budget and Redis's clock, not a
// replica's, ends the window.
//
// Counter is safe for concurrent use by multiple goroutines. It does not
// own the client; Close stops only its own background work.
type Counter struct {
	client goredis.UniversalClient
	opts   Options

	mode       atomic.Int32 // resolved Mode; ModeAuto until detected
	lastDetect atomic.Int64 // unix nanos of the last lazy detection attempt

	life context.Context // ends at Close; bounds lazy detection
	stop context.CancelFunc
	mu   sync.Mutex     // guards done and wg.Go against Close's wg.Wait
	wg   sync.WaitGroup // lazy detections in flight
	done bool           // Close was called
}

// NewCounter returns a Counter over client. It does no I/O.
//
// With opts.Mode = ModeAuto the caller is expected to have run [Detect]
// and to pass its answer; when detection failed (Redis down at start-up)
// ModeAuto stays unresolved and the counter uses the script, which is
// correct on every Redis version, detecting again in the background after
// its first successful increment (at most once every 5 s), and switching
// to the pipeline once it finds Redis ≥ 7. Guessing the pipeline instead
// would be wrong on Redis < 7: INCR would succeed and PEXPIRE … NX fail,
// leaving a key without a TTL.
func NewCounter(client goredis.UniversalClient, opts CounterOptions) *Counter {
	life, stop := context.WithCancel(context.Background())
	c := &Counter{client: client, opts: opts.Options, life: life, stop: stop}
	c.mode.Store(int32(opts.Mode))
	return c
}

// Mode returns the mode the counter uses now: ModeAuto while the server's
// version is not known yet (the script runs then).
func (c *Counter) Mode() Mode { return Mode(c.mode.Load()) }

// Incr implements [ports.Counter] with one round trip to Redis, bounded by
// opts.Timeout. A key found without a TTL (PTTL -1: written by someone
// else, or by an older gateway without MULTI/EXEC) is given one at once, at the cost of a second round trip that only such a key
// ever pays.
func (c *Counter) Incr(ctx context.Context, key string, window time.Duration) (int64, time.Duration, error) {
	ctx, cancel := c.opts.withTimeout(ctx)
	defer cancel()
	ms := windowMillis(window)
	var count, pttl int64
	var err error
	switch mode := c.Mode(); mode {
	case ModePipeline:
		count, pttl, err = c.incrPipeline(ctx, key, ms)
	default:
		count, pttl, err = c.incrScript(ctx, key, ms)
		if err == nil && mode == ModeAuto {
			c.detectLater()
		}
	}
	if err != nil {
		return 0, 0, fmt.Errorf("redis: incr %q: %w", key, err)
	}
	switch {
	case pttl == -1:
		if err := c.repairTTL(ctx, key, ms); err != nil {
			return 0, 0, fmt.Errorf("redis: incr %q: key had no TTL: %w", key, err)
		}
		return count, time.Duration(ms) * time.Millisecond, nil
	case pttl < 0:
		// -2: cannot follow an atomic INCR, but a store that answers it
		// is treated as a window with no time left.
		return count, 0, nil
	}
	return count, time.Duration(pttl) * time.Millisecond, nil
}

// windowMillis returns window in whole milliseconds, rounded up, at least 1.
func windowMillis(window time.Duration) int64 {
	return max(int64((window+time.Millisecond-1)/time.Millisecond), 1)
}

// The Redis calls of the counter. They are all here, so a change of how
// commands reach Redis (go-redis AutoPipeline, say) touches this section
// only.

// fixedWindowLua is the fixed window for Redis < 7, one atomic script.
//
//go:embed scripts/fixedwindow.lua
var fixedWindowLua string

var fixedWindowScript = goredis.NewScript(fixedWindowLua)

// incrPipeline sends INCR, PEXPIRE key ms NX and PTTL in one MULTI/EXEC
// pipeline (one round trip) and returns the count and PTTL reply.
//
// NX makes the window right: whoever's PEXPIRE NX reaches a key first
// after it was created sets the window; every later one, from this
// replica or another, is a no-op, so the window is never extended.
// MULTI/EXEC makes the TTL certain: the INCR and its PEXPIRE apply
// together or not at all, also when the connection breaks mid-write, on a
// replica after a failover, or on AOF replay after a crash. A plain
// pipeline could apply the INCR alone, and a tenant that never came back
// would keep a key without a TTL. On a server without EXPIRE NX the
// transaction aborts whole (EXECABORT): no INCR without a TTL there
// either. MULTI and EXEC ride in the same round trip.
func (c *Counter) incrPipeline(ctx context.Context, key string, ms int64) (count, pttl int64, err error) {
	pipe := c.client.TxPipeline()
	incr := pipe.Incr(ctx, key)
	pipe.Do(ctx, "pexpire", key, ms, "nx")
	ttl := pipe.Do(ctx, "pttl", key)
	_, err = pipe.Exec(ctx)
	if err != nil {
		// Even when PEXPIRE failed (NX on a server < 7 forced into this
		// mode), a PTTL of -1 still triggers the repair in Incr.
		if t, terr := ttl.Int64(); terr == nil && t == -1 && incr.Err() == nil {
			_ = c.repairTTL(ctx, key, ms)
		}
		return 0, 0, err
	}
	pttl, err = ttl.Int64()
	return incr.Val(), pttl, err
}

// incrScript runs scripts/fixedwindow.lua: EVALSHA, and EVAL on NOSCRIPT
// (after a restart or SCRIPT FLUSH).
func (c *Counter) incrScript(ctx context.Context, key string, ms int64) (count, pttl int64, err error) {
	r, err := fixedWindowScript.Run(ctx, c.client, []string{key}, ms).Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	if len(r) != 2 {
		return 0, 0, fmt.Errorf("fixed-window script returned %d values, want 2", len(r))
	}
	return r[0], r[1], nil
}

// repairTTL gives a key without a TTL one window. Plain PEXPIRE, not NX:
// it works on every version, and the key had no TTL a moment ago.
func (c *Counter) repairTTL(ctx context.Context, key string, ms int64) error {
	return c.client.Do(ctx, "pexpire", key, ms).Err()
}

// Detect asks the server behind client for its version (INFO server) and
// returns the mode it supports: ModePipeline on Redis ≥ 7.0 (EXPIRE … NX),
// ModeScript before.
func Detect(ctx context.Context, client goredis.UniversalClient) (Mode, error) {
	info, err := client.Info(ctx, "server").Result()
	if err != nil {
		return ModeAuto, fmt.Errorf("redis: detect version: %w", err)
	}
	v, err := serverVersion(info)
	if err != nil {
		return ModeAuto, fmt.Errorf("redis: detect version: %w", err)
	}
	return modeFor(v), nil
}

// modeFor returns the mode a server of version v supports. An unknown
// version gets the script, which works everywhere.
func modeFor(v string) Mode {
	if major, _, _ := strings.Cut(v, "."); atoi(major) >= 7 {
		return ModePipeline
	}
	return ModeScript
}

// detectLater starts a background Detect, at most once per
// redetectInterval, and adopts its answer. Requires nothing held.
func (c *Counter) detectLater() {
	now := time.Now().UnixNano()
	last := c.lastDetect.Load()
	if now-last < int64(redetectInterval) || !c.lastDetect.CompareAndSwap(last, now) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return
	}
	c.wg.Go(func() {
		ctx, cancel := context.WithTimeout(c.life, detectTimeout)
		defer cancel()
		if m, err := Detect(ctx, c.client); err == nil {
			c.mode.CompareAndSwap(int32(ModeAuto), int32(m))
		}
	})
}

// Close stops background detection and waits for it. It does not close
// the client. It is idempotent and returns nil.
func (c *Counter) Close() error {
	c.mu.Lock()
	c.done = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
	return nil
}

// serverVersion returns redis_version from the text of INFO server.
func serverVersion(info string) (string, error) {
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "redis_version:"); ok {
			return v, nil
		}
	}
	return "", errors.New("no redis_version in INFO server")
}

// atoi returns s as a non-negative int, or -1.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}
