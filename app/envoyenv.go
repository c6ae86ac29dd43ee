package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/tollgate/tollgate/ports"
)

// EnvoyRatelimitFlag makes tollgate read envoyproxy/ratelimit's
// environment, as running it under the name ratelimit does.
const EnvoyRatelimitFlag = "-envoy-ratelimit"

// envoyMode reports whether args ask for envoyproxy/ratelimit's
// environment: the program's base name is ratelimit (an image where
// /bin/ratelimit is tollgate), or its one argument is
// EnvoyRatelimitFlag. It returns args without the flag.
func envoyMode(args []string) (bool, []string) {
	if len(args) > 1 && args[1] == EnvoyRatelimitFlag {
		return true, append(args[:1:1], args[2:]...)
	}
	return len(args) > 0 && filepath.Base(args[0]) == "ratelimit", args
}

// envoyEnv is what envoyproxy/ratelimit's environment says beyond the
// TOLLGATE_* variables it sets.
type envoyEnv struct {
	// httpAddr is HOST:PORT: /healthcheck, and the admin endpoints
	// unless TOLLGATE_ADMIN_ADDR is set.
	httpAddr string
	// adminOnHTTP is true when the admin listener is HOST:PORT
	// (TOLLGATE_ADMIN_ADDR unset).
	adminOnHTTP bool
	// metricsAddr is PROMETHEUS_ADDR with USE_PROMETHEUS=true: /metrics;
	// "" otherwise.
	metricsAddr string
	// ignored are the envoyproxy/ratelimit variables set that tollgate
	// does not honour, sorted.
	ignored []string
	// replaced are the TOLLGATE_* variables set that an
	// envoyproxy/ratelimit variable (or its default) replaces, sorted.
	replaced []string
	// noRedis is true when REDIS_URL is unset: the store is then
	// TOLLGATE_STORE's, not Redis.
	noRedis bool
	// healthFollowsStore is REDIS_HEALTH_CHECK_ACTIVE_CONNECTION:
	// /healthcheck answers 500 while the store does not answer. Without
	// it, as envoyproxy/ratelimit by default, /healthcheck says the
	// process serves, and the fail mode decides while Redis is down.
	healthFollowsStore bool
}

// envoyVariables are envoyproxy/ratelimit's variables (its settings,
// snapshot f2fb157): those set that fromEnvoy does not read are named
// in a start-up warning.
var envoyVariables = strings.Fields(`HOST PORT DEBUG_HOST DEBUG_PORT GRPC_UDS GRPC_HOST GRPC_PORT
GRPC_MAX_CONNECTION_AGE GRPC_MAX_CONNECTION_AGE_GRACE GRPC_SERVER_USE_TLS GRPC_SERVER_TLS_CERT
GRPC_SERVER_TLS_KEY GRPC_CLIENT_TLS_CACERT GRPC_CLIENT_TLS_SAN LOG_LEVEL LOG_FORMAT CONFIG_TYPE
FORCE_START_WITHOUT_INITIAL_CONFIG CONFIG_GRPC_XDS_NODE_ID CONFIG_GRPC_XDS_NODE_METADATA
CONFIG_GRPC_XDS_SERVER_URL CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL
CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS CONFIG_GRPC_XDS_SERVER_USE_TLS CONFIG_GRPC_XDS_CLIENT_TLS_CERT
CONFIG_GRPC_XDS_CLIENT_TLS_KEY CONFIG_GRPC_XDS_SERVER_TLS_CACERT CONFIG_GRPC_XDS_SERVER_TLS_SAN
XDS_CLIENT_BACKOFF_INITIAL_INTERVAL XDS_CLIENT_BACKOFF_MAX_INTERVAL XDS_CLIENT_BACKOFF_RANDOM_FACTOR
XDS_CLIENT_BACKOFF_JITTER XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES USE_DOG_STATSD USE_DOG_STATSD_MOGRIFIERS
USE_STATSD STATSD_HOST STATSD_PORT EXTRA_TAGS STATS_FLUSH_INTERVAL DISABLE_STATS USE_PROMETHEUS
PROMETHEUS_ADDR PROMETHEUS_PATH PROMETHEUS_MAPPER_YAML PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS
RUNTIME_ROOT RUNTIME_SUBDIRECTORY RUNTIME_APPDIRECTORY RUNTIME_IGNOREDOTFILES RUNTIME_WATCH_ROOT
EXPIRATION_JITTER_MAX_SECONDS LOCAL_CACHE_SIZE_IN_BYTES NEAR_LIMIT_RATIO CACHE_KEY_PREFIX BACKEND_TYPE
STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT LIMIT_RESPONSE_HEADERS_ENABLED LIMIT_LIMIT_HEADER
LIMIT_REMAINING_HEADER LIMIT_RESET_HEADER HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED REDIS_SOCKET_TYPE
REDIS_TYPE REDIS_URL REDIS_POOL_SIZE REDIS_AUTH REDIS_TLS REDIS_TLS_CLIENT_CERT REDIS_TLS_CLIENT_KEY
REDIS_TLS_CACERT REDIS_TLS_SKIP_HOSTNAME_VERIFICATION REDIS_PIPELINE_WINDOW REDIS_PIPELINE_LIMIT
REDIS_CLUSTER_PIPELINE_PARALLELISM REDIS_PERSECOND REDIS_PERSECOND_SOCKET_TYPE REDIS_PERSECOND_TYPE
REDIS_PERSECOND_URL REDIS_PERSECOND_POOL_SIZE REDIS_PERSECOND_AUTH REDIS_PERSECOND_TLS
REDIS_SENTINEL_AUTH REDIS_PERSECOND_SENTINEL_AUTH REDIS_PERSECOND_PIPELINE_WINDOW
REDIS_PERSECOND_PIPELINE_LIMIT REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM
REDIS_TIMEOUT REDIS_PERSECOND_TIMEOUT REDIS_POOL_ON_EMPTY_BEHAVIOR
REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR REDIS_STARTUP_INITIAL_INTERVAL REDIS_STARTUP_MAX_INTERVAL
REDIS_STARTUP_MAX_ELAPSED_TIME MEMCACHE_HOST_PORT MEMCACHE_MAX_IDLE_CONNS MEMCACHE_SRV
MEMCACHE_SRV_REFRESH MEMCACHE_TLS MEMCACHE_TLS_CLIENT_CERT MEMCACHE_TLS_CLIENT_KEY MEMCACHE_TLS_CACERT
MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION SHADOW_MODE QUOTA_MODE RESPONSE_DYNAMIC_METADATA
MERGE_DOMAIN_CONFIG TRACING_ENABLED TRACING_SERVICE_NAME TRACING_SERVICE_NAMESPACE
TRACING_SERVICE_INSTANCE_ID TRACING_EXPORTER_PROTOCOL TRACING_SAMPLING_RATE`)

// envoyReader reads envoyproxy/ratelimit's variables from one
// environment and writes the TOLLGATE_* ones they name.
type envoyReader struct {
	in   map[string]string // the environment as given
	out  map[string]string // what LoadConfig reads
	read map[string]bool   // the envoyproxy/ratelimit variables honoured
	errs []error
	e    envoyEnv
}

// get returns name's value, or def when it is unset or empty, and
// marks it honoured.
func (r *envoyReader) get(name, def string) string {
	r.read[name] = true
	if v := r.in[name]; v != "" {
		return v
	}
	return def
}

// bool returns name's value as a boolean, as envoyproxy/ratelimit parses
// it (strconv.ParseBool), false when unset.
func (r *envoyReader) bool(name string) bool {
	v := r.get(name, "false")
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "true or false (also 1, 0, t, f)", "")
	}
	return b
}

// port returns HOST-like hostVar and port-like portVar as host:port.
func (r *envoyReader) addr(hostVar, hostDef, portVar, portDef string) string {
	host, port := r.get(hostVar, hostDef), r.get(portVar, portDef)
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		r.fail(portVar, port, "a port number from 0 to 65535", "")
	}
	return net.JoinHostPort(host, port)
}

// fail records a value that tollgate cannot honour.
func (r *envoyReader) fail(name, value, want, why string) {
	r.errs = append(r.errs, &ConfigError{Var: name, Value: value, Want: want, Why: why})
}

// set makes the TOLLGATE_* variable name (without the prefix) value,
// noting a value set that it replaces.
func (r *envoyReader) set(name, value string) {
	if old := r.in[EnvPrefix+name]; old != "" && old != value {
		r.e.replaced = append(r.e.replaced, EnvPrefix+name)
	}
	r.out[EnvPrefix+name] = value
}

// fromEnvoy returns environ with the TOLLGATE_* variables that
// envoyproxy/ratelimit's variables in it name (those win over the same
// TOLLGATE_* variables, but for TOLLGATE_LISTEN_ADDR and
// TOLLGATE_ADMIN_ADDR), and what else they say. A value tollgate cannot
// honour is a *ConfigError naming the variable; all are joined.
func fromEnvoy(environ []string) ([]string, *envoyEnv, error) {
	in := env.ToMap(environ)
	r := &envoyReader{in: in, out: make(map[string]string, len(in)), read: map[string]bool{}}
	for k, v := range in {
		r.out[k] = v
	}

	// Listeners: no proxy; gRPC on GRPC_HOST:GRPC_PORT; the admin
	// endpoints and /healthcheck on HOST:PORT.
	if in[EnvPrefix+"LISTEN_ADDR"] == "" {
		r.out[EnvPrefix+"LISTEN_ADDR"] = ListenOff
	}
	r.set("RLS_ADDR", r.addr("GRPC_HOST", "0.0.0.0", "GRPC_PORT", "8081"))
	r.e.httpAddr = r.addr("HOST", "0.0.0.0", "PORT", "8080")
	if in[EnvPrefix+"ADMIN_ADDR"] == "" {
		r.out[EnvPrefix+"ADMIN_ADDR"] = r.e.httpAddr
		r.e.adminOnHTTP = true
	}
	if r.bool("USE_PROMETHEUS") {
		r.e.metricsAddr = r.get("PROMETHEUS_ADDR", ":9090")
	}
	r.e.healthFollowsStore = r.bool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION")

	// TLS on the gRPC listener.
	if r.bool("GRPC_SERVER_USE_TLS") {
		cert, key := r.get("GRPC_SERVER_TLS_CERT", ""), r.get("GRPC_SERVER_TLS_KEY", "")
		if cert == "" || key == "" {
			r.fail("GRPC_SERVER_USE_TLS", "true", "false, or true with GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY set", "a certificate and its key are needed")
		}
		r.set("RLS_TLS_CERT", cert)
		r.set("RLS_TLS_KEY", key)
		r.set("RLS_TLS_CLIENT_CA", r.get("GRPC_CLIENT_TLS_CACERT", ""))
	}

	// Where the configuration comes from: the runtime directory (its
	// variables read, as there, whatever CONFIG_TYPE says), or xDS.
	dir := filepath.Join(r.get("RUNTIME_ROOT", "/srv/runtime_data/current"), r.get("RUNTIME_SUBDIRECTORY", ""), r.get("RUNTIME_APPDIRECTORY", "config"))
	switch typ := r.get("CONFIG_TYPE", "FILE"); typ {
	case "FILE":
		r.set("RLS_CONFIG", dir)
	case "GRPC_XDS_SOTW":
		if in[EnvPrefix+"RLS_CONFIG"] != "" {
			r.e.replaced = append(r.e.replaced, EnvPrefix+"RLS_CONFIG")
			delete(r.out, EnvPrefix+"RLS_CONFIG")
		}
		r.set("RLS_XDS", r.get("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"))
		r.set("RLS_XDS_NODE_ID", r.get("CONFIG_GRPC_XDS_NODE_ID", "default"))
		if r.bool("CONFIG_GRPC_XDS_SERVER_USE_TLS") {
			ca, cert, key := r.get("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ""), r.get("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ""), r.get("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", "")
			if ca == "" && cert == "" {
				r.fail("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true", "false, or true with CONFIG_GRPC_XDS_SERVER_TLS_CACERT or CONFIG_GRPC_XDS_CLIENT_TLS_CERT set", "tollgate trusts the system's roots only beside a client certificate")
			}
			r.set("RLS_XDS_TLS_CA", ca)
			r.set("RLS_XDS_TLS_CERT", cert)
			r.set("RLS_XDS_TLS_KEY", key)
		}
	default:
		r.fail("CONFIG_TYPE", typ, "FILE or GRPC_XDS_SOTW", "")
	}
	// Honoured as tollgate always behaves: it listens before the first
	// configuration, skips dot files, and sees a changed directory
	// whether its root or its files change.
	r.bool("FORCE_START_WITHOUT_INITIAL_CONFIG")
	r.bool("RUNTIME_WATCH_ROOT")
	if !r.bool("RUNTIME_IGNOREDOTFILES") && in["RUNTIME_IGNOREDOTFILES"] != "" {
		r.read["RUNTIME_IGNOREDOTFILES"] = false // false is not honoured
	}

	r.redis()

	if p := r.get("CACHE_KEY_PREFIX", ""); p != "" {
		r.set("KEY_PREFIX", p)
	}
	// One domain over several files or resources is always merged.
	if b, err := strconv.ParseBool(in["MERGE_DOMAIN_CONFIG"]); err == nil && b {
		r.read["MERGE_DOMAIN_CONFIG"] = true
	}
	if r.bool("LIMIT_RESPONSE_HEADERS_ENABLED") {
		r.set("RLS_RESPONSE_HEADERS", "true")
	}
	if r.bool("SHADOW_MODE") {
		r.set("SHADOW", "true")
	}
	if v := r.get("LOG_LEVEL", ""); v != "" {
		level, ok := envoyLogLevels[strings.ToLower(v)]
		if !ok {
			r.fail("LOG_LEVEL", v, "trace, debug, info, warn(ing), error, fatal or panic", "")
		}
		r.set("LOG_LEVEL", level)
	}
	// What asks for nothing tollgate does is honoured by not doing it.
	if v := strings.ToLower(in["LOG_FORMAT"]); v == "" || v == "json" {
		r.read["LOG_FORMAT"] = true
	}
	for _, name := range []string{"USE_STATSD", "USE_DOG_STATSD", "TRACING_ENABLED"} {
		if b, err := strconv.ParseBool(in[name]); in[name] == "" || (err == nil && !b) {
			r.read[name] = true
		}
	}
	if b := in["BACKEND_TYPE"]; b == "" || strings.EqualFold(b, "redis") {
		r.read["BACKEND_TYPE"] = true
	}

	for _, name := range envoyVariables {
		if in[name] != "" && !r.read[name] {
			r.e.ignored = append(r.e.ignored, name)
		}
	}
	slices.Sort(r.e.ignored)
	slices.Sort(r.e.replaced)
	r.e.replaced = slices.Compact(r.e.replaced)
	out := make([]string, 0, len(r.out))
	for k, v := range r.out {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, &r.e, errors.Join(r.errs...)
}

// envoyLogLevels maps envoyproxy/ratelimit's log levels (logrus's, in
// lower case) to tollgate's.
var envoyLogLevels = map[string]string{
	"trace": "debug", "debug": "debug", "info": "info", "warn": "warn", "warning": "warn",
	"error": "error", "fatal": "error", "panic": "error",
}

// redis reads REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_URL, REDIS_AUTH and
// REDIS_TLS into the store's variables. Without REDIS_URL the store is
// TOLLGATE_STORE's.
func (r *envoyReader) redis() {
	socket := strings.ToLower(r.get("REDIS_SOCKET_TYPE", "unix"))
	typ := strings.ToLower(r.get("REDIS_TYPE", "single"))
	auth, tls := r.get("REDIS_AUTH", ""), r.bool("REDIS_TLS")
	addrs := r.get("REDIS_URL", "")
	if addrs == "" {
		r.e.noRedis = true
		return
	}
	if socket != "tcp" && socket != "unix" {
		r.fail("REDIS_SOCKET_TYPE", socket, "tcp or unix", "")
		return
	}
	u := &url.URL{Scheme: "redis"}
	if tls {
		u.Scheme = "rediss"
	}
	if auth != "" {
		if user, pass, ok := strings.Cut(auth, ":"); ok {
			u.User = url.UserPassword(user, pass)
		} else {
			u.User = url.UserPassword("", auth)
		}
	}
	list := strings.Split(addrs, ",")
	for i := range list {
		list[i] = strings.TrimSpace(list[i])
	}
	switch typ {
	case "single":
		if len(list) != 1 {
			masked := make([]string, len(list))
			for i, a := range list {
				masked[i] = MaskURL(a) // an address may be a URL with a password
			}
			r.fail("REDIS_URL", strings.Join(masked, ","), "one address, or a comma-separated list with REDIS_TYPE=CLUSTER", "")
			return
		}
	case "cluster":
		r.set("REDIS_MODE", RedisCluster)
	default:
		r.fail("REDIS_TYPE", typ, "SINGLE or CLUSTER (tollgate has no Sentinel client)", "")
		return
	}
	switch {
	case typ == "single" && strings.Contains(list[0], "://"):
		// A URL already (redis://user:pass@host:port/db), which radix
		// reads as one: go-redis reads it the same.
		r.set("STORE", StoreRedis)
		r.set("REDIS_URL", list[0])
		return
	case socket == "unix" && (typ == "cluster" || tls):
		r.fail("REDIS_SOCKET_TYPE", socket, "tcp with REDIS_TYPE=CLUSTER or REDIS_TLS=true", "")
		return
	case socket == "unix":
		u.Scheme, u.Path = "unix", list[0]
	default:
		u.Host, u.Path = list[0], "/0"
		if typ == "cluster" {
			u.Path = ""
			var q []string
			for _, a := range list[1:] {
				q = append(q, "addr="+url.QueryEscape(a))
			}
			u.RawQuery = strings.ReplaceAll(strings.Join(q, "&"), "%3A", ":")
		}
	}
	r.set("STORE", StoreRedis)
	r.set("REDIS_URL", u.String())
}

// envoyEnviron returns args and environ as tollgate reads them: when
// args ask for envoyproxy/ratelimit's environment (envoyMode), environ
// with the TOLLGATE_* variables it names (fromEnvoy) and what else it
// says; otherwise args and environ unchanged and a nil *envoyEnv. A
// value tollgate cannot honour is an *ExitError of code 2 naming the
// variable.
func envoyEnviron(args, environ []string) ([]string, []string, *envoyEnv, error) {
	on, args := envoyMode(args)
	if !on {
		return args, environ, nil, nil
	}
	environ, e, err := fromEnvoy(environ)
	if err != nil {
		return nil, nil, nil, &ExitError{Code: 2, Err: fmt.Errorf("tollgate (as envoyproxy/ratelimit): %s", strings.ReplaceAll(err.Error(), "\n", "; "))}
	}
	return args, environ, e, nil
}

// warn logs what the environment asks that tollgate does not do.
func (e *envoyEnv) warn(log *slog.Logger) {
	log.Info("reading envoyproxy/ratelimit's environment", "http", e.httpAddr, "prometheus", e.metricsAddr)
	if len(e.ignored) > 0 {
		log.Warn("envoyproxy/ratelimit variables ignored: tollgate does not honour them", "variables", strings.Join(e.ignored, ","))
	}
	if len(e.replaced) > 0 {
		log.Warn("variables replaced by envoyproxy/ratelimit's", "variables", strings.Join(e.replaced, ","))
	}
	if e.noRedis {
		log.Warn("REDIS_URL is not set: the store is " + EnvPrefix + "STORE's, not Redis")
	}
}

// withEnvoy adds to g's listeners what envoyproxy/ratelimit serves over
// HTTP: GET /healthcheck on HOST:PORT, beside the admin endpoints when
// the admin listener is there (TOLLGATE_ADMIN_ADDR unset), else on a
// listener of its own; and with USE_PROMETHEUS, /metrics on
// PROMETHEUS_ADDR.
func (g *gateway) withEnvoy(e *envoyEnv) {
	var admin *listener
	for _, l := range g.listeners {
		if l.name == "admin" {
			admin = l
		}
	}
	srv := admin.srv.(*http.Server)
	adminHandler := srv.Handler
	var store ports.Pinger // nil: /healthcheck says the process serves
	if e.healthFollowsStore {
		store = g.backend.pinger
	}
	if e.adminOnHTTP {
		srv.Handler = withHealthcheck(adminHandler, store, g.cfg.RedisTimeout)
	} else {
		g.listeners = append(g.listeners, &listener{name: "http", addr: e.httpAddr, variable: "PORT",
			srv: newHTTPServer(withHealthcheck(http.NotFoundHandler(), store, g.cfg.RedisTimeout), g.log)})
	}
	if e.metricsAddr != "" {
		metrics := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/metrics" {
				http.NotFound(w, r)
				return
			}
			adminHandler.ServeHTTP(w, r)
		})
		g.listeners = append(g.listeners, &listener{name: "prometheus", addr: e.metricsAddr, variable: "PROMETHEUS_ADDR", srv: newHTTPServer(metrics, g.log)})
	}
}

// withHealthcheck serves envoyproxy/ratelimit's GET /healthcheck beside
// next: 200 OK, or with ready set, 200 OK when ready answers within
// timeout (as /readyz) and 500 otherwise.
func withHealthcheck(next http.Handler, ready ports.Pinger, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthcheck" {
			next.ServeHTTP(w, r)
			return
		}
		if ready != nil {
			ctx, cancel := context.WithTimeout(r.Context(), timeout)
			defer cancel()
			if err := ready.Ping(ctx); err != nil {
				http.Error(w, "NOT OK", http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "OK")
	})
}
