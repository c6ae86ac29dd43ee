// Command load drives an Envoy rate limit service (RLS v3) with a fixed
// number of concurrent callers over a few gRPC connections, as Envoy's
// workers do, and prints one line of JSON: decisions per second, latency
// percentiles, and how the answers split.
//
//	load -addr 127.0.0.1:18081 -callers 64 -conns 4 -duration 10s -values 1000
//
// Each call carries one descriptor, user=<u0..u(values-1)> chosen in turn
// by each caller (-values 1000: one thousand counters), or, with -flood,
// always user=flood (a value the benchmark's configuration allows once an
// hour: every call after the first is denied).
//
// Over the measured window only, it also reads its own CPU time and that
// of the processes named by -pids (name=pid,...: µs per decision, from
// /proc/<pid>/stat) and, with -redis, the commands Redis ran (CONFIG
// RESETSTAT at the start, INFO commandstats at the end: per decision).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// result is what one run printed.
type result struct {
	Target    string  `json:"target,omitempty"`
	Callers   int     `json:"callers"`
	Flood     bool    `json:"flood"`
	Seconds   float64 `json:"seconds"`
	Decisions int64   `json:"decisions"`
	PerSecond float64 `json:"per_second"`
	P50us     float64 `json:"p50_us"`
	P99us     float64 `json:"p99_us"`
	OK        int64   `json:"ok"`
	Over      int64   `json:"over_limit"`
	Errors    int64   `json:"errors"`
	// CPUus is each -pids process's CPU time per decision, in µs.
	CPUus map[string]float64 `json:"cpu_us,omitempty"`
	// RedisCommands is what Redis ran per decision (-redis).
	RedisCommands float64 `json:"redis_commands,omitempty"`
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "the RLS's gRPC address")
	callers := flag.Int("callers", 64, "concurrent callers")
	conns := flag.Int("conns", 4, "gRPC connections the callers share")
	duration := flag.Duration("duration", 10*time.Second, "how long to measure, after the warm-up")
	warmup := flag.Duration("warmup", time.Second, "how long to call before measuring")
	values := flag.Int("values", 1000, "distinct descriptor values")
	flood := flag.Bool("flood", false, "always the one value user=flood (denied after its first call)")
	domain := flag.String("domain", "bench", "the request's domain")
	target := flag.String("target", "", "a name for the output")
	pids := flag.String("pids", "", "name=pid,...: processes whose CPU time per decision to report")
	redisAddr := flag.String("redis", "", "host:port of the Redis whose commands per decision to report")
	ca := flag.String("ca", "", "PEM CA file: call over TLS, checking the server's certificate (for localhost) against it")
	flag.Parse()
	creds := insecure.NewCredentials()
	if *ca != "" {
		pem, err := os.ReadFile(*ca)
		pool := x509.NewCertPool()
		if err != nil || !pool.AppendCertsFromPEM(pem) {
			fmt.Fprintln(os.Stderr, "load: -ca: no PEM certificate read:", err)
			os.Exit(2)
		}
		creds = credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "localhost"})
	}
	w, err := newWatch(*pids, *redisAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(2)
	}
	r, err := run(*addr, creds, *domain, *callers, *conns, *values, *flood, *warmup, *duration, w)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	r.Target = *target
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

// run calls for warmup+duration and measures the last duration.
func run(addr string, creds credentials.TransportCredentials, domain string, callers, nconns, values int, flood bool, warmup, duration time.Duration, w *watch) (result, error) {
	clients := make([]pb.RateLimitServiceClient, nconns)
	for i := range clients {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return result{}, err
		}
		defer cc.Close()
		clients[i] = pb.NewRateLimitServiceClient(cc)
	}
	reqs := make([]*pb.RateLimitRequest, values)
	for i := range reqs {
		v := "u" + strconv.Itoa(i)
		if flood {
			v = "flood"
		}
		reqs[i] = &pb.RateLimitRequest{Domain: domain, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: v}}},
		}}
	}
	var (
		measuring atomic.Bool
		ok, over  atomic.Int64
		errs      atomic.Int64
		mu        sync.Mutex
		lat       []time.Duration
		wg        sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(context.Background())
	for c := range callers {
		wg.Go(func() {
			client := clients[c%nconns]
			mine := make([]time.Duration, 0, 1<<14)
			for i := c; ctx.Err() == nil; i += callers {
				start := time.Now()
				resp, err := client.ShouldRateLimit(ctx, reqs[i%values])
				took := time.Since(start)
				if !measuring.Load() {
					continue
				}
				switch {
				case err != nil:
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				case resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT:
					over.Add(1)
				default:
					ok.Add(1)
				}
				mine = append(mine, took)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	time.Sleep(warmup)
	if err := w.start(); err != nil {
		cancel()
		wg.Wait()
		return result{}, err
	}
	measuring.Store(true)
	start := time.Now()
	time.Sleep(duration)
	measuring.Store(false)
	elapsed := time.Since(start)
	cpu, cmds, werr := w.stop()
	cancel()
	wg.Wait()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)]) / float64(time.Microsecond)
	}
	n := ok.Load() + over.Load()
	r := result{
		Callers: callers, Flood: flood, Seconds: elapsed.Seconds(), Decisions: n,
		PerSecond: float64(n) / elapsed.Seconds(), P50us: pct(0.50), P99us: pct(0.99),
		OK: ok.Load(), Over: over.Load(), Errors: errs.Load(),
	}
	if n > 0 {
		for name, d := range cpu {
			if r.CPUus == nil {
				r.CPUus = map[string]float64{}
			}
			r.CPUus[name] = float64(d/time.Microsecond) / float64(n)
		}
		r.RedisCommands = float64(cmds) / float64(n)
	}
	return r, werr
}
