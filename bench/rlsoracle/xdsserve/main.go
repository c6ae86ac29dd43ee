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
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cache "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	server "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/faces/rls/rlsconf"
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

// load reads every *.yaml and *.yml file of dir, in name order, into
// one resource each, named by the file ([rlsconf.Resources]: the proto
// carries no value_to_metric or share_threshold).
func load(dir string) ([]types.Resource, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []rlsconf.File
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !(strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		files = append(files, rlsconf.File{Name: name, Data: data})
	}
	cfgs, err := rlsconf.Resources(files)
	if err != nil {
		return nil, err
	}
	rs := make([]types.Resource, len(cfgs))
	for i, c := range cfgs {
		rs[i] = c
	}
	return rs, nil
}
