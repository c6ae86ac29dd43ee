package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/tollgate/tollgate/adapters/layers"
	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/adapters/redis"
	"github.com/tollgate/tollgate/adapters/redis/conn"
	"github.com/tollgate/tollgate/adapters/redis/fleet"
	"github.com/tollgate/tollgate/adapters/redis/keyring"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/ports"
)

// This file is the composition root: the only place in tollgate that
// knows the adapters.

// store is one row of the table of stores, TOLLGATE_STORE's values:
// every store builds every algorithm of domain.Algorithms (each store's
// own TestEveryAlgorithm), so a new store is a row here and a package.
type store struct {
	name, summary string
	// open builds cfg.Algorithm on the store, with what the layers need
	// of it.
	open func(ctx context.Context, cfg Config, env backendEnv) (opened, error)
}

var stores = []store{
	{name: StoreMemory, summary: "one replica, in process", open: openMemory},
	{name: StoreRedis, summary: "Redis or Valkey, shared by every replica", open: openRedis},
}

// opened is a store built by its row's open: what the engine decides
// with, and what the layers around it need of it.
type opened struct {
	views   views             // the HTTP faces' limiter and the rate limit service's
	usage   ports.Usage       // the store's reads and resets
	idem    ports.Idempotency // calls made once (a spend's Idempotency-Key)
	pinger  ports.Pinger      // its readiness check
	apiKeys ports.APIKeys     // the API keys issued at runtime
	closers []io.Closer       // what to close, in order, after the layers'
	// shared is what a store the replicas share gives its layers; nil
	// for a store in process, which neither fails nor has other replicas.
	shared *sharedStore
}

// sharedStore is what a store shared by replicas gives the layers: it can
// fail (the fail mode and the breaker, probing its pinger, apply), it
// counts the replicas sharing it (the local fail mode's N), and it
// carries a tenant's resets to the other replicas.
type sharedStore struct {
	// countReplicas starts counting the replicas through the store; n
	// is the count, stop withdraws this replica.
	countReplicas func(cfg Config, env backendEnv) (n func() int, stop io.Closer)
	// listenResets starts hearing the resets announced through the
	// store (this replica's own included), and returns where to announce
	// them.
	listenResets func(prefix string, heard func(domain.TenantID, []string)) resetBus
	// board is where the replicas post what each has seen, for the
	// fleet's top tenants.
	board func(prefix string) ports.Board
}

// resetBus carries resets to the other replicas, until closed.
type resetBus interface {
	Announce(ctx context.Context, tenant domain.TenantID, keys []string) error
	io.Closer
}

// storeNamed returns the row of name.
func storeNamed(name string) (store, bool) {
	for _, s := range stores {
		if s.name == name {
			return s, true
		}
	}
	return store{}, false
}

// storeNames says what TOLLGATE_STORE accepts: "memory or redis: …".
func storeNames() string {
	names := make([]string, len(stores))
	what := make([]string, len(stores))
	for i, s := range stores {
		names[i] = s.name
		what[i] = s.name + " is " + s.summary
	}
	return strings.Join(names, " or ") + " (" + strings.Join(what, "; ") + ")"
}

// validRedisURL checks TOLLGATE_REDIS_URL when the store is Redis.
func validRedisURL(c Config) error {
	if c.RedisMode == RedisCluster {
		return conn.ValidateClusterURL(c.RedisURL)
	}
	return conn.ValidateURL(c.RedisURL)
}

// backendEnv is what a store's open may use besides the config.
type backendEnv struct {
	onError func(error)
	metrics *metrics.Metrics
	log     *slog.Logger
	replica string // this replica's name among those sharing a store
}

// backend is the store side of the gateway, built from the config: the
// Limiter the engine decides with (the store's, wrapped in its layers),
// the store's readiness check, and what to close at the end.
type backend struct {
	limiter    ports.Limiter // the HTTP faces'
	planned    ports.Limiter // the rate limit service's (nil without it)
	keys       ports.Keys    // the store's key layout
	pinger     ports.Pinger
	usage      ports.Usage       // the store's, resetting the layers' memory of a tenant too
	settler    ports.Settler     // the HTTP view's: settles token reservations
	rlsSettler ports.Settler     // the rate limit service's view's: charges denied hits (nil: none)
	rlsEvery   bool              // with rlsSettler: every limit of a denied request
	idem       ports.Idempotency // the store's memory of calls made once
	board      ports.Board       // the replicas' posts; nil for a store in process
	replica    string            // this replica's name among those sharing the store
	closers    []io.Closer       // closed in order: the layers' goroutines, then the store
	// apiKeys are the API keys issued at runtime, on the store; shared
	// tells whether other replicas share them (keyRing).
	apiKeys ports.APIKeys
	shared  bool
}

// Close closes what the backend holds, in order, and returns the errors.
func (be backend) Close() error {
	var errs []error
	for _, c := range be.closers {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// newBackend builds cfg.Algorithm on cfg.Store and wraps it in the layers
// a request meets, in order: the deny cache (TOLLGATE_DENY_CACHE), the
// fail mode (open, closed, or local: the same algorithm in memory, limits
// divided by the replicas), the breaker (a shared store: the memory store
// does not fail), then the store.
func newBackend(ctx context.Context, cfg Config, onError func(error), m *metrics.Metrics, log *slog.Logger) (backend, error) {
	st, ok := storeNamed(cfg.Store)
	if !ok {
		return backend{}, fmt.Errorf("store %q: not in the table", cfg.Store) // Validate rejects it first
	}
	env := backendEnv{onError: onError, metrics: m, log: log, replica: replicaID()}
	op, err := st.open(ctx, cfg, env)
	if err != nil {
		return backend{}, err
	}
	be := backend{pinger: op.pinger, keys: keyLayout(cfg), settler: op.views.httpSettler, idem: op.idem, apiKeys: op.apiKeys, shared: op.shared != nil, replica: env.replica}
	be.rlsSettler, be.rlsEvery = rlsCharges(cfg, op.views)
	resets := resets{Usage: op.usage}
	be.usage = &resets
	var inner []ports.Layer // the breaker, on a shared store
	replicas := func() int { return 1 }
	if op.shared != nil {
		b := layers.NewBreaker(layers.BreakerOptions{
			Probe:        op.pinger,
			Timeout:      cfg.RedisTimeout,
			OnProbeError: probeErrorReporter(log, m),
			OnChange:     m.SetStoreUp,
		})
		inner = append(inner, b.Layer())
		be.closers = append(be.closers, b)
		be.board = op.shared.board(cfg.KeyPrefix)
		if cfg.FailMode == FailLocal && cfg.Replicas == 0 {
			count, closer := op.shared.countReplicas(cfg, env)
			replicas = count
			be.closers = append(be.closers, closer) // withdraws before the client closes
		}
	}
	be.closers = append(be.closers, op.closers...)
	if cfg.Replicas > 0 {
		replicas = func() int { return cfg.Replicas }
		m.SetReplicas(cfg.Replicas)
	}
	failHTTP, failRLS, local, err := failModes(cfg, replicas, onError)
	if err != nil {
		return backend{}, err
	}
	if local != nil {
		be.closers = append(be.closers, local)
		resets.also = append(resets.also, local) // and the keys of other replicas' resets, heard
	}
	var forget func(domain.TenantID)
	leased := leases(cfg, op, env)
	be.limiter, be.planned, forget = chains(cfg, op.views, failHTTP, failRLS, leased, inner)
	if forget != nil {
		resets.forget = append(resets.forget, forget)
	}
	if leased != nil {
		resets.leased = true
		resets.forget = append(resets.forget, leased.Forget)
		// Its slices go back before the store closes.
		be.closers = append([]io.Closer{leased}, be.closers...)
	}
	if op.shared != nil && (len(resets.forget) > 0 || len(resets.also) > 0) {
		// Other replicas' resets, heard at once (and for the deny cache
		// within a second regardless: its own bound).
		bus := op.shared.listenResets(cfg.KeyPrefix, func(t domain.TenantID, keys []string) {
			resets.heard(be.keys, t, keys)
		})
		resets.announce = func(ctx context.Context, req domain.Request) {
			if err := bus.Announce(ctx, req.Tenant, keySuffixes(be.keys, req)); err != nil {
				env.log.Warn("usage API: the reset was not announced to the other replicas; they forget the tenant's denials within a second, and keep its local fail-mode counts", "tenant", string(req.Tenant), "err", err)
			}
		}
		be.closers = append([]io.Closer{bus}, be.closers...) // unsubscribes before anything closes
	}
	return be, nil
}

// openMemory is the memory store's open.
func openMemory(_ context.Context, cfg Config, _ backendEnv) (opened, error) {
	st, vs, err := memoryViews(cfg)
	if err != nil {
		return opened{}, err
	}
	op := opened{views: vs, usage: st, idem: memory.NewIdempotency(nil), pinger: alwaysUp{}, apiKeys: memory.NewAPIKeys(), closers: []io.Closer{st}}
	return op, nil
}

// memoryMaxKeys is TOLLGATE_MEMORY_MAX_KEYS as memory.Options wants it:
// 0 means no bound there.
func memoryMaxKeys(cfg Config) int {
	if cfg.MemoryMaxKeys == 0 {
		return -1
	}
	return cfg.MemoryMaxKeys
}

// openRedis is the Redis store's open: a client tuned for a gateway,
// checked (and its connections warmed) at start-up.
func openRedis(ctx context.Context, cfg Config, env backendEnv) (opened, error) {
	client, err := conn.Open(cfg.RedisURL, conn.Options{
		Timeout: cfg.RedisTimeout,
		Cluster: cfg.RedisMode == RedisCluster,
	})
	if err != nil {
		return opened{}, fmt.Errorf("redis url %s: %w", MaskURL(cfg.RedisURL), err)
	}
	if client.TLSUnverified() {
		env.log.Warn("redis: TLS without certificate verification (skip_verify=true in TOLLGATE_REDIS_URL): whoever is on the path to Redis can pose as it")
	}
	checkRedis(ctx, client, cfg, env.log)
	// The slots of concurrency limits: leases this replica renews.
	leases := fleet.NewLeases(client, fleet.LeaseOptions{Lease: cfg.Lease, Replica: env.replica, OnError: env.onError})
	vs, usage, err := redisViews(cfg, client, leases)
	if err != nil {
		leases.Close()
		client.Close()
		return opened{}, err
	}
	op := opened{views: vs, usage: usage, idem: redis.NewIdempotency(client, cfg.KeyPrefix), pinger: client,
		apiKeys: keyring.New(client.Redis(), cfg.KeyPrefix), closers: []io.Closer{leases, client}, shared: redisShared(client)}
	return op, nil
}

// redisShared is what the Redis store of client gives the layers: the
// replicas counted and the resets carried through it.
func redisShared(client *conn.Client) *sharedStore {
	return &sharedStore{
		countReplicas: func(cfg Config, env backendEnv) (func() int, io.Closer) {
			return countReplicas(cfg, fleet.NewReplicas(client, cfg.KeyPrefix), env)
		},
		listenResets: func(prefix string, heard func(domain.TenantID, []string)) resetBus {
			return fleet.ListenResets(client, prefix, heard)
		},
		board: func(prefix string) ports.Board { return fleet.NewBoard(client, prefix) },
	}
}

// countReplicas counts the replicas sharing a store through announcer,
// for the local fail mode's N.
func countReplicas(cfg Config, announcer layers.Announcer, env backendEnv) (func() int, io.Closer) {
	count := layers.NewReplicaCount(layers.ReplicaCountOptions{
		Announcer: announcer,
		ID:        env.replica,
		OnError:   env.onError,
		OnCount:   env.metrics.SetReplicas,
		OnOvercount: func(renewing, listening int) {
			if listening == 0 {
				env.log.Info("replica count: Redis no longer vouches for the listeners; counting every member that renews", "key", cfg.KeyPrefix+"replicas", "renewing", renewing)
				return
			}
			if renewing > listening {
				env.log.Warn("replica count: more members renew announcements than replicas listen on Redis; counting the listeners", "key", cfg.KeyPrefix+"replicas", "renewing", renewing, "listening", listening)
				return
			}
			env.log.Info("replica count: the members renewing announcements are the replicas listening again", "key", cfg.KeyPrefix+"replicas", "replicas", listening)
		},
		OnListenError: func(err error) {
			env.log.Warn("replica count: not listening on Redis; the others do not count this replica, and it counts every member that renews", "channel", cfg.KeyPrefix+"replicas", "err", err)
		},
	})
	return count.N, count
}

// replicaID names this process among the replicas: host, process id and
// random bits, so that two processes never share one.
func replicaID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s:%d:%x", host, os.Getpid(), b)
}

// alwaysUp is the Pinger of a store in process memory.
type alwaysUp struct{}

func (alwaysUp) Ping(context.Context) error { return nil }
