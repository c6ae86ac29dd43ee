// Package adapters is the one table of tollgate's algorithms: for each,
// its name and how to build it on every store. Config validation, -h,
// the composition root and the conformance tests all read [Algorithms],
// so a new algorithm is one row, wired and tested everywhere by
// construction. The stores themselves live in adapters/memory and
// adapters/redis, the layers around a decision in adapters/layers.
package adapters

import (
	"io"

	"github.com/tollgate/tollgate/adapters/fixedwindow"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/ports"
)

// MemoryLimiter is a limiter in process memory: it owns a sweeper, which
// Close stops.
type MemoryLimiter interface {
	ports.Limiter
	io.Closer
}

// MemoryCounter is a [ports.Counter] in process memory, with a sweeper.
type MemoryCounter interface {
	ports.Counter
	io.Closer
}

// Algorithm is one row of the table.
type Algorithm struct {
	// Name is the value of TOLLGATE_ALGORITHM, and part of its keys.
	Name string
	// Summary says in a phrase when the algorithm admits, for -h.
	Summary string
	// Memory builds the algorithm in process memory (one replica).
	Memory func(memory.Options) MemoryLimiter
	// Redis builds it on Redis, shared by every replica.
	Redis func(*redis.Client, redis.Options) ports.Limiter
	// MemoryCounter and RedisCounter, set for the fixed window only,
	// build the seed's counter (INCR first): with one limit and no
	// policy file the gateway decides over [SeedLimiter] of it.
	MemoryCounter func(memory.Options) MemoryCounter
	RedisCounter  func(*redis.Client, redis.Options) ports.Counter
}

// Algorithms is every algorithm tollgate has, the default first.
var Algorithms = []Algorithm{
	{
		Name:          domain.AlgorithmFixedWindow,
		Summary:       "count per window from its first request; up to 2x the limit across a boundary",
		Memory:        func(o memory.Options) MemoryLimiter { return memory.NewFixedWindow(o) },
		Redis:         func(c *redis.Client, o redis.Options) ports.Limiter { return redis.NewFixedWindow(c, o) },
		MemoryCounter: func(o memory.Options) MemoryCounter { return memory.NewCounter(o) },
		RedisCounter:  func(c *redis.Client, o redis.Options) ports.Counter { return redis.NewCounter(c, o) },
	},
	{
		Name:    domain.AlgorithmSlidingLog,
		Summary: "exact: fewer than limit admitted in the trailing window; O(limit) memory",
		Memory:  func(o memory.Options) MemoryLimiter { return memory.NewSlidingLog(o) },
		Redis:   func(c *redis.Client, o redis.Options) ports.Limiter { return redis.NewSlidingLog(c, o) },
	},
	{
		Name:    domain.AlgorithmSlidingWindow,
		Summary: "weighted estimate of the trailing window from two counts",
		Memory:  func(o memory.Options) MemoryLimiter { return memory.NewSlidingWindow(o) },
		Redis:   func(c *redis.Client, o redis.Options) ports.Limiter { return redis.NewSlidingWindow(c, o) },
	},
	{
		Name:    domain.AlgorithmTokenBucket,
		Summary: "a bucket of limit tokens refilled at limit/window (GCRA)",
		Memory:  func(o memory.Options) MemoryLimiter { return memory.NewTokenBucket(o) },
		Redis:   func(c *redis.Client, o redis.Options) ports.Limiter { return redis.NewTokenBucket(c, o) },
	},
}

// Lookup returns the row named name.
func Lookup(name string) (Algorithm, bool) {
	for _, a := range Algorithms {
		if a.Name == name {
			return a, true
		}
	}
	return Algorithm{}, false
}

// Names returns every algorithm's name, in table order.
func Names() []string {
	names := make([]string, len(Algorithms))
	for i, a := range Algorithms {
		names[i] = a.Name
	}
	return names
}

// SeedLimiter is the seed's fixed-window limiter over c: one INCR per
// decision, denied requests counted.
func SeedLimiter(c ports.Counter) ports.Limiter { return fixedwindow.Limiter{Counter: c} }
