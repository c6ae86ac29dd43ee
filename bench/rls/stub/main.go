// Command stub is a no-op Envoy rate limit service: it answers every
// ShouldRateLimit with OK and an OK status per descriptor, deciding
// nothing. It measures the ceiling of the load client and gRPC on this
// machine, the cost every real server pays before its own work.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

type stub struct {
	pb.UnimplementedRateLimitServiceServer
}

func (stub) ShouldRateLimit(_ context.Context, req *pb.RateLimitRequest) (*pb.RateLimitResponse, error) {
	resp := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_OK}
	for range req.Descriptors {
		resp.Statuses = append(resp.Statuses, &pb.RateLimitResponse_DescriptorStatus{Code: pb.RateLimitResponse_OK})
	}
	return resp, nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18085", "listen address")
	cert := flag.String("cert", "", "PEM certificate chain: serve TLS (with -key)")
	key := flag.String("key", "", "PEM private key of -cert")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "stub:", err)
		os.Exit(1)
	}
	var opts []grpc.ServerOption
	if *cert != "" {
		kp, err := tls.LoadX509KeyPair(*cert, *key)
		if err != nil {
			fmt.Fprintln(os.Stderr, "stub:", err)
			os.Exit(2)
		}
		opts = append(opts, grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{kp}})))
	}
	s := grpc.NewServer(opts...)
	pb.RegisterRateLimitServiceServer(s, stub{})
	if err := s.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, "stub:", err)
		os.Exit(1)
	}
}
