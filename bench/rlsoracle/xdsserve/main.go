// Command xdsserve serves a directory of envoyproxy/ratelimit YAML files
// over xDS, as Envoy Gateway's controller serves its rate limit
// configuration: one ratelimit.config.ratelimit.v3.RateLimitConfig per
// file, state of the world over ADS (go-control-plane's snapshot cache
// and server), version 1, to every node named. scripts/rls-oracle.sh
// runs it so that envoyproxy/ratelimit and tollgate take one suite's
// configuration over xDS.
//
//	xdsserve -addr 127.0.0.1:18000 -config suite/config -nodes ref,sut
//
// It logs one line per discovery request ("ack node=sut version=1",
// "nack node=sut version= error=..."), and serves until SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v2"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18000", "listen address")
	dir := flag.String("config", "", "directory of envoyproxy/ratelimit YAML files")
	nodes := flag.String("nodes", "default", "comma-separated node ids served")
	flag.Parse()
	log.SetFlags(0)
	if err := run(*addr, *dir, strings.Split(*nodes, ",")); err != nil {
		log.Fatalf("xdsserve: %v", err)
	}
}

func run(addr, dir string, nodes []string) error {
	rs, err := load(dir)
	if err != nil {
		return err
	}
	snap, err := cache.NewSnapshot("1", map[resource.Type][]types.Resource{resource.RateLimitConfigType: rs})
	if err != nil {
		return err
	}
	c := cache.NewSnapshotCache(false, cache.IDHash{}, nil)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	for _, n := range nodes {
		if err := c.SetSnapshot(ctx, n, snap); err != nil {
			return err
		}
	}
	srv := server.NewServer(ctx, c, server.CallbackFuncs{
		StreamRequestFunc: func(_ int64, r *discovery.DiscoveryRequest) error {
			switch {
			case r.GetErrorDetail() != nil:
				log.Printf("nack node=%s version=%s error=%q", r.GetNode().GetId(), r.GetVersionInfo(), r.GetErrorDetail().GetMessage())
			case r.GetResponseNonce() != "":
				log.Printf("ack node=%s version=%s", r.GetNode().GetId(), r.GetVersionInfo())
			default:
				log.Printf("request node=%s version=%s", r.GetNode().GetId(), r.GetVersionInfo())
			}
			return nil
		},
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	discovery.RegisterAggregatedDiscoveryServiceServer(g, srv)
	go func() {
		<-ctx.Done()
		g.Stop()
	}()
	log.Printf("serving %d resources on %s to %v", len(rs), ln.Addr(), nodes)
	return g.Serve(ln)
}

// The typed form of a file: envoyproxy/ratelimit's fields that the
// RateLimitConfig proto carries (it has no value_to_metric or
// share_threshold: those are read and dropped, as over xDS there).
type (
	yamlRoot struct {
		Domain      string           `yaml:"domain"`
		Descriptors []yamlDescriptor `yaml:"descriptors"`
	}
	yamlDescriptor struct {
		Key            string           `yaml:"key"`
		Value          string           `yaml:"value"`
		RateLimit      *yamlRateLimit   `yaml:"rate_limit"`
		Descriptors    []yamlDescriptor `yaml:"descriptors"`
		ShadowMode     bool             `yaml:"shadow_mode"`
		QuotaMode      bool             `yaml:"quota_mode"`
		DetailedMetric bool             `yaml:"detailed_metric"`
		ValueToMetric  bool             `yaml:"value_to_metric"`
		ShareThreshold bool             `yaml:"share_threshold"`
		Metadata       map[string]any   `yaml:"metadata"`
	}
	yamlRateLimit struct {
		RequestsPerUnit uint32 `yaml:"requests_per_unit"`
		Unit            string `yaml:"unit"`
		Unlimited       bool   `yaml:"unlimited"`
		Name            string `yaml:"name"`
		Replaces        []struct {
			Name string `yaml:"name"`
		} `yaml:"replaces"`
	}
)

// load reads every *.yaml and *.yml file of dir, in name order, into
// one resource each, named by the file.
func load(dir string) ([]types.Resource, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var rs []types.Resource
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		var root yamlRoot
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		ds, err := descriptors(root.Descriptors)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		rs = append(rs, &rlsconfv3.RateLimitConfig{Name: name, Domain: root.Domain, Descriptors: ds})
	}
	return rs, nil
}

func descriptors(ds []yamlDescriptor) ([]*rlsconfv3.RateLimitDescriptor, error) {
	var out []*rlsconfv3.RateLimitDescriptor
	for _, d := range ds {
		pd := &rlsconfv3.RateLimitDescriptor{Key: d.Key, Value: d.Value, ShadowMode: d.ShadowMode, QuotaMode: d.QuotaMode, DetailedMetric: d.DetailedMetric}
		if rl := d.RateLimit; rl != nil {
			// An unknown name is the enum's zero, UNKNOWN, which the
			// loader refuses unless unlimited, as it refuses the name.
			unit := rlsconfv3.RateLimitUnit(rlsconfv3.RateLimitUnit_value[strings.ToUpper(rl.Unit)])
			pd.RateLimit = &rlsconfv3.RateLimitPolicy{Unit: unit, RequestsPerUnit: rl.RequestsPerUnit, Unlimited: rl.Unlimited, Name: rl.Name}
			for _, r := range rl.Replaces {
				pd.RateLimit.Replaces = append(pd.RateLimit.Replaces, &rlsconfv3.RateLimitReplace{Name: r.Name})
			}
		}
		if len(d.Metadata) > 0 {
			m, err := structpb.NewStruct(stringKeys(d.Metadata).(map[string]any))
			if err != nil {
				return nil, err
			}
			pd.Metadata = m
		}
		var err error
		if pd.Descriptors, err = descriptors(d.Descriptors); err != nil {
			return nil, err
		}
		out = append(out, pd)
	}
	return out, nil
}

// stringKeys turns yaml.v2's map[any]any into map[string]any, deeply.
func stringKeys(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = stringKeys(e)
		}
		return out
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[fmt.Sprint(k)] = stringKeys(e)
		}
		return out
	case []any:
		return slices.Collect(func(yield func(any) bool) {
			for _, e := range v {
				if !yield(stringKeys(e)) {
					return
				}
			}
		})
	case int:
		return float64(v)
	}
	return v
}
