// Package integration proves tollgate against real Redis servers in
// containers (testcontainers-go). It holds tests and benchmarks only.
//
// Without Docker the tests skip with a reason; TOLLGATE_REQUIRE_DOCKER=1
// (CI) makes that a failure. The image is TOLLGATE_TEST_REDIS_IMAGE, else
// the local tollgate.local/redis:7 when present, else redis:7;
// scripts/redis-image.sh builds the local one for machines
// without a registry.
package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	goredis "github.com/redis/go-redis/v9"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcredis "github.com/testcontainers/testcontainers-go/modules/redis"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/tollgate/tollgate/internal/freeport"
)

func TestMain(m *testing.M) {
	// The reaper image cannot be pulled without a registry, and every test
	// removes its own containers (CleanupContainer; scripts/
	// cleanup-containers.sh after a crash). Exactly "true": testcontainers
	// reads the literal.
	os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	// Inside a container (/.dockerenv), testcontainers otherwise guesses
	// the host from the default gateway and dials an address that is not
	// there; published ports are on localhost.
	if os.Getenv("TESTCONTAINERS_HOST_OVERRIDE") == "" {
		os.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "localhost")
	}
	// testcontainers logs every container's progress (a dozen lines per
	// container, hundreds a run), which buries a failure; its errors reach
	// the tests anyway. TOLLGATE_TEST_CONTAINER_LOGS=1 shows the progress.
	if os.Getenv("TOLLGATE_TEST_CONTAINER_LOGS") != "1" {
		tclog.SetDefault(tclog.NewNoopLogger())
	}
	startStallMeter()
	code := m.Run()
	stopSharedCluster()
	reportSkips()
	os.Exit(code)
}

// skipped counts the tests skipped for want of Docker.
var skipped atomic.Int64

// reportSkips tells the person at the terminal that the integration tests
// did not run. `go test ./...` shows a passing package's output only
// with -v, so without it the skips would hide behind an "ok": the line
// goes to the controlling terminal, when there is one.
func reportSkips() {
	n := skipped.Load()
	if n == 0 {
		return
	}
	msg := fmt.Sprintf("integration: %d tests SKIPPED: Docker unavailable (%s); `make test` runs them, TOLLGATE_REQUIRE_DOCKER=1 makes this a failure\n",
		n, strings.ReplaceAll(fmt.Sprint(dockerErr), "\n", "; "))
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		fmt.Fprint(tty, msg)
		tty.Close()
		return
	}
	fmt.Fprint(os.Stderr, msg)
}

// localRedisImage is what scripts/redis-image.sh builds (make test).
const localRedisImage = "tollgate.local/redis:7"

// testImage is the Redis image the tests run, settled with the Docker
// check (requireDocker).
var testImage = "redis:7"

// redisImage is the image the tests run: TOLLGATE_TEST_REDIS_IMAGE, else
// the local image when the engine has it (so that plain `go test ./...`
// works on a machine without a registry once make test or
// scripts/redis-image.sh has built it), else the official redis:7.
func redisImage() string { return testImage }

// resolveImage settles testImage on a reachable engine.
func resolveImage(ctx context.Context, cli *testcontainers.DockerClient) {
	if img := os.Getenv("TOLLGATE_TEST_REDIS_IMAGE"); img != "" {
		testImage = img
		return
	}
	if _, err := cli.ImageInspect(ctx, localRedisImage); err == nil {
		testImage = localRedisImage
	}
}

var (
	dockerOnce sync.Once
	dockerErr  error
)

// requireDocker skips tb under -short or without Docker, and fails it
// without Docker when TOLLGATE_REQUIRE_DOCKER=1.
func requireDocker(tb testing.TB) {
	tb.Helper()
	if testing.Short() {
		tb.Skip("integration: skipped under -short (needs Docker)")
	}
	dockerOnce.Do(func() { dockerErr = pingDocker() })
	if dockerErr == nil {
		return
	}
	if os.Getenv("TOLLGATE_REQUIRE_DOCKER") == "1" {
		tb.Fatalf("integration: Docker is required (TOLLGATE_REQUIRE_DOCKER=1) but unavailable: %v", dockerErr)
	}
	skipped.Add(1)
	tb.Skipf("integration: Docker unavailable (%v); set TOLLGATE_REQUIRE_DOCKER=1 to fail instead", dockerErr)
}

func pingDocker() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return fmt.Errorf("docker client: %w", err)
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return fmt.Errorf("docker ping: %w", err)
	}
	resolveImage(ctx, cli)
	return nil
}

// redisServer is one Redis in a container.
type redisServer struct {
	ctr    *tcredis.RedisContainer
	URL    string          // redis://host:port
	Client *goredis.Client // a plain client for checks
}

// startRedis runs a Redis container for the rest of tb, with opts added
// to the module's. Its client is closed and the container removed at the
// end.
func startRedis(tb testing.TB, opts ...testcontainers.ContainerCustomizer) *redisServer {
	tb.Helper()
	requireDocker(tb)
	ctx := context.Background()
	opts = append([]testcontainers.ContainerCustomizer{
		testcontainers.WithLabels(containerLabels()),
		// The scratch image has no shell for the internal port check.
		testcontainers.WithWaitStrategy(
			wait.ForListeningPort("6379/tcp").SkipInternalCheck().WithStartupTimeout(30*time.Second),
			wait.ForLog("* Ready to accept connections"),
		),
	}, opts...)
	ctr, err := tcredis.Run(ctx, redisImage(), opts...)
	testcontainers.CleanupContainer(tb, ctr)
	if err != nil {
		tb.Fatalf("start redis (%s): %v\n(without a registry: build a local image with scripts/redis-image.sh and set "+
			"TOLLGATE_TEST_REDIS_IMAGE=tollgate.local/redis:7, as make test does)", redisImage(), err)
	}
	url, err := ctr.ConnectionString(ctx)
	if err != nil {
		tb.Fatalf("redis connection string: %v", err)
	}
	opt, err := goredis.ParseURL(url)
	if err != nil {
		tb.Fatalf("parse %s: %v", url, err)
	}
	c := goredis.NewClient(opt)
	tb.Cleanup(func() { c.Close() })
	return &redisServer{ctr: ctr, URL: url, Client: c}
}

// directURL returns the URL of the container's own address on Docker's
// bridge, bypassing the port proxy; tb fails when the host cannot reach
// it.
func (s *redisServer) directURL(tb testing.TB) string {
	tb.Helper()
	ip, err := s.ctr.ContainerIP(context.Background())
	if err != nil || ip == "" {
		tb.Fatalf("redis container IP: %q, %v", ip, err)
	}
	addr := net.JoinHostPort(ip, "6379")
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		tb.Fatalf("the container's address %s is not reachable from here: %v", addr, err)
	}
	c.Close()
	return "redis://" + addr + "/0"
}

// containerLabels marks a test container as this project's, and as this
// run's when TOLLGATE_TEST_RUN is set (make test sets it), so that
// scripts/cleanup-containers.sh removes only what this run started and
// never another project's or a concurrent run's containers.
func containerLabels() map[string]string {
	labels := map[string]string{"tollgate.test": "true"}
	if run := os.Getenv("TOLLGATE_TEST_RUN"); run != "" {
		labels["tollgate.test.run"] = run
	}
	return labels
}

// withFixedHostPort publishes 6379 on 127.0.0.1:port, so the address
// survives a stop and start of the container (an ephemeral port changes).
func withFixedHostPort(port int) testcontainers.CustomizeRequestOption {
	return testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
		hc.PortBindings = network.PortMap{
			network.MustParsePort("6379/tcp"): {{HostPort: strconv.Itoa(port)}},
		}
	})
}

// freePort returns a TCP port that was free on loopback a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	p, err := freeport.Loopback()
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// pause freezes the Redis process (docker pause): connections stay open
// and nothing answers.
func (s *redisServer) pause(tb testing.TB) {
	tb.Helper()
	s.docker(tb, func(ctx context.Context, cli *testcontainers.DockerClient, id string) error {
		_, err := cli.ContainerPause(ctx, id, client.ContainerPauseOptions{})
		return err
	})
}

// unpause thaws a paused Redis.
func (s *redisServer) unpause(tb testing.TB) {
	tb.Helper()
	s.docker(tb, func(ctx context.Context, cli *testcontainers.DockerClient, id string) error {
		_, err := cli.ContainerUnpause(ctx, id, client.ContainerUnpauseOptions{})
		return err
	})
}

func (s *redisServer) docker(tb testing.TB, do func(context.Context, *testcontainers.DockerClient, string) error) {
	tb.Helper()
	dockerDo(tb, s.ctr.GetContainerID(), do)
}

// dockerDo runs do on a Docker client for the container id, failing tb
// on an error.
func dockerDo(tb testing.TB, id string, do func(context.Context, *testcontainers.DockerClient, string) error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		tb.Fatalf("docker client: %v", err)
	}
	defer cli.Close()
	if err := do(ctx, cli, id); err != nil {
		tb.Fatalf("docker: %v", err)
	}
}

// stop stops the container; the process is gone and connections refused.
func (s *redisServer) stop(tb testing.TB) {
	tb.Helper()
	timeout := 5 * time.Second
	if err := s.ctr.Stop(context.Background(), &timeout); err != nil {
		tb.Fatalf("stop redis: %v", err)
	}
}

// start starts a stopped container again and waits until it answers on
// the same URL (the container must publish a fixed host port).
func (s *redisServer) start(tb testing.TB) {
	tb.Helper()
	if err := s.ctr.Start(context.Background()); err != nil {
		tb.Fatalf("start redis: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.Client.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			tb.Fatal("redis not answering 30s after restart")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// commandCalls returns the calls per command from INFO commandstats,
// keyed by lower-case name (incr, pexpire, evalsha).
func (s *redisServer) commandCalls(tb testing.TB) map[string]int64 {
	tb.Helper()
	return commandCalls(tb, s.Client)
}

// resetStats zeroes INFO commandstats.
func (s *redisServer) resetStats(tb testing.TB) {
	tb.Helper()
	resetStats(tb, s.Client)
}

// checkTTLs fails tb unless every key matching pattern has a TTL of at
// most maxTTL, and returns how many keys it checked.
func (s *redisServer) checkTTLs(tb testing.TB, pattern string, maxTTL time.Duration) int {
	tb.Helper()
	return checkTTLs(tb, s.Client, pattern, maxTTL)
}

// eachMaster runs fn on rdb's one server, or on every master of a
// cluster, and returns the first error.
func eachMaster(ctx context.Context, rdb goredis.UniversalClient, fn func(context.Context, *goredis.Client) error) error {
	if cc, ok := rdb.(*goredis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, fn)
	}
	return fn(ctx, rdb.(*goredis.Client))
}

// commandCalls returns the calls per command from INFO commandstats,
// summed over rdb's masters.
func commandCalls(tb testing.TB, rdb goredis.UniversalClient) map[string]int64 {
	tb.Helper()
	calls := map[string]int64{}
	var mu sync.Mutex
	err := eachMaster(context.Background(), rdb, func(ctx context.Context, c *goredis.Client) error {
		n, err := nodeCommandCalls(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		for k, v := range n {
			calls[k] += v
		}
		return err
	})
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	return calls
}

// nodeCommandCalls returns the calls per command of one server.
func nodeCommandCalls(ctx context.Context, c *goredis.Client) (map[string]int64, error) {
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	calls := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		// cmdstat_incr:calls=3,usec=27,usec_per_call=9.00,...
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		calls[name], _ = strconv.ParseInt(n, 10, 64)
	}
	return calls, nil
}

// decisionCommands returns the commands Redis ran since its stats were
// reset, but for the harness's own (INFO, CONFIG RESETSTAT) and
// connection set-up and probes (HELLO, CLIENT SETINFO, PING): the store
// work of decisions, commands inside scripts included.
func (s *redisServer) decisionCommands(tb testing.TB) int64 {
	tb.Helper()
	var cmds int64
	for name, n := range s.commandCalls(tb) {
		switch name {
		case "info", "config|resetstat", "hello", "ping", "client|setinfo":
		default:
			cmds += n
		}
	}
	return cmds
}

// resetStats zeroes INFO commandstats on every master of rdb.
func resetStats(tb testing.TB, rdb goredis.UniversalClient) {
	tb.Helper()
	err := eachMaster(context.Background(), rdb, func(ctx context.Context, c *goredis.Client) error {
		return c.ConfigResetStat(ctx).Err()
	})
	if err != nil {
		tb.Fatalf("CONFIG RESETSTAT: %v", err)
	}
}

// scanKeys returns every key matching pattern on rdb's masters.
func scanKeys(tb testing.TB, rdb goredis.UniversalClient, pattern string) []string {
	tb.Helper()
	var mu sync.Mutex
	var keys []string
	err := eachMaster(context.Background(), rdb, func(ctx context.Context, c *goredis.Client) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	})
	if err != nil {
		tb.Fatalf("SCAN %s: %v", pattern, err)
	}
	return keys
}

// checkTTLs fails tb unless every key matching pattern on rdb's masters
// has a TTL of at most maxTTL, and returns how many keys it checked.
func checkTTLs(tb testing.TB, rdb goredis.UniversalClient, pattern string, maxTTL time.Duration) int {
	tb.Helper()
	n := 0
	for _, key := range scanKeys(tb, rdb, pattern) {
		ttl, err := rdb.PTTL(context.Background(), key).Result()
		if err != nil {
			tb.Fatalf("PTTL %s: %v", key, err)
		}
		switch {
		case ttl == -2: // expired since SCAN saw it
			continue
		case ttl < 0:
			tb.Errorf("key %s has no TTL: it would count forever", key)
		case ttl > maxTTL:
			tb.Errorf("key %s: TTL %v > %v", key, ttl, maxTTL)
		}
		n++
	}
	return n
}

// withPassword runs Redis with requirepass. Settings go as arguments (the
// scratch image has no config file; the official image's entrypoint takes
// arguments too), so the image's own arguments are repeated here.
func withPassword(pw string) testcontainers.CustomizeRequestOption {
	return testcontainers.WithCmd("--protected-mode", "no", "--save", "", "--appendonly", "no", "--requirepass", pw)
}
