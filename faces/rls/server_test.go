package rls_test

import (
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/faces/rls"
)

// TestMatching: envoyproxy/ratelimit's precedence (exact value, then the
// key alone), the depth rule, current_limit with its name, remaining and
// the time to the end of the epoch-aligned window.
func TestMatching(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	check(t, "nested default", f.ask(t, rq("test-domain", 0, desc("key1=value1", "subkey1=x"))), ok,
		st{ok, lim(5, second, ""), 4, 1})
	check(t, "nested value", f.ask(t, rq("test-domain", 0, desc("key1=value1", "subkey1=subvalue1"))), ok,
		st{ok, lim(10, second, ""), 9, 1})
	check(t, "a value beats the default", f.ask(t, rq("test-domain", 0, desc("key2=value2"), desc("key2=other"))), ok,
		st{ok, lim(30, minute, ""), 29, 50}, st{ok, lim(20, minute, ""), 19, 50})
	check(t, "a whitelisted value, a name", f.ask(t, rq("test-domain", 0, desc("key2=value3"), desc("key4=x"))), ok,
		none, st{ok, lim(1, dayU, "key4_rate_limit"), 0, 86400 - 12*3600 - 10})
	// The first level has no rule of its own, and deeper than the
	// configuration matches nothing.
	check(t, "no rule at this depth", f.ask(t, rq("test-domain", 0, desc("key1=value1"), desc("key2=value2", "sub=x"))), ok,
		none, none)
	check(t, "unknown key", f.ask(t, rq("test-domain", 0, desc("nothing=here"))), ok, none)
}

// TestUnknownDomain: OK without limits, even for a descriptor with its
// own override, and nothing is asked of the store.
func TestUnknownDomain(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	for range 3 {
		check(t, "unknown domain", f.ask(t, rq("foo_domain", 0, desc("key2=x"), withLimit(desc("key2=x"), 1, typev3.RateLimitUnit_SECOND))), ok,
			none, none)
	}
	if n := f.calls.count(); n != 0 {
		t.Errorf("store called %d times for an unknown domain, want 0", n)
	}
}

// TestErrors: an empty domain or descriptor list gets envoyproxy/ratelimit's
// message; every malformed request an INVALID_ARGUMENT; none reaches the
// store.
func TestErrors(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	long := strings.Repeat("d", rls.MinDomainLen+1)
	tests := []struct {
		name string
		req  *pb.RateLimitRequest
		msg  string // "" : any
	}{
		{"empty domain", rq("", 0, desc("key2=x")), "rate limit domain must not be empty"},
		{"no descriptors", rq("test-domain", 0), "rate limit descriptor list must not be empty"},
		{"a descriptor without entries", rq("test-domain", 0, desc("key2=x"), desc()), ""},
		{"an empty key", rq("test-domain", 0, desc("key1=value1", "=x")), ""},
		{"a domain longer than any", rq(long, 0, desc("key2=x")), ""},
		{"override unit UNKNOWN", rq("test-domain", 0, withLimit(desc("key2=x"), 5, typev3.RateLimitUnit_UNKNOWN)), ""},
		{"override unit 9", rq("test-domain", 0, withLimit(desc("key2=x"), 5, 9)), ""},
		{"override unit 257", rq("test-domain", 0, withLimit(desc("key2=x"), 5, 257)), ""},
		{"too many descriptors", rq("test-domain", 0, manyDescs(rls.MaxDescriptors+1)...), ""},
		{"a descriptor over 16 KiB", rq("test-domain", 0, desc("key2="+strings.Repeat("v", rls.MaxDescriptorBytes-3))),
			"rate limit descriptor 0: 16385 bytes of keys and values, more than 16384"},
	}
	for _, tt := range tests {
		_, err := f.ShouldRateLimit(t.Context(), tt.req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", tt.name, err)
			continue
		}
		if msg := status.Convert(err).Message(); tt.msg != "" && msg != tt.msg {
			t.Errorf("%s: message %q, want %q", tt.name, msg, tt.msg)
		}
	}
	if n := f.calls.count(); n != 0 {
		t.Errorf("store called %d times for malformed requests, want 0", n)
	}
	// The bounds are not off by one.
	f.ask(t, rq("test-domain", 0, manyDescs(rls.MaxDescriptors)...))
	f.ask(t, rq(long[1:], 0, desc("key2=x")))
	f.ask(t, rq("test-domain", 0, desc("key2="+strings.Repeat("v", rls.MaxDescriptorBytes-4))))
}

func manyDescs(n int) []*ratelimitv3.RateLimitDescriptor {
	var ds []*ratelimitv3.RateLimitDescriptor
	for i := range n {
		ds = append(ds, desc("key2=v"+string(rune('a'+i%26))+string(rune('a'+i/26))))
	}
	return ds
}

// TestHugeHits: on a face without a settler, a hits_addend of 10⁹ (or
// 2⁶⁴−1) is decided, denied, and spends nothing (with one, a denied
// report is charged: engine/reports.go).
func TestHugeHits(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	check(t, "request hits 1e9", f.ask(t, rq("test-domain", 1e9, desc("key2=huge"))), over,
		st{over, lim(20, minute, ""), 0, 50})
	check(t, "descriptor hits 2^64-1", f.ask(t, rq("test-domain", 0, withHits(desc("key2=huge"), math.MaxUint64))), over,
		st{over, lim(20, minute, ""), 0, 50})
	check(t, "nothing was spent", f.ask(t, rq("test-domain", 0, desc("key2=huge"))), ok,
		st{ok, lim(20, minute, ""), 19, 50})
}

// TestHits: the request's hits_addend (0 counts as 1), a descriptor's
// own (it wins; 0 checks without spending), one descriptor twice.
func TestHits(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	r20 := lim(20, minute, "")
	check(t, "hits 0 counts as 1", f.ask(t, rq("test-domain", 0, desc("key2=h"))), ok, st{ok, r20, 19, 50})
	check(t, "hits 5", f.ask(t, rq("test-domain", 5, desc("key2=h"))), ok, st{ok, r20, 14, 50})
	check(t, "the descriptor's 0 checks", f.ask(t, rq("test-domain", 5, withHits(desc("key2=h"), 0), desc("key2=i"))), ok,
		st{ok, r20, 14, 50}, st{ok, r20, 15, 50})
	check(t, "the descriptor's 2 wins", f.ask(t, rq("test-domain", 5, withHits(desc("key2=h"), 2))), ok, st{ok, r20, 12, 50})
	check(t, "one descriptor twice adds up", f.ask(t, rq("test-domain", 0, desc("key2=h"), desc("key2=h"))), ok,
		st{ok, r20, 11, 50}, st{ok, r20, 10, 50})
	check(t, "a check after a hit of the same counter sees it", f.ask(t, rq("test-domain", 0, desc("key2=h"), withHits(desc("key2=h"), 0))), ok,
		st{ok, r20, 9, 50}, st{ok, r20, 9, 50})
}

// TestOverride: a descriptor's own limit replaces the rule, applies where
// nothing matches, of 0 denies, and shares the rule's counter (same
// entries, same unit).
func TestOverride(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	for i := range 3 {
		check(t, "override", f.ask(t, rq("test-domain", 0, withLimit(desc("key1=value1", "subkey1=o"), 3, typev3.RateLimitUnit_MINUTE))), ok,
			st{ok, lim(3, minute, ""), uint32(2 - i), 50})
	}
	check(t, "override over", f.ask(t, rq("test-domain", 0, withLimit(desc("key1=value1", "subkey1=o"), 3, typev3.RateLimitUnit_MINUTE))), over,
		st{over, lim(3, minute, ""), 0, 50})
	check(t, "where nothing matches", f.ask(t, rq("test-domain", 0, withLimit(desc("nothing=here"), 2, typev3.RateLimitUnit_HOUR))), ok,
		st{ok, lim(2, hourU, ""), 1, 3600 - 10})
	check(t, "0 denies", f.ask(t, rq("test-domain", 0, withLimit(desc("key2=o0"), 0, typev3.RateLimitUnit_DAY))), over,
		st{over, lim(0, dayU, ""), 0, 86400 - 12*3600 - 10})
	f.ask(t, rq("test-domain", 2, desc("key2=shared")))
	check(t, "shares the rule's counter", f.ask(t, rq("test-domain", 0, withLimit(desc("key2=shared"), 3, typev3.RateLimitUnit_MINUTE))), ok,
		st{ok, lim(3, minute, ""), 0, 50})
	check(t, "the rule after", f.ask(t, rq("test-domain", 0, desc("key2=shared"))), ok, st{ok, lim(20, minute, ""), 16, 50})
	check(t, "the week unit (7)", f.ask(t, rq("test-domain", 0, withLimit(desc("wk=1"), 1, 7))), ok,
		st{ok, lim(1, pb.RateLimitResponse_RateLimit_WEEK, ""), 0, weekLeft()})
}

// weekLeft is the time from t0 to the end of its epoch-aligned week.
func weekLeft() int64 {
	const week = 7 * 86400
	return week - t0.Unix()%week
}

// TestUnlimited: OK with the largest remaining, no current_limit, and no
// store work.
func TestUnlimited(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	for range 3 {
		check(t, "unlimited", f.ask(t, rq("test-domain", 1000, desc("key6=x"))), ok, st{code: ok, remaining: math.MaxUint32, reset: -1})
	}
	if n := f.calls.count(); n != 0 {
		t.Errorf("store called %d times for an unlimited descriptor, want 0", n)
	}
}

// TestZeroRequestsPerUnit: every hit over; a check within, remaining 0;
// counting denials, a check after a hit is over (a counter above 0).
func TestZeroRequestsPerUnit(t *testing.T) {
	t.Parallel()
	for _, countDenied := range []bool{false, true} {
		f := newFaceWith(t, basicYAML, faceOptions{countDenied: countDenied})
		z := lim(0, minute, "")
		check(t, "a hit", f.ask(t, rq("test-domain", 0, desc("zero=1"))), over, st{over, z, 0, 50})
		check(t, "a check of another", f.ask(t, rq("test-domain", 0, withHits(desc("zero=2"), 0))), ok, st{ok, z, 0, 50})
		want := st{ok, z, 0, 50}
		wantOverall := ok
		if countDenied {
			want.code, wantOverall = over, over
		}
		check(t, "a check after a hit", f.ask(t, rq("test-domain", 0, withHits(desc("zero=1"), 0))), wantOverall, want)
	}
}

// TestReplaces: a matched rule drops the rules it replaces, by name;
// an unlimited rule replaces too.
func TestReplaces(t *testing.T) {
	t.Parallel()
	f := newFace(t, replacesYAML)
	check(t, "a replaces b, b replaces c", f.ask(t, rq("replaces", 0, desc("a=1"), desc("b=1"), desc("c=1"))), ok,
		st{ok, lim(1, minute, "a"), 0, 50}, none, none)
	check(t, "b alone replaces c", f.ask(t, rq("replaces", 0, desc("b=1"), desc("c=1"))), ok,
		st{ok, lim(5, minute, "b"), 4, 50}, none)
	check(t, "unlimited replaces c", f.ask(t, rq("replaces", 0, desc("u=1"), desc("c=1"))), ok,
		st{code: ok, remaining: math.MaxUint32, reset: -1}, none)
	check(t, "c alone", f.ask(t, rq("replaces", 0, desc("c=1"))), ok, st{ok, lim(7, minute, "c"), 6, 50})
}

// TestShadow: a shadow rule over its limit answers OK (remaining 0) and
// counts, as envoyproxy/ratelimit counts it: a later smaller hit is over
// too.
func TestShadow(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	s2 := lim(2, minute, "")
	check(t, "shadow over beside a limit within", f.ask(t, rq("test-domain", 3, desc("shadow=y"), desc("key2=value2"))), ok,
		st{ok, s2, 0, 50}, st{ok, lim(30, minute, ""), 27, 50})
	check(t, "counted: a hit of 1 is over too, answered OK", f.ask(t, rq("test-domain", 0, desc("shadow=y"))), ok, st{ok, s2, 0, 50})
}

// TestQuota: a quota descriptor over alone denies; one of two does not;
// a shadow quota descriptor never counts as over.
func TestQuota(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	p2, b3, s1 := lim(2, minute, ""), lim(3, minute, ""), lim(1, minute, "")
	f.ask(t, rq("test-domain", 2, desc("plan=a")))
	check(t, "the only quota over", f.ask(t, rq("test-domain", 0, desc("plan=a"))), over, st{over, p2, 0, 50})
	check(t, "one quota of two over", f.ask(t, rq("test-domain", 0, desc("plan=a"), desc("burst=a"))), ok,
		st{over, p2, 0, 50}, st{ok, b3, 2, 50})
	f.ask(t, rq("test-domain", 2, desc("burst=a")))
	check(t, "both over", f.ask(t, rq("test-domain", 0, desc("plan=a"), desc("burst=a"))), over,
		st{over, p2, 0, 50}, st{over, b3, 0, 50})
	f.ask(t, rq("test-domain", 1, desc("soft=a")))
	check(t, "a shadow quota keeps them from denying", f.ask(t, rq("test-domain", 0, desc("soft=a"), desc("plan=a"))), ok,
		st{ok, s1, 0, 50}, st{over, p2, 0, 50})
	check(t, "beside a limit over", f.ask(t, rq("test-domain", 0, withHits(desc("burst=b"), 0), desc("key3=q"), desc("key3=q"))), over,
		// (the first key3 would fit; denied, it spent nothing: 1 left)
		st{ok, b3, 3, 50}, st{ok, lim(1, hourU, ""), 1, 3600 - 10}, st{over, lim(1, hourU, ""), 0, 3600 - 10})
}

// TestAllOrNothing: tollgate's default: a denied request spends nothing
// from its other descriptors. TOLLGATE_RLS_COUNT_DENIED counts every
// descriptor's hits, as envoyproxy/ratelimit.
func TestAllOrNothing(t *testing.T) {
	t.Parallel()
	for _, countDenied := range []bool{false, true} {
		f := newFaceWith(t, basicYAML, faceOptions{countDenied: countDenied})
		h1, r20 := lim(1, hourU, ""), lim(20, minute, "")
		check(t, "within", f.ask(t, rq("test-domain", 0, desc("key3=m"), desc("key2=m"))), ok,
			st{ok, h1, 0, 3600 - 10}, st{ok, r20, 19, 50})
		resp := f.ask(t, rq("test-domain", 0, desc("key3=m"), desc("key2=m")))
		left := uint32(19) // nothing spent
		if countDenied {
			left = 18
		}
		check(t, "one over", resp, over, st{over, h1, 0, 3600 - 10}, st{ok, r20, left, 50})
		left-- // this request's hit
		check(t, "the other alone", f.ask(t, rq("test-domain", 0, desc("key2=m"))), ok, st{ok, r20, left, 50})
	}
}

// TestEpochWindows: windows end at multiples of the unit since the
// epoch, whenever their first hit came; a second's always reports 1 s.
func TestEpochWindows(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	r20 := lim(20, minute, "")
	f.clock.Advance(39*time.Second + 500*time.Millisecond) // t0+39.5s: 49.5s into the minute
	check(t, "first hit late in a minute", f.ask(t, rq("test-domain", 0, desc("key2=e"))), ok, st{ok, r20, 19, 11})
	check(t, "a second", f.ask(t, rq("test-domain", 0, desc("key1=value1", "subkey1=e"))), ok, st{ok, lim(5, second, ""), 4, 1})
	f.clock.Advance(10*time.Second + 500*time.Millisecond) // the next minute
	check(t, "the next minute counts afresh", f.ask(t, rq("test-domain", 0, desc("key2=e"))), ok, st{ok, r20, 19, 60})
}

// TestResponseHeaders: RateLimit-Limit/-Remaining/-Reset of the most
// constrained descriptor: the fewest remaining, else one over its limit.
func TestResponseHeaders(t *testing.T) {
	t.Parallel()
	f := newFaceWith(t, basicYAML, faceOptions{opts: rls.Options{ResponseHeaders: true}})
	resp := f.ask(t, rq("test-domain", 0, desc("key2=value2"), desc("key2=x"), desc("key6=u"), desc("nothing=x")))
	checkHeaders(t, "fewest remaining", resp, "20", "19", "50")
	f.ask(t, rq("test-domain", 0, desc("key3=x")))
	f.ask(t, rq("test-domain", 0, desc("key4=x")))
	// key4 (checked) has 0 left first; key3, over, wins.
	resp = f.ask(t, rq("test-domain", 0, desc("key2=value2"), withHits(desc("key4=x"), 0), desc("key3=x"), desc("key2=x")))
	checkHeaders(t, "over", resp, "1", "0", "3590")
	if resp := f.ask(t, rq("test-domain", 0, desc("nothing=x"), desc("key6=u"))); resp.ResponseHeadersToAdd != nil {
		t.Errorf("no limited descriptor: headers %v, want none", resp.ResponseHeadersToAdd)
	}
	g := newFace(t, basicYAML)
	if resp := g.ask(t, rq("test-domain", 0, desc("key2=x"))); resp.ResponseHeadersToAdd != nil {
		t.Errorf("headers off: %v, want none", resp.ResponseHeadersToAdd)
	}
}

func checkHeaders(t *testing.T, step string, resp *pb.RateLimitResponse, limit, remaining, reset string) {
	t.Helper()
	want := map[string]string{rls.HeaderLimit: limit, rls.HeaderRemaining: remaining, rls.HeaderReset: reset}
	if len(resp.ResponseHeadersToAdd) != len(want) {
		t.Fatalf("%s: headers %v, want %v", step, resp.ResponseHeadersToAdd, want)
	}
	for _, h := range resp.ResponseHeadersToAdd {
		if want[h.Key] != h.Value {
			t.Errorf("%s: header %s: %q, want %q", step, h.Key, h.Value, want[h.Key])
		}
	}
}

// TestSetConfig: a new configuration applies to the next request.
func TestSetConfig(t *testing.T) {
	t.Parallel()
	f := newFace(t, basicYAML)
	check(t, "before", f.ask(t, rq("replaces", 0, desc("c=1"))), ok, none)
	f.SetConfig(parse(t, replacesYAML))
	check(t, "after", f.ask(t, rq("replaces", 0, desc("c=1"))), ok, st{ok, lim(7, minute, "c"), 6, 50})
	check(t, "the old domain is gone", f.ask(t, rq("test-domain", 0, desc("key2=x"))), ok, none)
}
