package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/ports"
)

// backend is the store side of the gateway, built from the config.
type backend struct {
	limiter ports.Limiter
	pinger  ports.Pinger
	closer  io.Closer
}

// newBackend is the composition root: the only place in tollgate that
// knows the adapters. It picks the store and algorithm from cfg.
func newBackend(ctx context.Context, cfg Config, log *slog.Logger) (backend, error) {
	switch cfg.Store {
	case StoreMemory:
		return newMemoryBackend(cfg)
	}
	return backend{}, fmt.Errorf("store %q: not implemented", cfg.Store)
}

func newMemoryBackend(cfg Config) (backend, error) {
	opts := memory.Options{}
	var (
		lim    ports.Limiter
		closer io.Closer
	)
	switch cfg.Algorithm {
	case AlgorithmFixedWindow:
		c := memory.NewCounter(opts)
		lim, closer = FixedWindowLimiter{Counter: c}, c
	case AlgorithmSlidingLog:
		l := memory.NewSlidingLog(opts)
		lim, closer = l, l
	case AlgorithmSlidingWindow:
		l := memory.NewSlidingWindow(opts)
		lim, closer = l, l
	case AlgorithmTokenBucket:
		l := memory.NewTokenBucket(opts)
		lim, closer = l, l
	default:
		return backend{}, fmt.Errorf("algorithm %q on the memory store: not implemented", cfg.Algorithm)
	}
	return backend{limiter: lim, pinger: alwaysUp{}, closer: closer}, nil
}

// alwaysUp is the Pinger of a store in process memory.
type alwaysUp struct{}

func (alwaysUp) Ping(context.Context) error { return nil }
