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

// Options configure a Redis store. The zero value is usable.
type Options struct {
	// Timeout is the deadline for the store work of one decision, on top
	// of the caller's context. Zero means the context's deadline only.
	Timeout time.Duration
}

// script is what the Redis stores share: one embedded Lua script that
// makes a whole decision atomically over the keys of one request (one
// tenant, so one Cluster slot), run with EVALSHA and a transparent EVAL
// when Redis lacks it (after SCRIPT FLUSH or a restart).
type script struct {
	client *Client
	lua    *goredis.Script
	name   string // the algorithm, for errors: "sliding log"
	opts   Options
}

func newScript(c *Client, file, name string, opts Options) script {
	src, err := scripts.ReadFile("scripts/" + file)
	if err != nil {
		panic("redis: missing embedded script " + file) // a build defect
	}
	return script{client: c, lua: goredis.NewScript(string(src)), name: name, opts: opts}
}

// run runs the script on keys with args, within the per-decision
// timeout, and returns its integer replies, of which there must be want.
func (s *script) run(ctx context.Context, keys []string, want int, args ...any) ([]int64, error) {
	if s.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	vals, err := s.lua.Run(ctx, s.client.rdb, keys, args...).Int64Slice()
	if err == nil && len(vals) != want {
		err = errReply(len(vals), want)
	}
	if err != nil {
		return nil, fmt.Errorf("redis: %s %q: %w", s.name, keys[0], err)
	}
	return vals, nil
}

// keysAndArgs returns req's keys, and the script's arguments: the cost,
// then per limit the values perLimit returns for its rule, then the
// limits' shadow flags as one string, a '1' or '0' per key ("01": the
// second limit is in shadow mode). Every script reads the flags from
// its last argument: a shadow key's denial does not deny the request,
// and a key spends only when the request is admitted and that key
// admits it ([domain.Settle]).
func keysAndArgs(req domain.Request, perLimit func(domain.Rule) []any) ([]string, []any) {
	keys := make([]string, len(req.Limits))
	args := make([]any, 1, 2+3*len(req.Limits))
	args[0] = req.Cost
	var shadow [16]byte
	flags := shadow[:0]
	for i, l := range req.Limits {
		keys[i] = l.Key
		args = append(args, perLimit(l.Rule)...)
		if l.Shadow {
			flags = append(flags, '1')
		} else {
			flags = append(flags, '0')
		}
	}
	return keys, append(args, string(flags))
}

// settle turns a script's reply into the Verdict: r[0] is 1 when the
// script admitted the request (and spent from every key), then stride
// values per limit. decide reads limit i's values at cost; ok, if not
// nil, returns the script's own verdict for limit i, which wins over Go's
// reading of its reply where the script's doubles rounded differently.
func settle(req domain.Request, r []int64, decide func(i int, cost int64) domain.Decision, ok func(i int) bool) (domain.Verdict, error) {
	v := domain.Settle(req, func(i int, cost int64) domain.Decision {
		d := decide(i, cost)
		if ok != nil && cost == req.Cost {
			d = scriptVerdict(d, ok(i))
		}
		return d
	})
	if admitted := r[0] == 1; admitted != v.Allowed {
		// What Redis recorded and Go's reading of it disagree: a
		// defect, reported rather than guessed at.
		return domain.Verdict{}, fmt.Errorf("redis: %q: the script's verdict %v disagrees with its reply %v", req.Limits[0].Key, admitted, r)
	}
	return v, nil
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
// the script's own verdict for its limit. The script decided and wrote
// atomically; Go's exact arithmetic only fills in the headers. They agree
// except where the script's doubles round (limit × window in µs past
// 2^53), and then what Redis recorded must win.
func scriptVerdict(d domain.Decision, allowed bool) domain.Decision {
	if d.Allowed == allowed {
		return d
	}
	d.Allowed = allowed
	if allowed {
		d.RetryAfter = 0
	} else {
		d.Remaining = 0
		d.RetryAfter = max(d.RetryAfter, time.Microsecond)
	}
	return d
}
