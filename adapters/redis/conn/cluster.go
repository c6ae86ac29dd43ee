package conn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// reloadBackstop is how stale the cluster client lets its slot map get
// without any error to prompt a reload. Errors prompt one at once
// ([reloadOnFailure]); this only catches what no request stumbles over.
const reloadBackstop = 5 * time.Second

// reloadTimeout bounds each call of a background reload of the slot map
// (CLUSTER SLOTS on one node).
const reloadTimeout = time.Second

// newClusterClient returns the go-redis cluster client of o, tuned by
// [Open] already, that avoids a failed node briefly and reloads its slot
// map as soon as a command fails in a way a topology change explains.
func newClusterClient(rawURL string, o *goredis.ClusterOptions) *goredis.ClusterClient {
	// A node that failed is avoided for this long when a command can go
	// elsewhere. The default, 15 s, outlives a failover by far.
	if !queryHas(rawURL, "failing_timeout_seconds") {
		o.FailingTimeoutSeconds = 1
	}
	o.ClusterStateReloadInterval = reloadBackstop
	rdb := goredis.NewClusterClient(o)
	rdb.AddHook(reloadOnFailure{rdb})
	return rdb
}

// reloadOnFailure is a go-redis hook that asks the cluster client for a
// fresh slot map whenever a command fails in a way a topology change
// explains: a network error (the master died, or hangs), CLUSTERDOWN,
// TRYAGAIN, MASTERDOWN or READONLY (a demoted master).
//
// Without it, go-redis (v9.22+, redis/go-redis#3979) follows MOVED and
// ASK at once, but after a master dies it keeps sending that master's
// slots to the dead address until ClusterStateReloadInterval: nothing
// answers with a MOVED to prompt a reload. ReloadState is lazy and
// coalesced (one CLUSTER SLOTS at a time, then a 200 ms cool-down), so a
// storm of failures costs a few reloads a second, and decisions return to
// the store within about 200 ms of the replica's promotion.
type reloadOnFailure struct{ c *goredis.ClusterClient }

func (h reloadOnFailure) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		err := next(ctx, cmd)
		if topologyError(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			if topologyError(cmd.Err()) {
				h.c.ReloadState(ctx)
				break
			}
		}
		if topologyError(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

// topologyError reports whether err is one a change of the cluster's
// topology explains: anything but a reply from Redis (network errors,
// timeouts), or one of the replies a failover or resharding produces.
// The caller's own cancellation is not one.
func topologyError(err error) bool {
	if err == nil || errors.Is(err, goredis.Nil) || errors.Is(err, context.Canceled) {
		return false
	}
	var rerr goredis.Error
	if !errors.As(err, &rerr) {
		return true
	}
	msg := rerr.Error()
	for _, prefix := range []string{"CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "READONLY"} {
		if strings.HasPrefix(msg, prefix) {
			return true
		}
	}
	return false
}

// pingCluster is Ping in cluster mode: every master of the current slot
// map (reloaded for the check) must answer, and report the cluster's state
// ok. A cluster with a master down and not yet replaced is not ready, nor
// is one whose slot map names no master yet (a cluster still forming).
func pingCluster(ctx context.Context, c *goredis.ClusterClient) error {
	return forEachMaster(ctx, c, func(ctx context.Context, node *goredis.Client) error {
		info, err := node.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: %w", node.Options().Addr, err)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state is not ok", node.Options().Addr)
		}
		return nil
	})
}

// errNoMasters is a slot map without a master: the cluster is not formed
// yet, or the client read its map before it was.
var errNoMasters = errors.New("the slot map names no master (is the cluster formed?)")

// forEachMaster is c.ForEachMaster over a settled slot map: one in which
// every slot has a master and that names the masters a server's CLUSTER
// SLOTS names now. A map without a master, or one read while the cluster
// was forming, is an error, not a loop over what it happens to hold, and
// asks for a fresh map: a gateway started before its cluster formed
// would otherwise call every check done, warm only some masters, and its
// first decisions on the others would dial under their deadline.
func forEachMaster(ctx context.Context, c *goredis.ClusterClient, fn func(context.Context, *goredis.Client) error) error {
	want, err := clusterMasters(ctx, c)
	if err != nil {
		return err
	}
	var n atomic.Int32
	err = c.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
		n.Add(1)
		return fn(ctx, node)
	})
	if err == nil && int(n.Load()) != want {
		c.ReloadState(ctx)
		if n.Load() == 0 {
			return errNoMasters
		}
		return fmt.Errorf("the slot map names %d masters, the cluster %d: not settled yet", n.Load(), want)
	}
	return err
}

// clusterMasters asks one server for the shards (CLUSTER SHARDS) and
// returns how many masters serve slots, or an error unless every slot
// has one.
func clusterMasters(ctx context.Context, c *goredis.ClusterClient) (int, error) {
	shards, err := c.ClusterShards(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("cluster shards: %w", err)
	}
	covered, masters := 0, 0
	for _, sh := range shards {
		n := 0
		for _, r := range sh.Slots {
			n += int(r.End-r.Start) + 1
		}
		if n == 0 {
			continue
		}
		for _, node := range sh.Nodes {
			if node.Role == "master" && node.Health == "online" {
				covered += n
				masters++
				break
			}
		}
	}
	if covered != 16384 {
		if covered == 0 {
			return 0, errNoMasters
		}
		return 0, fmt.Errorf("%d of 16384 slots have a master: not settled yet", covered)
	}
	return masters, nil
}
