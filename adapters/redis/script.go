package redis

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"net"

	goredis "github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFiles embed.FS

// script is one embedded Lua script, run with EVALSHA through the
// client's coalescer (concurrent decisions share round trips) and a
// transparent EVAL when Redis lacks it (after SCRIPT FLUSH, a restart or
// a failover).
type script struct {
	src    string
	sha    string // SHA-1 of src, in hex: EVALSHA's name for it
	shaArg any    // sha, boxed once
	name   string // for errors: "sliding_log"
}

// prelude is what every limiter script starts with (lua/prelude.lua),
// and generalPath what it ends with (lua/run.lua).
var prelude, generalPath = mustRead("prelude.lua"), mustRead("run.lua")

// newScript returns the script of lua/<name>.lua; withPrelude, a
// limiter's: the prelude, the algorithm's body, then the general path.
func newScript(name string, withPrelude bool) *script {
	src := mustRead(name + ".lua")
	if withPrelude {
		src = limiterSource(src)
	}
	sha := goredis.NewScript(src).Hash()
	return &script{src: src, sha: sha, shaArg: sha, name: name}
}

// limiterSource is a limiter script around body (lua/<algorithm>.lua):
// the prelude's shapes return before the body, the body's before the
// general path.
func limiterSource(body string) string { return prelude + "\n" + body + "\n" + generalPath }

func mustRead(file string) string {
	b, err := luaFiles.ReadFile("lua/" + file)
	if err != nil {
		panic("redis: missing embedded script " + file) // a build defect
	}
	return string(b)
}

// runArgs runs s on c with b's arguments (EVALSHA sha numkeys keys...
// args...: the caller builds them) and returns its reply's integers, read
// into b, of which there must be want. reusable reports whether b may go back to the pool once the reply is
// used: the call is over (a caller that gave up may leave it queued or
// in flight, still to be written).
func (s *script) runArgs(ctx context.Context, c *Client, b *args, want int) (vals []int64, reusable bool, err error) {
	cmd := goredis.NewCmd(ctx, b.a...)
	err = c.eval(ctx, cmd, s.src)
	if err == nil {
		reusable = true
		var ok bool
		if vals, ok = b.replyInts(cmd.Val()); !ok {
			err = fmt.Errorf("script returned %T, want integers", cmd.Val())
		}
	}
	if err == nil && len(vals) != want {
		err = fmt.Errorf("script returned %d values, want %d", len(vals), want)
	}
	if err != nil {
		return nil, reusable, fmt.Errorf("redis: %s %s: %w", s.name, argString(b.a[3]), err)
	}
	return vals, true, nil
}

// argString is an argument as the error messages show it.
func argString(a any) string {
	if p, ok := a.(*string); ok {
		return *p
	}
	return fmt.Sprint(a)
}

// start appends EVALSHA s and its number of keys to b.
func (s *script) start(b *args, keys int) {
	b.a = append(b.a, "evalsha", s.shaArg)
	b.int(int64(keys))
}

// cmdArgs returns the arguments of an EVALSHA of s on keys, with room for
// extra more arguments after the keys.
func (s *script) cmdArgs(keys, extra int) []any {
	a := make([]any, 3, 3+keys+extra)
	a[0], a[1], a[2] = "evalsha", s.shaArg, keys
	return a
}

// allScripts are the scripts the gateway runs, loaded on every server by
// Warm.
func allScripts() []*script {
	out := []*script{replicasScript, renewScript, releaseScript}
	for _, sp := range specs {
		out = append(out, sp.script)
	}
	return out
}

// processor is what runs one command: a client, or ClientOptions.Send.
type processor interface {
	Process(ctx context.Context, cmd goredis.Cmder) error
}

// once is cmd, which go-redis never sends twice once it may have run: a
// script that ran but whose reply was lost would count twice. Without it
// a ClusterClient sends a command, or a node's whole pipeline, again
// after a network error or a read timeout, up to MaxRedirects times,
// whatever MaxRetries says. A redirect (MOVED, ASK) is still followed,
// and so is what go-redis retries where the script did not run: an
// error reply (TRYAGAIN mid-reshard, CLUSTERDOWN, LOADING, MASTERDOWN)
// or a connection never made (a dial error). The reply lands on cmd.
type once struct{ *goredis.Cmd }

// NoRetry tells go-redis not to send the command again, unless its
// error says it did not run. (A pipeline is sent again only when none of
// its commands says no: one that succeeded, or was lost, keeps the whole
// batch from being sent twice.)
func (o once) NoRetry() bool { return !notRun(o.Err()) }

// notRun reports whether err, a command's, says the command did not run:
// an error reply, or a connection never made.
func notRun(err error) bool {
	if err == nil {
		return false
	}
	var op *net.OpError
	return isReply(err) || (errors.As(err, &op) && op.Op == "dial")
}

// processScript runs cmd, an EVALSHA of the script src, on p, and once
// more as EVAL of src when Redis has lost the script (NOSCRIPT: it did
// not run). Neither is ever sent twice ([once]). The reply is cmd's; it
// returns cmd.Err().
func processScript(ctx context.Context, p processor, cmd *goredis.Cmd, src string) error {
	_ = p.Process(ctx, once{cmd})
	if isNoScript(cmd.Err()) {
		retry := evalOf(ctx, cmd, src)
		_ = p.Process(ctx, once{retry})
		adopt(cmd, retry)
	}
	return cmd.Err()
}

// isReply reports whether err is an error reply from Redis.
func isReply(err error) bool {
	var rerr goredis.Error
	return errors.As(err, &rerr)
}

// isNoScript reports whether err is Redis's NOSCRIPT: the script cache
// does not hold the script (SCRIPT FLUSH, a restart, a failover).
func isNoScript(err error) bool { return err != nil && goredis.HasErrorPrefix(err, "NOSCRIPT") }

// evalOf returns the EVAL of src with evalsha's keys and arguments.
func evalOf(ctx context.Context, evalsha *goredis.Cmd, src string) *goredis.Cmd {
	args := append([]any(nil), evalsha.Args()...)
	args[0], args[1] = "eval", src
	return goredis.NewCmd(ctx, args...)
}

// adopt gives cmd the reply (or error) of retry.
func adopt(cmd, retry *goredis.Cmd) {
	cmd.SetErr(retry.Err())
	cmd.SetVal(retry.Val())
}
