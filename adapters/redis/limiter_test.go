package redis_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// fakeRedis answers every script run with reply (or err), and records
// the keys and arguments it was given. Behaviour against a real Redis is
// tested in integration/.
type fakeRedis struct {
	goredis.UniversalClient // nil: methods other than EvalSha panic
	reply                   []any
	err                     error
	keys                    []string
	args                    []any
	deadline                bool
}

func (f *fakeRedis) EvalSha(ctx context.Context, _ string, keys []string, args ...any) *goredis.Cmd {
	f.keys, f.args = keys, args
	_, f.deadline = ctx.Deadline()
	cmd := goredis.NewCmd(ctx)
	if f.err != nil {
		cmd.SetErr(f.err)
	} else {
		cmd.SetVal(f.reply)
	}
	return cmd
}

var limiters = []struct {
	name, errName string
	new           func(*redis.Client, redis.Options) ports.Limiter
}{
	{"fixed_window", "fixed window", func(c *redis.Client, o redis.Options) ports.Limiter { return redis.NewFixedWindow(c, o) }},
	{"sliding_log", "sliding log", func(c *redis.Client, o redis.Options) ports.Limiter { return redis.NewSlidingLog(c, o) }},
	{"sliding_window", "sliding window", func(c *redis.Client, o redis.Options) ports.Limiter { return redis.NewSlidingWindow(c, o) }},
	{"token_bucket", "token bucket", func(c *redis.Client, o redis.Options) ports.Limiter { return redis.NewTokenBucket(c, o) }},
}

func newLimiter(t *testing.T, algo string, f *fakeRedis, opts redis.Options) ports.Limiter {
	t.Helper()
	for _, l := range limiters {
		if l.name == algo {
			return l.new(redis.NewClient(f), opts)
		}
	}
	t.Fatalf("no limiter %s", algo)
	return nil
}

func request(cost int64, rules ...domain.Rule) domain.Request {
	req := domain.Request{Tenant: "acme", Route: "default", Cost: cost}
	for i, r := range rules {
		name := []string{"default", "per-day"}[i]
		req.Limits = append(req.Limits, domain.Limit{Name: name, Rule: r, Key: domain.Key("rl:", "acme", "x", "", name)})
	}
	return req
}

// TestLimiterDecisions checks how each limiter turns its script's integer
// replies (µs of Redis time, ms for fixed window) into decisions, and
// what it sends.
func TestLimiterDecisions(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	tests := []struct {
		algo     string
		reply    []any
		wantArgs []any
		want     domain.Decision
	}{
		{"fixed_window", []any{int64(1), int64(3), int64(20e3)}, []any{int64(1), int64(10), int64(60e3), "0"},
			domain.Decision{Allowed: true, Limit: 10, Remaining: 6, ResetAfter: 20*time.Second + time.Millisecond}},
		{"fixed_window", []any{int64(1), int64(0), int64(-2)}, nil,
			domain.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: time.Minute}},
		{"fixed_window", []any{int64(0), int64(10), int64(5e3)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 5*time.Second + time.Millisecond, RetryAfter: 5*time.Second + time.Millisecond}},
		{"sliding_log", []any{int64(1), int64(3), int64(20e6), int64(1e6)}, []any{int64(1), int64(10), int64(60e6), int64(60e3), "0"},
			domain.Decision{Allowed: true, Limit: 10, Remaining: 6, ResetAfter: time.Minute}},
		{"sliding_log", []any{int64(0), int64(10), int64(45e6), int64(5e6)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 55 * time.Second, RetryAfter: 15 * time.Second}},
		{"sliding_window", []any{int64(1), int64(10), int64(2), int64(15e6), int64(1)}, []any{int64(1), int64(10), int64(60e6), "0"},
			domain.Decision{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 105 * time.Second}},
		// 10×(60s − x)/60s + 3 < 10 once x > 18s: 3s + 1ns, a whole µs.
		{"sliding_window", []any{int64(0), int64(10), int64(3), int64(15e6), int64(0)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 105 * time.Second, RetryAfter: 3*time.Second + time.Microsecond}},
		{"token_bucket", []any{int64(1), int64(0), int64(1)}, []any{int64(1), int64(10), int64(6e6), "0"},
			domain.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 6 * time.Second}},
		{"token_bucket", []any{int64(0), int64(58e6), int64(0)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 58 * time.Second, RetryAfter: 4 * time.Second}},
		// Where the script's verdict disagrees with Go's reading of its
		// reply (its doubles rounded), what Redis recorded wins.
		{"sliding_window", []any{int64(1), int64(10), int64(3), int64(15e6), int64(1)}, nil,
			domain.Decision{Allowed: true, Limit: 10, ResetAfter: 105 * time.Second}},
		{"sliding_window", []any{int64(0), int64(10), int64(2), int64(15e6), int64(0)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 105 * time.Second, RetryAfter: time.Microsecond}},
		{"token_bucket", []any{int64(1), int64(58e6), int64(1)}, nil,
			domain.Decision{Allowed: true, Limit: 10, ResetAfter: 58 * time.Second}},
		{"token_bucket", []any{int64(0), int64(0), int64(0)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 6 * time.Second, RetryAfter: time.Microsecond}},
	}
	for i, tt := range tests {
		f := &fakeRedis{reply: tt.reply}
		req := request(1, rule)
		v, err := newLimiter(t, tt.algo, f, redis.Options{}).Allow(t.Context(), req)
		if err != nil {
			t.Fatalf("step %d: %s: %v", i, tt.algo, err)
		}
		if len(v.Decisions) != 1 || v.Decisions[0] != tt.want || v.Allowed != tt.want.Allowed {
			t.Errorf("step %d: %s: reply %v: %+v, want %+v", i, tt.algo, tt.reply, v, tt.want)
		}
		if len(f.keys) != 1 || f.keys[0] != req.Limits[0].Key {
			t.Errorf("step %d: %s: keys %q, want [%q]", i, tt.algo, f.keys, req.Limits[0].Key)
		}
		if tt.wantArgs != nil && !equalArgs(f.args, tt.wantArgs) {
			t.Errorf("step %d: %s: args %v, want %v", i, tt.algo, f.args, tt.wantArgs)
		}
	}
}

// TestLimiterSeveralLimits: one script over both keys; a denial by one
// limit reports the other with nothing spent.
func TestLimiterSeveralLimits(t *testing.T) {
	t.Parallel()
	small, big := domain.Rule{Limit: 3, Window: time.Minute}, domain.Rule{Limit: 100, Window: time.Hour}
	f := &fakeRedis{reply: []any{int64(0), int64(3), int64(30e3), int64(40), int64(1800e3)}}
	v, err := newLimiter(t, "fixed_window", f, redis.Options{}).Allow(t.Context(), request(1, small, big))
	if err != nil {
		t.Fatal(err)
	}
	if v.Allowed || v.Outcome != domain.OutcomeDenied || len(v.Decisions) != 2 {
		t.Fatalf("verdict %+v, want denied with two decisions", v)
	}
	if d := v.Decisions[1]; !d.Allowed || d.Remaining != 60 {
		t.Errorf("the admitting limit: %+v, want allowed with 60 remaining (nothing spent)", d)
	}
	if len(f.keys) != 2 || !equalArgs(f.args, []any{int64(1), int64(3), int64(60e3), int64(100), int64(3600e3), "00"}) {
		t.Errorf("keys %q args %v", f.keys, f.args)
	}
	// A script verdict that disagrees with its own reply is an error.
	f = &fakeRedis{reply: []any{int64(1), int64(3), int64(30e3), int64(40), int64(1800e3)}}
	if _, err := newLimiter(t, "fixed_window", f, redis.Options{}).Allow(t.Context(), request(1, small, big)); err == nil {
		t.Error("admitted by the script over a full limit: no error")
	}
}

// TestLimiterShadowFlags: the script learns which limits are in shadow
// mode from its last argument, and a shadow limit's denial leaves the
// request admitted (the script's verdict agrees: no error).
func TestLimiterShadowFlags(t *testing.T) {
	t.Parallel()
	small, big := domain.Rule{Limit: 3, Window: time.Minute}, domain.Rule{Limit: 100, Window: time.Hour}
	req := request(1, small, big)
	req.Limits[0].Shadow = true
	f := &fakeRedis{reply: []any{int64(1), int64(3), int64(30e3), int64(40), int64(1800e3)}}
	v, err := newLimiter(t, "fixed_window", f, redis.Options{}).Allow(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Allowed || v.Outcome != domain.OutcomeShadowDenied || v.Decisions[0].Allowed || !v.Decisions[0].Shadow {
		t.Errorf("verdict %+v, want admitted as shadow_denied, the shadow limit denying", v)
	}
	if !equalArgs(f.args, []any{int64(1), int64(3), int64(60e3), int64(100), int64(3600e3), "10"}) {
		t.Errorf("args %v, want the shadow flags \"10\" last", f.args)
	}
}

func equalArgs(a, b []any) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestLimiterWrapsErrors(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 1, Window: time.Second}
	for _, l := range limiters {
		f := &fakeRedis{err: context.DeadlineExceeded}
		v, err := newLimiter(t, l.name, f, redis.Options{Timeout: time.Second}).Allow(t.Context(), request(1, rule))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: error %v, want one wrapping context.DeadlineExceeded", l.name, err)
		}
		if want := `redis: ` + l.errName + ` "rl:{acme}:x": `; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %q, want prefix %q", l.name, err, want)
		}
		if v.Allowed || v.Decisions != nil {
			t.Errorf("%s: verdict on error %+v, want the zero value", l.name, v)
		}
		if !f.deadline {
			t.Errorf("%s: the script ran without the per-decision deadline", l.name)
		}
		// A reply of the wrong shape is an error too, never a decision.
		f = &fakeRedis{reply: []any{int64(1)}}
		if _, err := newLimiter(t, l.name, f, redis.Options{}).Allow(t.Context(), request(1, rule)); err == nil {
			t.Errorf("%s: a one-value reply gave no error", l.name)
		}
	}
}
