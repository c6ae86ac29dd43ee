package integration

// DELETE AT MERGE. This file stands in, on branch issue-4 only, for the
// testcontainers harness of integration/redis_test.go and bench_test.go
// (branch issue-3): same names and signatures (redisServer, startRedis,
// commandCalls, resetStats, reportRedisMetrics), but against a Redis that
// is already running at $TOLLGATE_TEST_REDIS_ADDR (host:port); the tests
// skip when it is unset.

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

type redisServer struct {
	URL    string          // redis://host:port
	Client *goredis.Client // a plain client for checks
}

func startRedis(tb testing.TB) *redisServer {
	tb.Helper()
	addr := os.Getenv("TOLLGATE_TEST_REDIS_ADDR")
	if addr == "" {
		tb.Skip("TOLLGATE_TEST_REDIS_ADDR is not set (stub harness; the container harness replaces it)")
	}
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	tb.Cleanup(func() { c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		tb.Fatalf("ping %s: %v", addr, err)
	}
	return &redisServer{URL: "redis://" + addr, Client: c}
}

func (s *redisServer) commandCalls(tb testing.TB) map[string]int64 {
	tb.Helper()
	info, err := s.Client.Info(context.Background(), "commandstats").Result()
	if err != nil {
		tb.Fatalf("INFO commandstats: %v", err)
	}
	calls := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(info))
	for sc.Scan() {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(sc.Text()), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _, _ := strings.Cut(rest, ",")
		calls[name], _ = strconv.ParseInt(n, 10, 64)
	}
	return calls
}

func (s *redisServer) resetStats(tb testing.TB) {
	tb.Helper()
	if err := s.Client.ConfigResetStat(context.Background()).Err(); err != nil {
		tb.Fatalf("CONFIG RESETSTAT: %v", err)
	}
}

func reportRedisMetrics(b *testing.B, srv *redisServer, _ float64) {
	b.Helper()
	var cmds int64
	for name, n := range srv.commandCalls(b) {
		switch name {
		case "info", "config|resetstat", "hello", "ping", "client|setinfo":
		default:
			cmds += n
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(cmds)/float64(b.N), "redis-cmds/op")
}
