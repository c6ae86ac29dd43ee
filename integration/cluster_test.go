package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	goredis "github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/tollgate/tollgate/internal/freeport"
)

// A Redis Cluster for the tests: 3 masters and 3 replicas, each a
// container of the test image on the host's network, listening on
// 127.0.0.1 and announcing 127.0.0.1, so the test process reaches every
// node at the address the cluster gives out (behind Docker's NAT the
// announced addresses would be unreachable). The cluster is formed with
// CLUSTER MEET, ADDSLOTSRANGE and REPLICATE: no redis-cli needed.
//
// Ports: TOLLGATE_TEST_PORT_BASE (such as 18100) puts cluster k's nodes on
// base+20k+i and their bus ports on base+20k+10+i; unset, the kernel
// picks free ports. Containers are named tollgate-<TOLLGATE_TEST_RUN>-
// cluster<k>-node<i> and carry the run's labels.

const (
	clusterMasters  = 3
	clusterReplicas = 3
	// clusterNodeTimeout is cluster-node-timeout: how long a master may
	// be unreachable before it is failed over. Production defaults to
	// 15 s; 1 s makes a failover take about 2 s.
	clusterNodeTimeout = time.Second
)

// redisCluster is a running test cluster.
type redisCluster struct {
	Nodes []*clusterNode // masters first, then their replicas in order
	// Seed is a URL with one seed node, as TOLLGATE_REDIS_URL takes it.
	Seed string
	// Client is a plain cluster client for checks.
	Client *goredis.ClusterClient
}

// clusterNode is one node of a redisCluster.
type clusterNode struct {
	ctr     testcontainers.Container
	Port    int
	BusPort int
	ID      string
	Client  *goredis.Client
}

// Addr is the node's host:port.
func (n *clusterNode) Addr() string { return "127.0.0.1:" + strconv.Itoa(n.Port) }

var (
	clusterSeq      sync.Mutex // guards clusterCount
	clusterCount    int        // clusters started by this process
	sharedOnce      sync.Once
	sharedCluster   *redisCluster
	sharedErr       error
	sharedTeardowns []func()
)

// startCluster runs a fresh cluster for the rest of tb: the tests that
// kill masters or move slots own theirs.
func startCluster(tb testing.TB) *redisCluster {
	tb.Helper()
	requireDocker(tb)
	c, teardown, err := newCluster()
	tb.Cleanup(teardown)
	if err != nil {
		tb.Fatalf("redis cluster: %v", err)
	}
	return c
}

// sharedClusterFor returns the process's shared cluster, started on first
// use and removed when the test binary ends (TestMain): tests that only
// read and write keys of their own share it.
func sharedClusterFor(tb testing.TB) *redisCluster {
	tb.Helper()
	requireDocker(tb)
	sharedOnce.Do(func() {
		var teardown func()
		sharedCluster, teardown, sharedErr = newCluster()
		sharedTeardowns = append(sharedTeardowns, teardown)
	})
	if sharedErr != nil {
		tb.Fatalf("redis cluster: %v", sharedErr)
	}
	return sharedCluster
}

// stopSharedCluster removes the shared cluster, if one was started.
func stopSharedCluster() {
	for _, f := range sharedTeardowns {
		f()
	}
}

// clusterPorts returns the client and bus ports of cluster k's nodes.
func clusterPorts(k int) ([]int, []int, error) {
	n := clusterMasters + clusterReplicas
	ports, bus := make([]int, n), make([]int, n)
	if base := os.Getenv("TOLLGATE_TEST_PORT_BASE"); base != "" {
		b, err := strconv.Atoi(base)
		if err != nil {
			return nil, nil, fmt.Errorf("TOLLGATE_TEST_PORT_BASE=%q: %w", base, err)
		}
		for i := range n {
			ports[i], bus[i] = b+20*k+i, b+20*k+10+i
		}
		return ports, bus, nil
	}
	for i := range n {
		p, err := freeport.Loopback()
		if err != nil {
			return nil, nil, err
		}
		q, err := freeport.Loopback()
		if err != nil {
			return nil, nil, err
		}
		ports[i], bus[i] = p, q
	}
	return ports, bus, nil
}

// containerName returns the name of a container this run creates: the
// tollgate-<run>- prefix keeps concurrent runs (and other projects) apart.
func containerName(suffix string) string { return "tollgate-" + testRun() + "-" + suffix }

// testRun is TOLLGATE_TEST_RUN, or an id of this process's own.
var testRun = sync.OnceValue(func() string {
	if run := os.Getenv("TOLLGATE_TEST_RUN"); run != "" {
		return run
	}
	return strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
})

// newCluster starts 6 nodes, forms the cluster and waits until every node
// agrees it is ok. teardown is never nil and removes what was started.
func newCluster() (c *redisCluster, teardown func(), err error) {
	clusterSeq.Lock()
	k := clusterCount
	clusterCount++
	clusterSeq.Unlock()
	ports, bus, err := clusterPorts(k)
	if err != nil {
		return nil, func() {}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// teardown holds cl, not the result c: an error return sets c to nil.
	cl := &redisCluster{Nodes: make([]*clusterNode, len(ports))}
	teardown = func() {
		if cl.Client != nil {
			cl.Client.Close()
		}
		for _, n := range cl.Nodes {
			if n == nil {
				continue
			}
			if n.Client != nil {
				n.Client.Close()
			}
			if n.ctr != nil {
				_ = n.ctr.Terminate(context.Background())
			}
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ports))
	for i := range ports {
		wg.Go(func() {
			ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
				ContainerRequest: testcontainers.ContainerRequest{
					Image:  redisImage(),
					Name:   containerName(fmt.Sprintf("cluster%d-node%d", k, i)),
					Labels: containerLabels(),
					Cmd: []string{
						"--port", strconv.Itoa(ports[i]), "--bind", "127.0.0.1",
						"--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", "/data",
						"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus[i]),
						"--cluster-config-file", "/data/nodes.conf",
						"--cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout / time.Millisecond)),
						"--cluster-announce-ip", "127.0.0.1",
						// A dead master's slots fail; the other masters' keep serving.
						"--cluster-require-full-coverage", "no",
						// A replica's first sync starts at once (default: after 5 s),
						// and CLUSTER SLOTS lists a replica once its master's
						// replication offset moved: a ping a second (default 10 s).
						"--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1",
					},
					HostConfigModifier: func(hc *container.HostConfig) { hc.NetworkMode = "host" },
					WaitingFor:         wait.ForLog("* Ready to accept connections").WithStartupTimeout(30 * time.Second),
				},
				Started: true,
			})
			node := &clusterNode{ctr: ctr, Port: ports[i], BusPort: bus[i]}
			cl.Nodes[i] = node
			if err != nil {
				errs[i] = fmt.Errorf("node %d (image %s): %w", i, redisImage(), err)
				return
			}
			node.Client = goredis.NewClient(&goredis.Options{Addr: node.Addr(), MaxRetries: -1})
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, teardown, err
		}
	}
	if err := cl.form(ctx); err != nil {
		return nil, teardown, err
	}
	cl.Seed = "redis://" + cl.Nodes[0].Addr()
	cl.Client = goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: []string{cl.Nodes[0].Addr()}})
	return cl, teardown, nil
}

// form joins the nodes into one cluster: the first three own a third of
// the slots each, the last three replicate them in order.
func (c *redisCluster) form(ctx context.Context) error {
	for _, n := range c.Nodes {
		id, err := n.Client.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			return fmt.Errorf("CLUSTER MYID on %s: %w", n.Addr(), err)
		}
		n.ID = id
	}
	first := c.Nodes[0]
	meet := func() error {
		for _, n := range c.Nodes[1:] {
			if err := first.Client.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", n.Port, n.BusPort).Err(); err != nil {
				return fmt.Errorf("CLUSTER MEET %s: %w", n.Addr(), err)
			}
		}
		return nil
	}
	if err := meet(); err != nil {
		return err
	}
	const slots = 16384
	for i := range clusterMasters {
		lo, hi := i*slots/clusterMasters, (i+1)*slots/clusterMasters-1
		if err := c.Nodes[i].Client.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("CLUSTER ADDSLOTSRANGE %d %d on %s: %w", lo, hi, c.Nodes[i].Addr(), err)
		}
	}
	// A replica can only follow a master it has heard of. A handshake not
	// done within cluster-node-timeout (a loaded machine) is dropped for
	// good: MEET again, at most once a second, until every node knows
	// every other (a MEET of a known node is ignored).
	lastMeet := time.Now()
	if err := c.waitUntil(ctx, "every node knows every other", func(n *clusterNode) (bool, error) {
		nodes, err := n.Client.ClusterNodes(ctx).Result()
		if err != nil {
			return false, err
		}
		lines := strings.Split(strings.TrimSpace(nodes), "\n")
		ok := len(lines) == len(c.Nodes) && !strings.Contains(nodes, "handshake") && !strings.Contains(nodes, "noaddr")
		if !ok && time.Since(lastMeet) > time.Second {
			lastMeet = time.Now()
			_ = meet() // a handshake still in progress refuses a second one
		}
		return ok, nil
	}); err != nil {
		return err
	}
	for i := clusterMasters; i < len(c.Nodes); i++ {
		master := c.Nodes[i-clusterMasters]
		if err := c.Nodes[i].Client.Do(ctx, "CLUSTER", "REPLICATE", master.ID).Err(); err != nil {
			return fmt.Errorf("CLUSTER REPLICATE on %s: %w", c.Nodes[i].Addr(), err)
		}
	}
	return c.waitHealthy(ctx)
}

// waitHealthy waits until every running node says cluster_state:ok, sees
// 3 masters with a replica each, and every replica's link is up.
func (c *redisCluster) waitHealthy(ctx context.Context) error {
	return c.waitUntil(ctx, "the cluster is ok", func(n *clusterNode) (bool, error) {
		info, err := n.Client.ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") {
			return false, err
		}
		ranges, err := slotRanges(ctx, n.Client)
		if err != nil || len(ranges) != clusterMasters {
			return false, err
		}
		for _, r := range ranges {
			if r.online != 2 {
				return false, nil // a master and its replica, synced
			}
		}
		repl, err := n.Client.Info(ctx, "replication").Result()
		if err != nil {
			return false, err
		}
		return strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up"), nil
	})
}

// waitUntil polls ok on every node until all hold, or ctx ends.
func (c *redisCluster) waitUntil(ctx context.Context, what string, ok func(*clusterNode) (bool, error)) error {
	var last error
	for {
		all := true
		for _, n := range c.Nodes {
			done, err := ok(n)
			if err != nil {
				last = fmt.Errorf("%s: %w", n.Addr(), err)
			}
			if !done {
				all = false
				break
			}
		}
		if all {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until %s: %w (last error: %v)", what, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// kill kills node n's process (SIGKILL): its port refuses connections,
// as after a crash.
func (n *clusterNode) kill(tb testing.TB) {
	tb.Helper()
	dockerDo(tb, n.ctr.GetContainerID(), func(ctx context.Context, cli *testcontainers.DockerClient, id string) error {
		if _, err := cli.ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "KILL"}); err != nil {
			return fmt.Errorf("kill %s: %w", n.Addr(), err)
		}
		return nil
	})
}

// masterOf returns the node that serves key's slot now, as the cluster
// (not a client's cache) says.
func (c *redisCluster) masterOf(tb testing.TB, key string) *clusterNode {
	tb.Helper()
	ctx := context.Background()
	slot, err := c.Nodes[0].Client.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		tb.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
	}
	return c.slotOwner(tb, int(slot))
}

// slotOwner returns the master that serves slot, per CLUSTER SLOTS of a
// live node.
func (c *redisCluster) slotOwner(tb testing.TB, slot int) *clusterNode {
	tb.Helper()
	for _, n := range c.Nodes {
		ranges, err := slotRanges(context.Background(), n.Client)
		if err != nil {
			continue
		}
		for _, r := range ranges {
			if slot >= r.start && slot <= r.end && r.master != "" {
				return c.byID(tb, r.master)
			}
		}
	}
	tb.Fatalf("no node serves slot %d", slot)
	return nil
}

func (c *redisCluster) byID(tb testing.TB, id string) *clusterNode {
	tb.Helper()
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	tb.Fatalf("no node with id %s", id)
	return nil
}

// slotRange is a range of slots as a node sees it (CLUSTER SHARDS): the
// master that serves it, and how many of the shard's nodes are online
// (a replica is online once its first sync is done).
type slotRange struct {
	start, end int
	master     string
	online     int
}

// slotRanges returns the slot ranges that node rdb knows, from CLUSTER
// SHARDS (Redis 7, Valkey 7.2; CLUSTER SLOTS is deprecated).
func slotRanges(ctx context.Context, rdb *goredis.Client) ([]slotRange, error) {
	shards, err := rdb.ClusterShards(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []slotRange
	for _, sh := range shards {
		master, online := "", 0
		for _, n := range sh.Nodes {
			if n.Health != "online" {
				continue
			}
			online++
			if n.Role == "master" {
				master = n.ID
			}
		}
		for _, r := range sh.Slots {
			out = append(out, slotRange{start: int(r.Start), end: int(r.End), master: master, online: online})
		}
	}
	return out, nil
}
