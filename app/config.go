package app

import (
	"errors"
	"reflect"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/tollgate/tollgate/domain"
)

// EnvPrefix prefixes every environment variable tollgate reads.
const EnvPrefix = "TOLLGATE_"

// Accepted values of the enumerated settings.
const (
	StoreMemory = "memory"
	StoreRedis  = "redis"

	FailOpen   = "open"
	FailClosed = "closed"
	FailLocal  = "local"

	// MaxReplicas bounds TOLLGATE_REPLICAS.
	MaxReplicas = 10000

	RedisSingle  = "single"
	RedisCluster = "cluster"

	AnonymousShared = "shared"
	AnonymousIP     = "ip"
	AnonymousReject = "reject"

	// ListenOff as TOLLGATE_LISTEN_ADDR runs no proxy listener.
	ListenOff = "off"

	LeasesAuto = "auto"
	LeasesOff  = "off"

	// MaxMemoryKeys bounds TOLLGATE_MEMORY_MAX_KEYS.
	MaxMemoryKeys = 1 << 30
)

// Config is every setting of the gateway, parsed from TOLLGATE_* variables
// by [LoadConfig]. Nothing else in tollgate reads the environment. Each
// field's default, accepted values and check are its variable's row in
// the table of variables (app/vars.go).
type Config struct {
	// ListenAddr is the public listener: the rate-limited traffic,
	// proxied. [ListenOff] runs none (a gateway that only answers
	// checks).
	ListenAddr string `env:"LISTEN_ADDR"`
	// CheckAddr is the decision endpoint's listener, for nginx
	// auth_request, Caddy forward_auth and Traefik ForwardAuth; empty
	// means off.
	CheckAddr string `env:"CHECK_ADDR"`
	// CheckDenyStatus is the status of a denial on the check listener:
	// 429, or 403 for nginx auth_request (which takes any other status
	// but 2xx and 401 for an error).
	CheckDenyStatus int `env:"CHECK_DENY_STATUS"`
	// AdminAddr serves /healthz, /readyz and /metrics, never limited.
	AdminAddr string `env:"ADMIN_ADDR"`
	// AdminToken is the bearer token of the usage API on the admin
	// listener; empty turns the API off. Never printed.
	AdminToken string `env:"ADMIN_TOKEN"`
	// TopTenants is how many of the most denied tenants each limit
	// keeps, for /v1/top and the page at /ui/; 0 turns them off.
	TopTenants int `env:"TOP_TENANTS"`
	// UpstreamURL is where allowed requests are proxied; empty means the
	// built-in echo responder.
	UpstreamURL string `env:"UPSTREAM_URL"`
	// UpstreamTimeout bounds the wait for the upstream's response headers.
	UpstreamTimeout time.Duration `env:"UPSTREAM_TIMEOUT"`
	// Algorithm is one of fixed_window, sliding_log, sliding_window,
	// token_bucket.
	Algorithm string `env:"ALGORITHM"`
	// Store is memory (one replica) or redis (shared by all replicas).
	Store string `env:"STORE"`
	// Limit is the default budget: requests per window per tenant.
	Limit int64 `env:"LIMIT"`
	// Window is the default window.
	Window time.Duration `env:"WINDOW"`
	// FailMode is open (admit on a store error), closed (answer 503) or
	// local (decide in process with the limits divided by the replicas).
	FailMode string `env:"FAIL_MODE"`
	// Replicas is N for the local fail mode: the replicas sharing the
	// store. 0 counts them through the store.
	Replicas int `env:"REPLICAS"`
	// DenyCache answers an already-denied tenant from memory until its
	// Retry-After.
	DenyCache bool `env:"DENY_CACHE"`
	// MemoryMaxKeys bounds the keys of the memory store: past it, new
	// tenants are decided as the shared unknown tenant.
	MemoryMaxKeys int `env:"MEMORY_MAX_KEYS"`
	// TenantHeader carries the tenant id when no tenants file is set. Only
	// trust it behind an edge that sets and overwrites it.
	TenantHeader string `env:"TENANT_HEADER"`
	// TenantsFile is a JSON file of tenants, API keys and budgets.
	TenantsFile string `env:"TENANTS_FILE"`
	// PolicyFile is a JSON file of named limits and routes; empty means
	// one limit, "default", of Limit per Window.
	PolicyFile string `env:"POLICY_FILE"`
	// Shadow puts every limit in shadow mode: would-be denials are
	// forwarded, logged and counted.
	Shadow bool `env:"SHADOW"`
	// TrustedProxies are the CIDRs whose X-Forwarded-For and Forwarded
	// the gateway believes (comma-separated).
	TrustedProxies string `env:"TRUSTED_PROXIES"`
	// Anonymous is how unresolved traffic is metered: shared (the one
	// tenant unknown) or ip (per client address).
	Anonymous string `env:"ANONYMOUS"`
	// IPv6Prefix groups IPv6 clients with Anonymous=ip: per prefix of this
	// many bits.
	IPv6Prefix int `env:"IPV6_PREFIX"`
	// RedisMode is single (one Redis, or a proxy) or cluster (Redis
	// Cluster: RedisURL is then a seed list).
	RedisMode string `env:"REDIS_MODE"`
	// RedisURL is a go-redis URL; it may hold credentials. In cluster
	// mode, redis://[user:pass@]host:port?addr=host2:port2&addr=...
	RedisURL string `env:"REDIS_URL"`
	// RedisTimeout is how long a decision in flight may go without Redis
	// answering anything before it takes the fail mode (see
	// adapters/redis/conn: the wait in this process's own queue does not
	// count).
	RedisTimeout time.Duration `env:"REDIS_TIMEOUT"`
	// Lease is how long a concurrency slot of a vanished replica stays
	// taken on the Redis store after its last renewal (running requests
	// renew theirs every third of it).
	Lease time.Duration `env:"LEASE"`
	// Leases is auto (a replica takes slices of hot keys' budgets from a
	// shared store and decides from them in memory) or off.
	Leases string `env:"LEASES"`
	// KeyPrefix prefixes every key the gateway writes. It holds no '{'
	// or '}': the tenant is every key's Redis Cluster hash tag, and a
	// brace in front of it would make the prefix the tag (every tenant
	// on one slot) or split a decision's keys over slots.
	KeyPrefix string `env:"KEY_PREFIX"`
	// AccessLog writes one JSON line per request on stderr.
	AccessLog bool `env:"ACCESS_LOG"`
	// LogLevel is debug, info, warn or error.
	LogLevel string `env:"LOG_LEVEL"`
	// Pprof serves net/http/pprof under /debug/pprof/ on the admin
	// listener, for profiling under load. Off by default: profiles reveal
	// the process's internals, and the admin listener may be reachable
	// by more than its operators.
	Pprof bool `env:"PPROF"`
	// RLSAddr is the gRPC listener of Envoy's rate limit service; empty
	// means off.
	RLSAddr string `env:"RLS_ADDR"`
	// RLSConfig is the directory of envoyproxy/ratelimit YAML files the
	// rate limit service decides with (required with RLSAddr).
	RLSConfig string `env:"RLS_CONFIG"`
	// RLSCountDenied counts every descriptor's hits whatever the verdict,
	// as envoyproxy/ratelimit does; false is all or nothing.
	RLSCountDenied bool `env:"RLS_COUNT_DENIED"`
	// RLSResponseHeaders adds RateLimit-Limit/-Remaining/-Reset to the
	// rate limit service's answers.
	RLSResponseHeaders bool `env:"RLS_RESPONSE_HEADERS"`
	// RLSTLSCert and RLSTLSKey are PEM files: with them the rate limit
	// service serves TLS, read again when they change.
	RLSTLSCert string `env:"RLS_TLS_CERT"`
	RLSTLSKey  string `env:"RLS_TLS_KEY"`
	// RLSTLSClientCA is a PEM file: the rate limit service requires a
	// client certificate signed by it (mutual TLS).
	RLSTLSClientCA string `env:"RLS_TLS_CLIENT_CA"`
	// RLSXDS is the host:port of an xDS server that serves the rate
	// limit service's configuration, instead of RLSConfig's directory.
	RLSXDS string `env:"RLS_XDS"`
	// RLSXDSNodeID is the node id presented to that xDS server.
	RLSXDSNodeID string `env:"RLS_XDS_NODE_ID"`
	// RLSXDSTLSCA, RLSXDSTLSCert and RLSXDSTLSKey are PEM files: the CA
	// the xDS server's certificate is checked against (TLS), and the
	// client certificate presented to it (mutual TLS).
	RLSXDSTLSCA   string `env:"RLS_XDS_TLS_CA"`
	RLSXDSTLSCert string `env:"RLS_XDS_TLS_CERT"`
	RLSXDSTLSKey  string `env:"RLS_XDS_TLS_KEY"`
}

// LoadConfig parses environ (KEY=value pairs, as os.Environ returns) into a
// validated Config. environ replaces the process environment entirely, so
// tests stay hermetic. Every problem is reported, each as a *ConfigError,
// joined into one error.
func LoadConfig(environ []string) (Config, error) {
	vars := env.ToMap(environ)
	cfg, err := env.ParseAsWithOptions[Config](env.Options{Environment: withDefaults(vars), Prefix: EnvPrefix})
	if err == nil {
		return cfg, cfg.validate(vars, nil)
	}
	// The variables that do not parse are reported; the others are still
	// checked, each of those given its default meanwhile, so that one run
	// names every bad variable.
	unparsed, perr := parseErrors(err, vars)
	rest := make(map[string]string, len(vars))
	for k, v := range vars {
		if !unparsed[strings.TrimPrefix(k, EnvPrefix)] {
			rest[k] = v
		}
	}
	cfg, err = env.ParseAsWithOptions[Config](env.Options{Environment: withDefaults(rest), Prefix: EnvPrefix})
	if err != nil {
		return Config{}, perr
	}
	return Config{}, errors.Join(perr, cfg.validate(rest, unparsed))
}

// parseErrors returns the names (without the prefix) of the variables
// that did not parse, and env's errors turned into ConfigErrors that name
// them.
func parseErrors(err error, vars map[string]string) (map[string]bool, error) {
	var agg env.AggregateError
	if !errors.As(err, &agg) {
		return nil, err
	}
	var errs []error
	unparsed := make(map[string]bool)
	for _, e := range agg.Errors {
		var pe env.ParseError
		if !errors.As(e, &pe) {
			errs = append(errs, e)
			continue
		}
		name := envName(pe.Name)
		unparsed[name] = true
		errs = append(errs, configError(name, vars[EnvPrefix+name]))
	}
	return unparsed, errors.Join(errs...)
}

// envName returns the env tag of Config's field, without the prefix.
func envName(field string) string {
	f, ok := reflect.TypeFor[Config]().FieldByName(field)
	if !ok {
		return field
	}
	name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
	return name
}

// configField returns the value of c's field whose env tag is name.
func configField(c Config, name string) any {
	v := reflect.ValueOf(c)
	for i := range v.NumField() {
		if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("env"), ","); tag == name {
			return v.Field(i).Interface()
		}
	}
	return nil
}

// Rule returns the default rule: LIMIT per WINDOW.
func (c Config) Rule() domain.Rule {
	return domain.Rule{Limit: c.Limit, Window: c.Window}
}
