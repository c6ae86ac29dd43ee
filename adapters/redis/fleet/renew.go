package fleet

import (
	"context"
	"fmt"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tollgate/tollgate/adapters/redis/conn"
)

// The leases' renewer: one pipeline of every slot held, per node, every
// LeaseOptions.Interval (a third of the lease by default), and the
// removal of orphaned slots (see [Leases]).

// kickRenewer wakes the renewer to remove the orphans.
func (ls *Leases) kickRenewer() {
	select {
	case ls.kick <- struct{}{}:
	default:
	}
}

// run renews every Interval, and removes orphans as they come.
func (ls *Leases) run() {
	defer close(ls.done)
	t := time.NewTicker(ls.opts.Interval)
	defer t.Stop()
	for {
		renew := false
		select {
		case <-ls.stop:
			return
		case <-t.C:
			renew = true
		case <-ls.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), ls.opts.Interval)
		err := ls.round(ctx, renew)
		cancel()
		if err != nil && ls.opts.OnError != nil {
			ls.opts.OnError(err)
		}
	}
}

// Renew renews every slot this replica holds now, and removes the
// orphans, in one pipeline (one round trip per node): what the renewer
// does every Interval. It returns the first error.
func (ls *Leases) Renew(ctx context.Context) error { return ls.round(ctx, true) }

// round removes the orphans and, with renew, renews every slot held.
func (ls *Leases) round(ctx context.Context, renew bool) error {
	ls.mu.Lock()
	orphans := ls.orphans
	ls.orphans = nil
	var cmds []*goredis.Cmd
	var scripts []*conn.Script
	if renew {
		byKey := make(map[string][]any)
		for s := range ls.held {
			byKey[s.key] = append(byKey[s.key], s.holder)
		}
		cmds = make([]*goredis.Cmd, 0, len(byKey)+len(orphans))
		for k, holders := range byKey {
			a := renewScript.Args(1, 1+len(holders))
			a = append(append(a, k, ls.leaseMs), holders...)
			cmds = append(cmds, goredis.NewCmd(ctx, a...))
			scripts = append(scripts, renewScript)
		}
	}
	ls.mu.Unlock()
	renewals := len(cmds)
	for _, o := range orphans {
		cmds = append(cmds, goredis.NewCmd(ctx, releaseArgs(o.keys, o.holder)...))
		scripts = append(scripts, releaseScript)
	}
	if len(cmds) == 0 {
		return nil
	}
	ls.c.EvalAll(ctx, cmds, scripts)
	var first error
	now := time.Now()
	for i, cmd := range cmds {
		err := cmd.Err()
		if err != nil && first == nil {
			first = err
		}
		if i < renewals {
			continue
		}
		// An orphan is done once Redis removed it, or its lease passed;
		// else it is removed again at the next round.
		if o := orphans[i-renewals]; now.Before(o.until) {
			if n, _ := cmd.Int64(); err != nil || n == 0 {
				ls.mu.Lock()
				ls.orphans = append(ls.orphans, o)
				ls.mu.Unlock()
			}
		}
	}
	if first != nil {
		return fmt.Errorf("redis: renewing concurrency slots: %w", first)
	}
	return nil
}
