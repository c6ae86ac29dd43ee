package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

var prefixID atomic.Int64

// uniquePrefix returns a key prefix no other test of this run uses.
func uniquePrefix(t testing.TB) string {
	return fmt.Sprintf("it:%d:%s:", prefixID.Add(1), strings.ReplaceAll(t.Name(), "/", "."))
}

// fixedWindow returns the fixed window on srv, all or nothing.
func fixedWindow(srv *redisServer) ports.Limiter {
	return fixedWindowBy(srv, false, domain.WindowsFromFirst)
}

// fixedWindowBy returns the fixed window on srv counting every request
// when countDenied (the gateway's one limit without a policy file), else
// all or nothing, in windows w.
func fixedWindowBy(srv *redisServer, countDenied bool, w domain.Windows) ports.Limiter {
	opts := redis.Options{Timeout: 5 * time.Second, Windows: w}
	if countDenied {
		opts.Counting = domain.CountEvery
	}
	return redisLimiter{algorithm: domain.AlgorithmFixedWindow}.new(conn.NewClient(srv.Client, testConn), opts)
}

// TestRedisFixedWindowStorm: concurrent decisions on one key admit
// exactly the limit, counting denials or not, and leave no key without a
// TTL.
func TestRedisFixedWindowStorm(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	for _, countDenied := range []bool{false, true} {
		lim, prefix := fixedWindowBy(srv, countDenied, domain.WindowsFromFirst), uniquePrefix(t)
		rule := domain.Rule{Limit: 50, Window: time.Minute}
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for i := range 200 {
			wg.Go(func() {
				req := one(fmt.Sprintf("%stenant-%d", prefix, i%2), rule)
				v, err := lim.Allow(t.Context(), req, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if v.Allowed {
					admitted.Add(1)
				}
			})
		}
		wg.Wait()
		if got, want := admitted.Load(), int64(2*50); got != want {
			t.Errorf("CountDenied=%v: admitted %d of 200 requests over two tenants with limit 50, want %d", countDenied, got, want)
		}
		if n := srv.checkTTLs(t, prefix+"*", 2*rule.Window); n != 2 {
			t.Errorf("found %d keys under %s*, want 2", n, prefix)
		}
		if countDenied {
			if got := srv.Client.Get(t.Context(), prefix+"tenant-0").Val(); got != "100" {
				t.Errorf("counting denials: tenant-0's counter is %s after 100 requests, want 100", got)
			}
		}
	}
}

// TestRedisFixedWindowCommandsPerDecision: each decision is one EVALSHA,
// with PEXPIRE only on a window's first spend. It spends first, INCRBY
// then PTTL, both for the gateway's default (one limit counting denials)
// and a policy's limit (all or nothing), which takes a denial's spend
// back (DECRBY): two commands a decision it admits, three one it denies.
func TestRedisFixedWindowCommandsPerDecision(t *testing.T) {
	t.Parallel()
	srv := startRedis(t) // its own server: CONFIG RESETSTAT is global
	const keys, perKey, limit = 10, 20, 15
	const decisions = keys * perKey
	prefix := uniquePrefix(t)
	rule := domain.Rule{Limit: limit, Window: time.Minute}
	if _, err := fixedWindowBy(srv, true, domain.WindowsFromFirst).Allow(t.Context(), one(prefix+"warm-up", rule), nil); err != nil {
		t.Fatal(err) // loads the script; not counted
	}
	for _, countDenied := range []bool{true, false} {
		lim := fixedWindowBy(srv, countDenied, domain.WindowsFromFirst)
		srv.resetStats(t)
		p := fmt.Sprintf("%s%v:", prefix, countDenied)
		for i := range decisions {
			req := one(fmt.Sprintf("%s%d", p, i%keys), rule)
			if _, err := lim.Allow(t.Context(), req, nil); err != nil {
				t.Fatal(err)
			}
		}
		undone := int64(0)
		if !countDenied {
			undone = decisions - keys*limit
		}
		want := map[string]int64{"get": 0, "pttl": decisions, "incrby": decisions, "decrby": undone, "del": 0, "pexpire": keys, "evalsha": decisions, "eval": 0}
		got := srv.commandCalls(t)
		for cmd, n := range want {
			if got[cmd] != n {
				t.Errorf("CountDenied=%v: %d decisions on %d keys: %s called %d times, want %d (all: %v)", countDenied, decisions, keys, cmd, got[cmd], n, got)
			}
		}
	}
}

// TestRedisFixedWindowRepairsKeyWithoutTTL: a key that somehow has no
// TTL is given one by the next decision, never left to count forever.
func TestRedisFixedWindowRepairsKeyWithoutTTL(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	prefix := uniquePrefix(t)
	for _, countDenied := range []bool{false, true} {
		lim := fixedWindowBy(srv, countDenied, domain.WindowsFromFirst)
		key := fmt.Sprintf("%simmortal-%v", prefix, countDenied)
		if err := srv.Client.Set(t.Context(), key, 5, 0).Err(); err != nil {
			t.Fatal(err)
		}
		req := one(key, domain.Rule{Limit: 10, Window: time.Minute})
		v, err := lim.Allow(t.Context(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := v.Decisions[0]; !d.Allowed || d.Remaining != 4 || d.ResetAfter <= 0 || d.ResetAfter > time.Minute+time.Millisecond {
			t.Errorf("a decision on a key without TTL: %+v; want allowed, remaining 4, reset in (0, 1m]", d)
		}
		if ttl := srv.Client.PTTL(t.Context(), key).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("PTTL after the decision = %v, want (0, 1m]", ttl)
		}
	}
}

// TestRedisFixedWindowRetryAfterNeverEarly: a denial's RetryAfter
// outlasts the key. Redis keeps a key until its clock in ms is past the
// expiry, up to a millisecond after its PTTL, so RetryAfter must be more
// than the PTTL, whatever the rule's window says: capped at the window,
// a denial in a window's first millisecond (PTTL + 1 ms past the window)
// would tell the client to come back a millisecond early. A TTL past the
// window makes that case certain here (half a second past, against a
// slow machine).
func TestRedisFixedWindowRetryAfterNeverEarly(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	prefix := uniquePrefix(t)
	rule := domain.Rule{Limit: 5, Window: 60 * time.Second}
	for _, countDenied := range []bool{false, true} {
		lim := fixedWindowBy(srv, countDenied, domain.WindowsFromFirst)
		key := fmt.Sprintf("%sfull-%v", prefix, countDenied)
		// A window just started and already spent.
		if err := srv.Client.Set(t.Context(), key, 5, rule.Window+500*time.Millisecond).Err(); err != nil {
			t.Fatal(err)
		}
		req := one(key, rule)
		v, err := lim.Allow(t.Context(), req, nil)
		if err != nil {
			t.Fatal(err)
		}
		d := v.Decisions[0]
		if d.Allowed || d.RetryAfter <= rule.Window-time.Second {
			t.Fatalf("%+v: want denied, RetryAfter about the window", d)
		}
		pttl := srv.Client.PTTL(t.Context(), key).Val()
		if d.RetryAfter <= pttl {
			t.Errorf("CountDenied=%v: RetryAfter %v ≤ the key's PTTL %v: a client that waits is early", countDenied, d.RetryAfter, pttl)
		}
		if got := domain.CeilSeconds(d.RetryAfter); got != 61 {
			t.Errorf("CountDenied=%v: Retry-After %d s, want 61 (the key lives past 60 s)", countDenied, got)
		}
	}
}

// TestRedisFixedWindowWrapsErrors: a store error names the algorithm and
// the key.
func TestRedisFixedWindowWrapsErrors(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	lim, prefix := fixedWindow(srv), uniquePrefix(t)
	key := prefix + "list"
	if err := srv.Client.RPush(t.Context(), key, "x").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := lim.Allow(t.Context(), one(key, domain.Rule{Limit: 1, Window: time.Minute}), nil)
	if err == nil || !strings.Contains(err.Error(), "redis: fixed_window "+key) || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("a decision on a list: err = %v, want redis: fixed_window %s: …WRONGTYPE…", err, key)
	}
}

// TestRedisFixedWindowAlignedKeys: a window aligned to the epoch (an
// Envoy descriptor's) gives a key found without a TTL one that ends with
// the window, whether the request is admitted or denied (a denial that
// does not count leaves its count as it was), and starts afresh a
// counter an earlier window left behind (one that expires before this
// window's middle: a window since shortened, say).
func TestRedisFixedWindowAlignedKeys(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	lim, prefix := fixedWindowBy(srv, false, domain.WindowsEpoch), uniquePrefix(t)
	const w = 10 * time.Second
	aligned := func(key string) domain.Request {
		return one(key, domain.Rule{Limit: 10, Window: w})
	}
	decide := func(key string) domain.Decision {
		v, err := lim.Allow(t.Context(), aligned(key), nil)
		if err != nil {
			t.Fatal(err)
		}
		return v.Decisions[0]
	}
	check := func(key, want string) {
		t.Helper()
		if got := srv.Client.Get(t.Context(), key).Val(); got != want {
			t.Errorf("%s holds %q, want %q", key, got, want)
		}
		if ttl := srv.Client.PTTL(t.Context(), key).Val(); ttl <= 0 || ttl > w {
			t.Errorf("%s: PTTL %v, want (0, %v]", key, ttl, w)
		}
	}
	// Early in a window, so that a TTL of a second ends before its middle.
	if e := time.Duration(time.Now().UnixNano() % int64(w)); e > w/4 {
		time.Sleep(w - e)
	}
	for name, val := range map[string]int{"immortal-full": 10, "immortal": 5} {
		if err := srv.Client.Set(t.Context(), prefix+name, val, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.Client.Set(t.Context(), prefix+"stale", 100, time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	if d := decide(prefix + "immortal-full"); d.Allowed || d.Remaining != 0 {
		t.Errorf("a full key without TTL: %+v, want denied, remaining 0", d)
	}
	check(prefix+"immortal-full", "10")
	if d := decide(prefix + "immortal"); !d.Allowed || d.Remaining != 4 {
		t.Errorf("a key without TTL at 5: %+v, want allowed, remaining 4", d)
	}
	check(prefix+"immortal", "6")
	if d := decide(prefix + "stale"); !d.Allowed || d.Remaining != 9 {
		t.Errorf("an earlier window's counter at 100: %+v, want allowed afresh, remaining 9", d)
	}
	check(prefix+"stale", "1")
	if ttl := srv.Client.PTTL(t.Context(), prefix+"stale").Val(); ttl <= time.Second {
		t.Errorf("the fresh counter's PTTL %v, want the window's end, past its old second", ttl)
	}
}

// TestRedisFullStillDenies: a Redis at its maxmemory under noeviction
// (what docs/policies.md recommends) refuses a script's first write. The
// shapes that spend first then leave the request to the path that reads
// first, so a request over its limit is still denied, not failed to the
// fail mode; one that would spend fails, as before.
func TestRedisFullStillDenies(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	lim, prefix := fixedWindow(srv), uniquePrefix(t)
	aligned := fixedWindowBy(srv, false, domain.WindowsEpoch)
	cal := domain.Calendar{Unit: domain.PeriodMonth}
	shapes := map[string]domain.Request{
		"a policy's limit": one(prefix+"policy", domain.Rule{Limit: 2, Window: time.Minute}),
		"two limits": {Tenant: "it", Route: "default", Limits: []domain.Limit{
			{Name: "wide", Rule: domain.Rule{Limit: 100, Window: time.Hour}, Key: prefix + "two-wide", Cost: 1},
			{Name: "narrow", Rule: domain.Rule{Limit: 2, Window: time.Minute}, Key: prefix + "two-narrow", Cost: 1}}},
		"aligned to the epoch": one(prefix+"aligned", domain.Rule{Limit: 2, Window: time.Hour}),
		"a calendar month": {Tenant: "it", Route: "default", Limits: []domain.Limit{{Name: "monthly",
			Rule: domain.Rule{Limit: 2, Window: domain.NominalWindow(cal.Unit)}, Key: prefix + "monthly", Cost: 1, Calendar: &cal}}},
	}
	// The aligned shape is decided by a limiter of aligned windows.
	limFor := func(name string) ports.Limiter {
		if name == "aligned to the epoch" {
			return aligned
		}
		return lim
	}
	for name, req := range shapes {
		for range 2 {
			if v, err := limFor(name).Allow(t.Context(), req, nil); err != nil || !v.Allowed {
				t.Fatalf("%s, filling: %+v, %v", name, v, err)
			}
		}
	}
	ctx := t.Context()
	if err := srv.Client.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Client.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	defer srv.Client.ConfigSet(context.Background(), "maxmemory", "0")
	for name, req := range shapes {
		v, err := limFor(name).Allow(ctx, req, nil)
		if err != nil || v.Allowed {
			t.Errorf("%s, over its limit on a full Redis: %+v, %v; want denied", name, v, err)
		}
	}
	fresh := one(prefix+"fresh", domain.Rule{Limit: 2, Window: time.Minute})
	if _, err := lim.Allow(ctx, fresh, nil); err == nil || !strings.Contains(err.Error(), "OOM") {
		t.Errorf("a spend on a full Redis: err %v, want Redis's OOM error", err)
	}
	if n := srv.Client.Exists(ctx, prefix+"fresh").Val(); n != 0 {
		t.Errorf("the refused spend left its key")
	}
}

// TestRedisPolicyErrorSpendsNothing: a request whose second limit's key
// is of another type (written by something else) fails, and its first
// limit is left as it was: no key created, nothing spent.
func TestRedisPolicyErrorSpendsNothing(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	lim, prefix := fixedWindow(srv), uniquePrefix(t)
	if err := srv.Client.HSet(t.Context(), prefix+"hash", "f", "v").Err(); err != nil {
		t.Fatal(err)
	}
	req := domain.Request{Tenant: "it", Route: "default", Limits: []domain.Limit{
		{Name: "first", Rule: domain.Rule{Limit: 5, Window: time.Minute}, Key: prefix + "first", Cost: 1},
		{Name: "second", Rule: domain.Rule{Limit: 5, Window: time.Minute}, Key: prefix + "hash", Cost: 1}}}
	if _, err := lim.Allow(t.Context(), req, nil); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("a limit on a hash: err %v, want WRONGTYPE", err)
	}
	if n := srv.Client.Exists(t.Context(), prefix+"first").Val(); n != 0 {
		t.Errorf("the failed request left the first limit's key: %q", srv.Client.Get(t.Context(), prefix+"first").Val())
	}
}
