package redis

import (
	"context"
	"embed"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/domain"
)

//go:embed scripts/*.lua
var scripts embed.FS

// Key suffixes of the limiters: each algorithm's key is the key it is
// given (prefix + tenant, as the fixed window uses it) plus its suffix.
// A tenant id holds no ':', so no algorithm's key is ever another's, and
// switching algorithms on a live Redis never meets a WRONGTYPE.
const (
	SlidingLogSuffix    = ":sliding_log"
	SlidingWindowSuffix = ":sliding_window"
	TokenBucketSuffix   = ":token_bucket"
)

// script is what the Redis limiters share: one embedded Lua script that
// makes a whole decision atomically on one key, run with EVALSHA and a
// transparent EVAL when Redis lacks it (after SCRIPT FLUSH or a restart).
type script struct {
	client  goredis.Scripter
	lua     *goredis.Script
	name    string // the algorithm, for errors: "sliding log"
	suffix  string
	replies int // integers the script returns
	opts    Options
}

func newScript(client goredis.Scripter, file, name, suffix string, replies int, opts Options) script {
	src, err := scripts.ReadFile("scripts/" + file)
	if err != nil {
		panic("redis: missing embedded script " + file) // a build defect
	}
	return script{client: client, lua: goredis.NewScript(string(src)), name: name, suffix: suffix, replies: replies, opts: opts}
}

// run runs the script on key's derived key with args, within the
// per-decision timeout, and returns its integer replies.
func (s *script) run(ctx context.Context, key string, args ...any) ([]int64, error) {
	ctx, cancel := s.opts.withTimeout(ctx)
	defer cancel()
	vals, err := s.lua.Run(ctx, s.client, []string{key + s.suffix}, args...).Int64Slice()
	if err == nil && len(vals) != s.replies {
		err = fmt.Errorf("script returned %d values, want %d", len(vals), s.replies)
	}
	if err != nil {
		return nil, fmt.Errorf("redis: %s %q: %w", s.name, key, err)
	}
	return vals, nil
}

// micros returns d in whole µs, at least 1: the scripts' resolution.
func micros(d time.Duration) int64 { return max(int64(d/time.Microsecond), 1) }

// usDur returns n µs as a Duration.
func usDur(n int64) time.Duration { return time.Duration(n) * time.Microsecond }

// atMicros returns rule with its window truncated to the scripts' µs, so
// the domain's arithmetic in Go and the script's agree exactly.
func atMicros(rule domain.Rule) domain.Rule {
	rule.Window = usDur(micros(rule.Window))
	return rule
}

// ceilMicros rounds a denied decision's RetryAfter up to a whole µs: the
// script sees time in µs, so a wait that ends mid-µs could come back a
// µs early.
func ceilMicros(d domain.Decision) domain.Decision {
	d.RetryAfter = (d.RetryAfter + time.Microsecond - 1).Truncate(time.Microsecond)
	return d
}

// scriptVerdict makes d, the domain's reading of a script's reply, carry
// the script's own verdict (allowed is its 0 or 1). The script decided and
// wrote atomically; Go's exact arithmetic only fills in the headers. They
// agree except where the script's doubles round (limit × window in µs
// past 2^53), and then what Redis recorded must win: a request the script
// admitted is counted, one it denied is not.
func scriptVerdict(d domain.Decision, allowed int64) domain.Decision {
	if d.Allowed == (allowed == 1) {
		return d
	}
	d.Allowed = allowed == 1
	if d.Allowed {
		d.RetryAfter = 0
	} else {
		d.Remaining = 0
		d.RetryAfter = max(d.RetryAfter, time.Microsecond)
	}
	return d
}
