package conn

import (
	"context"
	"errors"
	"net"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// Script is a Lua script the client runs with EVALSHA, through the
// coalescer (concurrent decisions share round trips), and with a
// transparent EVAL when Redis lacks it (after SCRIPT FLUSH, a restart or
// a failover). It is immutable.
type Script struct {
	name   string // for errors: "sliding_log"
	src    string
	shaArg any // SHA-1 of src, in hex (EVALSHA's name for it), boxed once
}

// registry is every script made by NewScript: what Warm loads.
var registry struct {
	mu  sync.Mutex // guards all
	all []*Script
}

// NewScript returns the script src, called name in errors, and records
// it: [Client.Warm] loads every script made, so that decisions run as
// EVALSHA from the first one. Call it to initialise a package variable.
func NewScript(name, src string) *Script {
	s := &Script{name: name, src: src, shaArg: goredis.NewScript(src).Hash()}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.all = append(registry.all, s)
	return s
}

// scripts returns every script made by NewScript.
func scripts() []*Script {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return append([]*Script(nil), registry.all...)
}

// Name returns the script's name.
func (s *Script) Name() string { return s.name }

// AppendCall appends EVALSHA, the script's SHA-1 and keys, the number
// of keys that follow, to a: the head of a command of s.
func (s *Script) AppendCall(a []any, keys int) []any {
	return append(a, "evalsha", s.shaArg, int64(keys))
}

// Args returns the head of a command of s (AppendCall), with room for
// keys keys and extra arguments after it.
func (s *Script) Args(keys, extra int) []any {
	return s.AppendCall(make([]any, 0, 3+keys+extra), keys)
}

// Eval runs cmd, a command of s ([Script.Args]), as one atomic unit, and
// falls back to EVAL of s when Redis has lost the script (NOSCRIPT). The
// reply is cmd's; the error is cmd.Err(), or ctx's. The decision's
// timeout ([Options.Timeout]) runs from its send (the coalescer), or
// from now without one.
func (c *Client) Eval(ctx context.Context, cmd *goredis.Cmd, s *Script) error {
	return c.eval(ctx, cmd, s.src)
}

// EvalAll runs cmds, commands of the scripts of the same index, as one
// pipeline (one round trip per node) beside the coalescer, and those
// Redis lacked (NOSCRIPT: they did not run) once more as EVAL with their
// source. Errors land on each command. Background work uses it (the
// leases' renewals), never a decision.
func (c *Client) EvalAll(ctx context.Context, cmds []*goredis.Cmd, scripts []*Script) {
	run := func(cs []*goredis.Cmd) {
		pipe := c.rdb.Pipeline()
		for _, cmd := range cs {
			_ = pipe.Process(ctx, cmd)
		}
		_, _ = pipe.Exec(ctx)
	}
	run(cmds)
	var again []*goredis.Cmd
	var of []int
	for i, cmd := range cmds {
		if isNoScript(cmd.Err()) {
			again = append(again, evalOf(ctx, cmd, scripts[i].src))
			of = append(of, i)
		}
	}
	if len(again) == 0 {
		return
	}
	run(again)
	for j, r := range again {
		adopt(cmds[of[j]], r)
	}
}

// processor is what runs one command: a client, or Options.Send.
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
