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

// fakeScripter answers every script run with reply (or err), and records
// the keys and arguments it was given. Behaviour against a real Redis is
// tested in integration/.
type fakeScripter struct {
	goredis.Scripter // nil: methods other than EvalSha panic
	reply            []any
	err              error
	keys             []string
	args             []any
	deadline         bool
}

func (f *fakeScripter) EvalSha(ctx context.Context, _ string, keys []string, args ...any) *goredis.Cmd {
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
	name, errName, suffix string
	new                   func(goredis.Scripter, redis.Options) ports.Limiter
}{
	{"sliding_log", "sliding log", redis.SlidingLogSuffix, func(c goredis.Scripter, o redis.Options) ports.Limiter { return redis.NewSlidingLog(c, o) }},
	{"sliding_window", "sliding window", redis.SlidingWindowSuffix, func(c goredis.Scripter, o redis.Options) ports.Limiter { return redis.NewSlidingWindow(c, o) }},
	{"token_bucket", "token bucket", redis.TokenBucketSuffix, func(c goredis.Scripter, o redis.Options) ports.Limiter { return redis.NewTokenBucket(c, o) }},
}

// TestLimiterDecisions checks how each limiter turns its script's integer
// replies (µs of Redis time) into a Decision, and what it sends.
func TestLimiterDecisions(t *testing.T) {
	t.Parallel()
	rule := domain.Rule{Limit: 10, Window: time.Minute}
	tests := []struct {
		algo     string
		reply    []any
		wantArgs []any
		want     domain.Decision
	}{
		{"sliding_log", []any{int64(3), int64(20e6), int64(1e6)}, []any{int64(10), int64(60e6), int64(60e3)},
			domain.Decision{Allowed: true, Limit: 10, Remaining: 6, ResetAfter: time.Minute}},
		{"sliding_log", []any{int64(10), int64(45e6), int64(5e6)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 55 * time.Second, RetryAfter: 15 * time.Second}},
		{"sliding_window", []any{int64(10), int64(2), int64(15e6), int64(1)}, []any{int64(10), int64(60e6)},
			domain.Decision{Allowed: true, Limit: 10, Remaining: 0, ResetAfter: 105 * time.Second}},
		// 10×(60s − x)/60s + 3 < 10 once x > 18s: 3s + 1ns, a whole µs.
		{"sliding_window", []any{int64(10), int64(3), int64(15e6), int64(0)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 105 * time.Second, RetryAfter: 3*time.Second + time.Microsecond}},
		{"token_bucket", []any{int64(0), int64(1)}, []any{int64(10), int64(6e6)},
			domain.Decision{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 6 * time.Second}},
		{"token_bucket", []any{int64(58e6), int64(0)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 58 * time.Second, RetryAfter: 4 * time.Second}},
		// Where the script's verdict disagrees with Go's reading of its
		// reply (its doubles rounded), what Redis recorded wins.
		{"sliding_window", []any{int64(10), int64(3), int64(15e6), int64(1)}, nil,
			domain.Decision{Allowed: true, Limit: 10, ResetAfter: 105 * time.Second}},
		{"sliding_window", []any{int64(10), int64(2), int64(15e6), int64(0)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 105 * time.Second, RetryAfter: time.Microsecond}},
		{"token_bucket", []any{int64(58e6), int64(1)}, nil,
			domain.Decision{Allowed: true, Limit: 10, ResetAfter: 58 * time.Second}},
		{"token_bucket", []any{int64(0), int64(0)}, nil,
			domain.Decision{Limit: 10, ResetAfter: 6 * time.Second, RetryAfter: time.Microsecond}},
	}
	for i, tt := range tests {
		for _, l := range limiters {
			if l.name != tt.algo {
				continue
			}
			f := &fakeScripter{reply: tt.reply}
			got, err := l.new(f, redis.Options{}).Allow(t.Context(), "rl:acme", rule)
			if err != nil {
				t.Fatalf("step %d: %s: %v", i, tt.algo, err)
			}
			if got != tt.want {
				t.Errorf("step %d: %s: reply %v: %+v, want %+v", i, tt.algo, tt.reply, got, tt.want)
			}
			if want := "rl:acme" + l.suffix; len(f.keys) != 1 || f.keys[0] != want {
				t.Errorf("step %d: %s: keys %q, want [%q]", i, tt.algo, f.keys, want)
			}
			if tt.wantArgs != nil && !equalArgs(f.args, tt.wantArgs) {
				t.Errorf("step %d: %s: args %v, want %v", i, tt.algo, f.args, tt.wantArgs)
			}
		}
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

// TestLimiterKeysAreDistinct: switching algorithms on a live Redis must
// never meet another algorithm's key (WRONGTYPE), the fixed window's
// <prefix><tenant> included.
func TestLimiterKeysAreDistinct(t *testing.T) {
	t.Parallel()
	seen := map[string]string{"rl:acme": "fixed_window"}
	for _, l := range limiters {
		key := "rl:acme" + l.suffix
		if other, ok := seen[key]; ok {
			t.Errorf("%s and %s share key %q", l.name, other, key)
		}
		seen[key] = l.name
		if rest := strings.TrimPrefix(key, "rl:"); domain.ValidTenantID(rest) {
			t.Errorf("%s key %q is also a fixed-window key of tenant %q", l.name, key, rest)
		}
	}
}

func TestLimiterWrapsErrors(t *testing.T) {
	t.Parallel()
	for _, l := range limiters {
		f := &fakeScripter{err: context.DeadlineExceeded}
		d, err := l.new(f, redis.Options{Timeout: time.Second}).Allow(t.Context(), "rl:acme", domain.Rule{Limit: 1, Window: time.Second})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: error %v, want one wrapping context.DeadlineExceeded", l.name, err)
		}
		if want := `redis: ` + l.errName + ` "rl:acme": `; err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: error %q, want prefix %q", l.name, err, want)
		}
		if d != (domain.Decision{}) {
			t.Errorf("%s: decision on error %+v, want the zero value", l.name, d)
		}
		if !f.deadline {
			t.Errorf("%s: the script ran without the per-decision deadline", l.name)
		}
		// A reply of the wrong shape is an error too, never a decision.
		f = &fakeScripter{reply: []any{int64(1)}}
		if _, err := l.new(f, redis.Options{}).Allow(t.Context(), "rl:acme", domain.Rule{Limit: 1, Window: time.Second}); err == nil {
			t.Errorf("%s: a one-value reply gave no error", l.name)
		}
	}
}
