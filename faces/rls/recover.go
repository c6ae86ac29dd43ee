package rls

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// errInternal answers a call whose handler panicked. It says nothing of
// the panic: the log line does.
var errInternal = status.Error(codes.Internal, "internal error")

// recoverer is a unary interceptor that turns a panic in a handler into
// INTERNAL and one JSON log line on log, as the HTTP faces' Recoverer
// turns one into a 500: grpc-go recovers nothing, and a panic in one call
// would end the process and every call in flight with it.
func recoverer(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (resp any, err error) {
		defer recovered(log, info.FullMethod, &err)
		return next(ctx, req)
	}
}

// recoverStream is recoverer for streaming calls (Health's Watch).
func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, next grpc.StreamHandler) (err error) {
		defer recovered(log, info.FullMethod, &err)
		return next(srv, ss)
	}
}

// recovered, deferred, logs a panic of the call to method and makes its
// error errInternal (a unary call's reply stays nil: its handler never
// returned one).
func recovered(log *slog.Logger, method string, err *error) {
	if v := recover(); v != nil {
		log.Error("handler panic", "panic", fmt.Sprint(v), "method", method, "stack", string(debug.Stack()))
		*err = errInternal
	}
}
