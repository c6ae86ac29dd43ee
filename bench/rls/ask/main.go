// Command ask sends one ShouldRateLimit to an Envoy rate limit service
// and prints its overall code on a line of its own, then the whole answer
// as JSON: a client for scripts (scripts/compose-rls-test.sh) and for
// trying a configuration by hand.
//
//	ask -addr 127.0.0.1:8091 -domain edge -d remote_address=10.1.2.3 -d generic_key=api,header_match=premium
//
// Each -d is one descriptor: comma-separated key=value entries.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/encoding/protojson"
)

// descriptors collects -d flags.
type descriptors []*ratelimitv3.RateLimitDescriptor

func (d *descriptors) String() string { return fmt.Sprint(len(*d)) }

func (d *descriptors) Set(s string) error {
	desc := &ratelimitv3.RateLimitDescriptor{}
	for _, e := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(e, "=")
		if !ok {
			return fmt.Errorf("entry %q is not key=value", e)
		}
		desc.Entries = append(desc.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	*d = append(*d, desc)
	return nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8091", "the service's gRPC address")
	domain := flag.String("domain", "", "the request's domain")
	hits := flag.Uint("hits", 0, "the request's hits_addend (0: one)")
	var ds descriptors
	flag.Var(&ds, "d", "a descriptor: key=value[,key=value...] (repeatable)")
	flag.Parse()
	cc, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "ask:", err)
		os.Exit(2)
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := pb.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, &pb.RateLimitRequest{
		Domain: *domain, HitsAddend: uint32(*hits), Descriptors: ds,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "ask:", err)
		os.Exit(1)
	}
	fmt.Println(resp.OverallCode)
	fmt.Println(protojson.Format(resp))
}
