package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	goredis "github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	keylayout "github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/faces/rls"
)

// rlsConfig is the configuration of the rate limit service tests: key2
// 20 per minute, key3 1 per hour, quota and shadow rules.
const rlsConfig = `domain: d
descriptors:
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: key3
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: plan
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
`

// rlsGateway runs a gateway serving only Envoy's rate limit service on
// redisURL with environ added, and returns it and a client of it.
func rlsGateway(t *testing.T, redisURL string, environ ...string) (*apptest.Gateway, pb.RateLimitServiceClient) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rls.yaml"), []byte(rlsConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startReplica(t, redisURL, append([]string{"TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_RLS_ADDR=127.0.0.1:0",
		"TOLLGATE_RLS_CONFIG=" + dir, "TOLLGATE_REDIS_TIMEOUT=2s"}, environ...)...)
	conn, err := grpc.NewClient(g.RLS, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return g, pb.NewRateLimitServiceClient(conn)
}

// rlsDesc is a descriptor of one entry k=v, with hits of its own when
// hits is not negative.
func rlsDesc(k, v string, hits int64) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: k, Value: v}}}
	if hits >= 0 {
		d.HitsAddend = wrapperspb.UInt64(uint64(hits))
	}
	return d
}

// rlsAsk sends descriptors of domain d with request-level hits.
func rlsAsk(t *testing.T, c pb.RateLimitServiceClient, hits uint32, descs ...*ratelimitv3.RateLimitDescriptor) *pb.RateLimitResponse {
	t.Helper()
	resp, err := c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "d", HitsAddend: hits, Descriptors: descs})
	if err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	return resp
}

// floodBound is how much store work a denied flood of n may cost over
// took: 5% of the denials, or perSecond a second where the flood took
// longer (the deny cache asks the store again once a second, and a
// loaded machine stretches the flood), but never a quarter of the
// denials: without the cache each denial costs the store at least one.
func floodBound(n int, perSecond float64, took time.Duration) float64 {
	return min(max(0.05*float64(n), perSecond*took.Seconds()), float64(n)/4)
}

// rlsKey is the store key of k=v in domain d under prefix.
func rlsKey(prefix, algorithm, k, v string, unit time.Duration) string {
	return string(keylayout.AppendDescriptorKey(nil, prefix, "d", algorithm, unit, []byte(k+"_"+v+"_")))
}

// count reads a fixed-window counter: 0 when absent.
func count(t *testing.T, rdb goredis.UniversalClient, key string) int {
	t.Helper()
	s, err := rdb.Get(context.Background(), key).Result()
	if err == goredis.Nil {
		return 0
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	n, _ := strconv.Atoi(s)
	return n
}

// TestRLSRedis: the rate limit service's guarantees on one Redis shared
// by two replicas.
func TestRLSRedis(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	rlsGuarantees(t, srv.Client, srv.URL)

	t.Run("a denied flood costs no store work", func(t *testing.T) {
		prefix := uniquePrefix(t)
		_, c := rlsGateway(t, srv.URL, "TOLLGATE_KEY_PREFIX="+prefix)
		rlsAsk(t, c, 0, rlsDesc("key3", "flood", -1))
		srv.resetStats(t)
		const flood = 2000
		start := time.Now()
		for range flood {
			if r := rlsAsk(t, c, 0, rlsDesc("key3", "flood", -1), rlsDesc("key2", "flood", -1)); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("flood: %v, want OVER_LIMIT", r)
			}
		}
		// Counted in scripts, not commands: the deny cache asks the store
		// once a second, and each ask of two descriptors runs about 11
		// commands, more than floodBound allows a second.
		took := time.Since(start)
		calls := srv.commandCalls(t)
		scripts := calls["evalsha"] + calls["eval"]
		if most := floodBound(flood, 2, took); float64(scripts) > most {
			t.Errorf("%d store scripts (%d commands in all) for %d denials over %v: %.3f per denial, want <= %v",
				scripts, srv.decisionCommands(t), flood, took, float64(scripts)/flood, most)
		}
	})

	t.Run("an outage: the local fail mode, then back on Redis", func(t *testing.T) {
		port := freePort(t)
		own := startRedis(t, withFixedHostPort(port))
		prefix := uniquePrefix(t)
		_, c := rlsGateway(t, fmt.Sprintf("redis://127.0.0.1:%d/0", port), "TOLLGATE_KEY_PREFIX="+prefix,
			"TOLLGATE_FAIL_MODE=local", "TOLLGATE_REPLICAS=2", "TOLLGATE_REDIS_TIMEOUT=100ms")
		if r := rlsAsk(t, c, 0, rlsDesc("key2", "out", -1)); r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].LimitRemaining != 19 {
			t.Fatalf("healthy: %v, want OK, 19 left of 20", r)
		}
		own.stop(t)
		for i := range 10 {
			if r := rlsAsk(t, c, 0, rlsDesc("key2", "out", -1)); r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 {
				t.Fatalf("request %d during the outage: %v, want OK against 20/2 = 10 in process", i+1, r)
			}
		}
		if r := rlsAsk(t, c, 0, rlsDesc("key2", "out", -1)); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("request 11 during the outage: %v, want OVER_LIMIT", r)
		}
		own.start(t)
		deadline := time.Now().Add(5 * time.Second)
		for {
			// Back on Redis: the budget of 20 (Redis was restarted empty).
			r := rlsAsk(t, c, 0, rlsDesc("key2", "back", -1))
			if r.OverallCode == pb.RateLimitResponse_OK && r.Statuses[0].CurrentLimit.GetRequestsPerUnit() == 20 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("5 s after Redis restarted: %v, want decisions on Redis again (20 per minute)", r)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n := count(t, own.Client, rlsKey(prefix, domain.AlgorithmFixedWindow, "key2", "back", time.Minute)); n < 1 {
			t.Errorf("key2=back's counter on Redis after the restart: %d, want at least 1", n)
		}
	})
}

// TestRLSCluster: the same guarantees on a Redis Cluster; every key of a
// request lives in its domain's slot.
func TestRLSCluster(t *testing.T) {
	t.Parallel()
	c := sharedClusterFor(t)
	rlsGuarantees(t, c.Client, c.Seed, "TOLLGATE_REDIS_MODE=cluster")

	t.Run("one request, one slot", func(t *testing.T) {
		prefix := uniquePrefix(t)
		_, rc := rlsGateway(t, c.Seed, "TOLLGATE_KEY_PREFIX="+prefix, "TOLLGATE_REDIS_MODE=cluster")
		descs := []*ratelimitv3.RateLimitDescriptor{rlsDesc("key2", "a", -1), rlsDesc("key2", "b", -1), rlsDesc("key3", "c", -1)}
		if r := rlsAsk(t, rc, 0, descs...); r.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("three descriptors on a cluster: %v, want OK", r)
		}
		keys := scanKeys(t, c.Client, prefix+"*")
		if len(keys) != 3 {
			t.Fatalf("keys %v, want 3", keys)
		}
		slot := func(k string) int64 {
			n, err := c.Client.ClusterKeySlot(context.Background(), k).Result()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		for _, k := range keys[1:] {
			if slot(k) != slot(keys[0]) {
				t.Errorf("keys %s and %s in slots %d and %d, want one", k, keys[0], slot(k), slot(keys[0]))
			}
		}
	})
}

// rlsGuarantees runs the tollgate-only guarantees of the rate limit
// service on rdb (at redisURL; environ added to every gateway).
func rlsGuarantees(t *testing.T, rdb goredis.UniversalClient, redisURL string, environ ...string) {
	gatewayAt := func(t *testing.T, url, prefix string, more ...string) (*apptest.Gateway, pb.RateLimitServiceClient) {
		return rlsGateway(t, url, append(append([]string{"TOLLGATE_KEY_PREFIX=" + prefix}, environ...), more...)...)
	}
	gateway := func(t *testing.T, prefix string, more ...string) pb.RateLimitServiceClient {
		_, c := gatewayAt(t, redisURL, prefix, more...)
		return c
	}
	// dead is a store that refuses every connection.
	dead := func(t *testing.T) string { return fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t)) }
	fw := domain.AlgorithmFixedWindow

	t.Run("a denied flood is answered from memory", func(t *testing.T) {
		g, c := gatewayAt(t, redisURL, uniquePrefix(t))
		rlsAsk(t, c, 0, rlsDesc("key3", "flood", -1))
		before := storeDecided(t, g)
		const flood = 2000
		start := time.Now()
		for range flood {
			if r := rlsAsk(t, c, 0, rlsDesc("key3", "flood", -1), rlsDesc("key2", "flood", -1)); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("flood: %v, want OVER_LIMIT", r)
			}
		}
		if n, most := storeDecided(t, g)-before, floodBound(flood, 3, time.Since(start)); n > most {
			t.Errorf("%v decisions on the store for a flood of %d denials over %v, want <= %v (the deny cache answers)", n, flood, time.Since(start), most)
		}
	})

	t.Run("local fail mode: limit/N in process", func(t *testing.T) {
		_, c := gatewayAt(t, dead(t), uniquePrefix(t), "TOLLGATE_FAIL_MODE=local", "TOLLGATE_REPLICAS=2", "TOLLGATE_REDIS_TIMEOUT=20ms")
		for i := range 10 {
			r := rlsAsk(t, c, 0, rlsDesc("key2", "local", -1))
			if r.OverallCode != pb.RateLimitResponse_OK || r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 10 {
				t.Fatalf("request %d with the store down: %v, want OK against 20/2 = 10", i+1, r)
			}
		}
		if r := rlsAsk(t, c, 0, rlsDesc("key2", "local", -1)); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("request 11 with the store down: %v, want OVER_LIMIT", r)
		}
	})

	t.Run("closed fail mode: UNAVAILABLE", func(t *testing.T) {
		_, c := gatewayAt(t, dead(t), uniquePrefix(t), "TOLLGATE_FAIL_MODE=closed", "TOLLGATE_REDIS_TIMEOUT=20ms")
		_, err := c.ShouldRateLimit(t.Context(), &pb.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("key2", "x", -1)}})
		if status.Code(err) != codes.Unavailable {
			t.Errorf("store down, fail mode closed: %v, want UNAVAILABLE", err)
		}
	})

	t.Run("the breaker: a failing store is not asked per request", func(t *testing.T) {
		const timeout = 20 * time.Millisecond
		g, c := gatewayAt(t, dead(t), uniquePrefix(t), "TOLLGATE_FAIL_MODE=open", "TOLLGATE_REDIS_TIMEOUT="+timeout.String())
		start, asked := time.Now(), 0
		for ; time.Since(start) < time.Second; asked++ {
			if r := rlsAsk(t, c, 0, rlsDesc("key2", "b", -1)); r.OverallCode != pb.RateLimitResponse_OK {
				t.Fatalf("request %d, store down, fail mode open: %v, want OK", asked+1, r)
			}
		}
		errs := metric(t, g, "tollgate_store_errors_total") + metric(t, g, "tollgate_store_probe_failures_total")
		took := time.Since(start)
		t.Logf("a second of a failing store: %d requests, %v failed store calls", asked, errs)
		if metric(t, g, "tollgate_store_up") != 0 || metric(t, g, "tollgate_store_breaker_opens_total") < 1 {
			t.Errorf("store down: tollgate_store_up %v, breaker opens %v; want 0 and at least 1",
				metric(t, g, "tollgate_store_up"), metric(t, g, "tollgate_store_breaker_opens_total"))
		}
		// The store's calls are the first failures until the breaker
		// opens (each a deadline, then the confirming ping) and a probe
		// per interval after: a number set by the time gone by, not by
		// the requests, which a loaded machine makes fewer. A store
		// asked per request fails as many calls as there were requests.
		// A loaded machine delays the breaker's own timers (twice the
		// bound), and a store asked per request fails about as many calls
		// as there were requests: the two are told apart by far.
		firsts := (timeout+layers.MinConfirmTimeout)/timeout + 1
		maxErrs := 2 * float64(firsts+took/layers.DefaultProbeInterval+5)
		if errs < 1 || errs > maxErrs || errs*4 >= float64(asked) {
			t.Errorf("%v failed store calls for %d requests in %v, want a few probes (at most %v, far fewer than the requests)", errs, asked, took, maxErrs)
		}
	})

	t.Run("TOLLGATE_RLS_RESPONSE_HEADERS from the store's counts", func(t *testing.T) {
		prefix := uniquePrefix(t)
		a, b := gateway(t, prefix, "TOLLGATE_RLS_RESPONSE_HEADERS=true"), gateway(t, prefix, "TOLLGATE_RLS_RESPONSE_HEADERS=true")
		rlsAsk(t, a, 0, rlsDesc("key2", "h", -1))
		rlsAsk(t, b, 0, rlsDesc("key2", "h", -1))
		r := rlsAsk(t, a, 0, rlsDesc("key2", "h", -1), rlsDesc("key3", "h", -1))
		headers := map[string]string{}
		for _, h := range r.ResponseHeadersToAdd {
			headers[h.Key] = h.Value
		}
		// key3 (1 per hour, none left) has the fewest remaining.
		reset, _ := strconv.Atoi(headers[rls.HeaderReset])
		if headers[rls.HeaderLimit] != "1" || headers[rls.HeaderRemaining] != "0" || reset < 1 || reset > 3600 {
			t.Errorf("headers %v, want key3's: limit 1, remaining 0, reset within the hour", headers)
		}
		r = rlsAsk(t, b, 0, rlsDesc("key2", "h", -1))
		if got := r.ResponseHeadersToAdd; len(got) != 3 || got[1].Value != "16" {
			t.Errorf("the fourth key2=h over two replicas: headers %v, want 16 remaining of 20", got)
		}
	})

	t.Run("all or nothing, on two replicas", func(t *testing.T) {
		prefix := uniquePrefix(t)
		a, b := gateway(t, prefix), gateway(t, prefix)
		both := []*ratelimitv3.RateLimitDescriptor{rlsDesc("key3", "m", -1), rlsDesc("key2", "m", -1)}
		if r := rlsAsk(t, a, 0, both...); r.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("first: %v, want OK", r)
		}
		r := rlsAsk(t, b, 0, both...)
		if r.OverallCode != pb.RateLimitResponse_OVER_LIMIT || r.Statuses[1].LimitRemaining != 19 {
			t.Errorf("second, on the other replica: %v, want OVER_LIMIT, key2 unspent (19)", r)
		}
		if n := count(t, rdb, rlsKey(prefix, fw, "key2", "m", time.Minute)); n != 1 {
			t.Errorf("key2's counter %d after a denied request, want 1", n)
		}
		// A quota descriptor alone over denies, spending nothing beside it.
		rlsAsk(t, a, 0, rlsDesc("plan", "m", -1))
		if r := rlsAsk(t, b, 0, rlsDesc("plan", "m", -1), rlsDesc("key2", "q", -1)); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("the only quota over: %v, want OVER_LIMIT", r)
		}
		if n := count(t, rdb, rlsKey(prefix, fw, "key2", "q", time.Minute)); n != 0 {
			t.Errorf("key2=q's counter %d beside a denying quota, want 0", n)
		}
	})

	t.Run("TOLLGATE_RLS_COUNT_DENIED counts every descriptor", func(t *testing.T) {
		prefix := uniquePrefix(t)
		c := gateway(t, prefix, "TOLLGATE_RLS_COUNT_DENIED=true")
		both := []*ratelimitv3.RateLimitDescriptor{rlsDesc("key3", "m", -1), rlsDesc("key2", "m", -1)}
		for range 3 {
			rlsAsk(t, c, 0, both...)
		}
		if n, m := count(t, rdb, rlsKey(prefix, fw, "key3", "m", time.Hour)), count(t, rdb, rlsKey(prefix, fw, "key2", "m", time.Minute)); n != 3 || m != 3 {
			t.Errorf("counters after 3 requests, 2 denied: key3 %d, key2 %d; want 3 and 3 (INCRBY on every descriptor)", n, m)
		}
	})

	t.Run("windows aligned to the epoch, every key with a TTL", func(t *testing.T) {
		prefix := uniquePrefix(t)
		c := gateway(t, prefix)
		rlsAsk(t, c, 0, rlsDesc("key2", "e", -1), rlsDesc("key3", "e", -1), rlsDesc("shadow", "e", 5))
		for _, k := range []struct {
			key  string
			unit time.Duration
		}{{rlsKey(prefix, fw, "key2", "e", time.Minute), time.Minute}, {rlsKey(prefix, fw, "key3", "e", time.Hour), time.Hour}} {
			at, err := rdb.PExpireTime(context.Background(), k.key).Result()
			if err != nil {
				t.Fatalf("PEXPIRETIME %s: %v", k.key, err)
			}
			if ms := at.Milliseconds(); ms <= 0 || ms%k.unit.Milliseconds() != 0 {
				t.Errorf("key %s expires at %v ms, want a multiple of %v since the epoch", k.key, ms, k.unit)
			}
		}
		// The shadow descriptor's 5 hits over its 2 are counted.
		if n := count(t, rdb, rlsKey(prefix, fw, "shadow", "e", time.Minute)); n != 5 {
			t.Errorf("the shadow counter %d, want 5", n)
		}
		if n := checkTTLs(t, rdb, prefix+"*", time.Hour); n != 3 {
			t.Errorf("checked %d keys, want 3", n)
		}
	})

	t.Run("bad input creates no key", func(t *testing.T) {
		prefix := uniquePrefix(t)
		c := gateway(t, prefix)
		for _, req := range []*pb.RateLimitRequest{
			{Domain: "d"},
			{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{rlsDesc("key2", "x", -1), rlsDesc("", "x", -1)}},
			{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{{}}},
		} {
			if _, err := c.ShouldRateLimit(t.Context(), req); status.Code(err) != codes.InvalidArgument {
				t.Errorf("%v: %v, want INVALID_ARGUMENT", req, err)
			}
		}
		if keys := scanKeys(t, rdb, prefix+"*"); len(keys) != 0 {
			t.Errorf("keys %v after bad input, want none", keys)
		}
	})

	t.Run("a report larger than the budget is charged", func(t *testing.T) {
		// Envoy AI Gateway's pattern: a check of 0 hits, then the tokens
		// used. A report past what remains is denied and counted all the
		// same, so that the next check hears the budget is spent.
		prefix := uniquePrefix(t)
		c := gateway(t, prefix)
		if r := rlsAsk(t, c, 1, rlsDesc("key2", "ai", 0)); r.OverallCode != pb.RateLimitResponse_OK {
			t.Fatalf("a check with the budget whole: %v, want OK", r)
		}
		if r := rlsAsk(t, c, 1e9, rlsDesc("key2", "ai", -1)); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("hits 1e9: %v, want OVER_LIMIT", r)
		}
		if n := count(t, rdb, rlsKey(prefix, fw, "key2", "ai", time.Minute)); n != 1e9 {
			t.Errorf("the counter after a report of 1e9: %d, want it charged", n)
		}
		if r := rlsAsk(t, c, 1, rlsDesc("key2", "ai", 0)); r.OverallCode != pb.RateLimitResponse_OVER_LIMIT {
			t.Errorf("a check after the budget was spent: %v, want OVER_LIMIT", r)
		}
		if n := checkTTLs(t, rdb, prefix+"*", time.Hour); n != 1 {
			t.Errorf("checked %d keys, want 1", n)
		}
	})

	for _, algorithm := range domain.AlgorithmNames() {
		if algorithm == fw {
			continue // the default: every test above
		}
		t.Run(algorithm, func(t *testing.T) {
			prefix := uniquePrefix(t)
			c := gateway(t, prefix, "TOLLGATE_ALGORITHM="+algorithm)
			for i := range 20 {
				if r := rlsAsk(t, c, 0, rlsDesc("key2", "alg", -1)); r.OverallCode != pb.RateLimitResponse_OK {
					t.Fatalf("request %d: %v, want OK", i+1, r)
				}
			}
			r := rlsAsk(t, c, 0, rlsDesc("key2", "alg", -1), rlsDesc("key2", "other", -1))
			if r.OverallCode != pb.RateLimitResponse_OVER_LIMIT || r.Statuses[1].LimitRemaining != 20 {
				t.Errorf("21st beside another: %v, want OVER_LIMIT, the other unspent (20)", r)
			}
			if keys := scanKeys(t, rdb, rlsKey(prefix, algorithm, "key2", "other", time.Minute)); len(keys) != 0 {
				t.Errorf("the unspent descriptor has keys %v, want none", keys)
			}
			checkTTLs(t, rdb, prefix+"*", 2*time.Minute)
		})
		for _, every := range []bool{false, true} {
			t.Run(algorithm+": Envoy AI Gateway's check, then report"+map[bool]string{true: ", counting denied hits"}[every], func(t *testing.T) {
				prefix := uniquePrefix(t)
				more := []string{"TOLLGATE_ALGORITHM=" + algorithm}
				if every {
					more = append(more, "TOLLGATE_RLS_COUNT_DENIED=true")
				}
				c := gateway(t, prefix, more...)
				check := func() pb.RateLimitResponse_Code {
					return rlsAsk(t, c, 1, rlsDesc("key2", "ai", 0)).OverallCode
				}
				report := func(n uint32) pb.RateLimitResponse_Code {
					return rlsAsk(t, c, n, rlsDesc("key2", "ai", -1)).OverallCode
				}
				// key2 allows 20 a minute: 12 used, then 15 reported past the 8 left.
				if check() != pb.RateLimitResponse_OK || report(12) != pb.RateLimitResponse_OK || check() != pb.RateLimitResponse_OK {
					t.Fatal("within the budget: want OK")
				}
				if got := report(15); got != pb.RateLimitResponse_OVER_LIMIT {
					t.Errorf("a report past what remains: %v, want OVER_LIMIT", got)
				}
				if got := check(); got != pb.RateLimitResponse_OVER_LIMIT {
					t.Errorf("a check after the budget was spent: %v, want OVER_LIMIT (the report was charged)", got)
				}
				checkTTLs(t, rdb, prefix+"*", 2*time.Minute)
			})
		}
	}
}

// storeDecided is how many of g's decisions the store answered (allowed
// or denied, any algorithm): not the deny cache's.
func storeDecided(t *testing.T, g *apptest.Gateway) float64 {
	t.Helper()
	var n float64
	for series, v := range scrape(t, g) {
		if strings.HasPrefix(series, "tollgate_decisions_total{") &&
			(strings.Contains(series, `outcome="allowed"`) || strings.Contains(series, `outcome="denied"`)) {
			n += v
		}
	}
	return n
}
