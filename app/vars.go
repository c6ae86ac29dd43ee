package app

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/watch"
)

// variable is one TOLLGATE_* setting: the one place that says its
// default, what it accepts, how it is checked and when the other settings
// leave it unread. Config holds its parsed value in the field whose env
// tag is its name; tollgate -h, the errors of LoadConfig and the start-up
// warnings read the rest from here, and docs/configuration.md has a row
// for each (TestVariablesTable holds the three to one another).
type variable struct {
	name    string // without EnvPrefix, as Config's env tag
	def     string // the default, as the environment would give it; "" for none
	accepts string // what it accepts: tollgate -h and its errors say it
	// check returns nil when c's value is valid, errInvalid when accepts
	// says it all, an invalid for more, or any other error, whose message
	// is then why. The variables in unparsed did not parse and hold their
	// defaults: a check does not hold them against its own.
	check func(c Config, unparsed map[string]bool) error
	// show returns a value as errors show it (nil: as given): masked
	// where it may hold a secret.
	show func(string) string
	// unread says when the other settings leave the variable unread (nil:
	// never), for the start-up warning.
	unread *condition
}

// condition is a state of the settings that leaves some variables unread,
// and what they apply with.
type condition struct {
	holds       func(Config) bool
	appliesWith string
}

// invalid is a check's failure: why says what is wrong beyond what the
// variable accepts (may be empty); want replaces accepts (when not empty).
type invalid struct{ why, want string }

func (e invalid) Error() string { return e.why }

// errInvalid is a check's failure that accepts says all of.
var errInvalid = invalid{}

// valid returns nil when ok, errInvalid otherwise.
func valid(ok bool) error {
	if ok {
		return nil
	}
	return errInvalid
}

// parsed is the check of a variable whose parsing is its check (a path, a
// boolean).
func parsed(Config, map[string]bool) error { return nil }

// The conditions that leave variables unread.
var (
	withoutRedis = &condition{func(c Config) bool { return c.Store != StoreRedis }, EnvPrefix + "STORE=" + StoreRedis}
	withoutLocal = &condition{func(c Config) bool { return c.Store != StoreRedis || c.FailMode != FailLocal },
		EnvPrefix + "FAIL_MODE=" + FailLocal + " and " + EnvPrefix + "STORE=" + StoreRedis}
	withPolicyFile  = &condition{func(c Config) bool { return c.PolicyFile != "" }, "no " + EnvPrefix + "POLICY_FILE (the policy file's limits replace it)"}
	withTenantsFile = &condition{func(c Config) bool { return c.TenantsFile != "" }, "no " + EnvPrefix + "TENANTS_FILE (tenants present API keys)"}
	withoutIP       = &condition{func(c Config) bool { return c.Anonymous != AnonymousIP }, EnvPrefix + "ANONYMOUS=" + AnonymousIP}
	withoutCheck    = &condition{func(c Config) bool { return c.CheckAddr == "" }, EnvPrefix + "CHECK_ADDR"}
	withoutRLS      = &condition{func(c Config) bool { return c.RLSAddr == "" }, EnvPrefix + "RLS_ADDR"}
	withoutXDS      = &condition{func(c Config) bool { return c.RLSAddr == "" || c.RLSXDS == "" }, EnvPrefix + "RLS_ADDR and " + EnvPrefix + "RLS_XDS"}
	withoutProxy    = &condition{func(c Config) bool { return c.ListenAddr == ListenOff }, "the proxy listener (" + EnvPrefix + "LISTEN_ADDR other than off)"}
)

const boolean = "true or false (also 1, 0, t, f)"

// variables is every setting, in the order of tollgate -h and
// docs/configuration.md.
var variables = []variable{
	// Listeners and the upstream.
	{name: "LISTEN_ADDR", def: ":8080",
		accepts: "a host:port listen address, or off (no proxy listener: with TOLLGATE_CHECK_ADDR or TOLLGATE_RLS_ADDR set, a gateway that only answers checks or Envoy's rate limit service)",
		check: func(c Config, _ map[string]bool) error {
			if c.ListenAddr == ListenOff && c.CheckAddr == "" && c.RLSAddr == "" {
				return invalid{want: "a host:port listen address, or off only with TOLLGATE_CHECK_ADDR or TOLLGATE_RLS_ADDR set: with every listener but the admin one off, nothing would be rate-limited"}
			}
			return valid(c.ListenAddr == ListenOff || validAddr(c.ListenAddr))
		}},
	{name: "CHECK_ADDR", accepts: "empty (off), or a host:port listen address",
		check: func(c Config, _ map[string]bool) error { return valid(c.CheckAddr == "" || validAddr(c.CheckAddr)) }},
	{name: "CHECK_DENY_STATUS", def: "429", accepts: "429, or 403 (for nginx auth_request)", unread: withoutCheck,
		check: func(c Config, _ map[string]bool) error {
			return valid(c.CheckDenyStatus == http.StatusTooManyRequests || c.CheckDenyStatus == http.StatusForbidden)
		}},
	{name: "ADMIN_ADDR", def: ":9090", accepts: "a host:port listen address",
		check: func(c Config, _ map[string]bool) error { return valid(validAddr(c.AdminAddr)) }},
	{name: "ADMIN_TOKEN", show: func(v string) string { return fmt.Sprintf("(%d bytes, not shown)", len(v)) },
		accepts: "empty (no usage API), or 16 to 1024 bytes of A-Z a-z 0-9 - . _ ~ + / then = padding, such as the output of openssl rand -hex 32",
		check: func(c Config, _ map[string]bool) error {
			return valid(c.AdminToken == "" || validAdminToken(c.AdminToken))
		}},
	{name: "TOP_TENANTS", def: "20", accepts: "an integer from 0 (off) to 1000: how many of the most denied tenants each limit keeps",
		check: func(c Config, _ map[string]bool) error {
			return valid(c.TopTenants >= 0 && c.TopTenants <= watch.MaxTop)
		}},
	{name: "UPSTREAM_URL", show: upstreamForLog, unread: withoutProxy,
		accepts: "empty, or an absolute http:// or https:// URL with a host (and a port from 1 to 65535, if any) and no fragment (a # in the path is %23)",
		check: func(c Config, _ map[string]bool) error {
			switch {
			case c.UpstreamURL == "" || validUpstream(c.UpstreamURL):
				return nil
			case !strings.Contains(c.UpstreamURL, "://"):
				return invalid{why: "no scheme: it needs http:// or https://, such as http://" + upstreamForLog(c.UpstreamURL)}
			}
			return errInvalid
		}},
	{name: "UPSTREAM_TIMEOUT", def: "30s", accepts: "a Go duration from 1ms to 24h, such as 30s", unread: withoutProxy,
		check: func(c Config, _ map[string]bool) error {
			return valid(c.UpstreamTimeout >= time.Millisecond && c.UpstreamTimeout <= 24*time.Hour)
		}},
	{name: "TRUSTED_PROXIES", accepts: "empty, or comma-separated CIDRs or addresses, such as 10.0.0.0/8, 192.168.1.7",
		check: func(c Config, _ map[string]bool) error {
			_, err := domain.ParseTrustedProxies(c.TrustedProxies)
			return valid(err == nil)
		}},

	// Budgets.
	{name: "ALGORITHM", def: domain.AlgorithmFixedWindow, accepts: strings.Join(domain.AlgorithmNames(), ", "),
		check: func(c Config, _ map[string]bool) error {
			if domain.ValidAlgorithm(c.Algorithm) {
				return nil
			}
			if ours, ok := algorithmAliases[strings.ToLower(c.Algorithm)]; ok {
				return invalid{why: fmt.Sprintf("%s is what tollgate calls %s: set %sALGORITHM=%s", c.Algorithm, ours, EnvPrefix, ours)}
			}
			return errInvalid
		}},
	{name: "LIMIT", def: "100", unread: withPolicyFile,
		accepts: "an integer from 1 to 1000000000, at most one request per microsecond of TOLLGATE_WINDOW",
		check: func(c Config, unparsed map[string]bool) error {
			windowOK := !unparsed["WINDOW"] && c.Window >= domain.MinWindow && c.Window <= domain.MaxWindow
			return valid(c.Limit >= 1 && c.Limit <= domain.MaxLimit && (!windowOK || c.Rule().Validate() == nil))
		}},
	{name: "WINDOW", def: "1m", accepts: "a Go duration from 1ms to 8784h (366 days), such as 1m", unread: withPolicyFile,
		check: func(c Config, _ map[string]bool) error {
			return valid(c.Window >= domain.MinWindow && c.Window <= domain.MaxWindow)
		}},
	{name: "POLICY_FILE", accepts: "empty, or the path of a JSON policy file of limits and routes", check: parsed},
	{name: "SHADOW", def: "false", accepts: boolean, check: parsed},

	// Tenants.
	{name: "TENANT_HEADER", def: "X-Tenant-ID", unread: withTenantsFile,
		accepts: "an HTTP header name, not one that frames or routes the request (Host, Content-Length, Transfer-Encoding, Connection, ...)",
		check: func(c Config, _ map[string]bool) error {
			return valid(domain.ValidToken(c.TenantHeader) && !reservedHeader[http.CanonicalHeaderKey(c.TenantHeader)])
		}},
	{name: "TENANTS_FILE", accepts: "empty, or the path of a JSON tenants file", check: parsed},
	{name: "ANONYMOUS", def: AnonymousShared, accepts: "shared (one tenant, unknown), ip (per client address) or reject (401, nothing forwarded nor spent)",
		check: func(c Config, _ map[string]bool) error {
			return valid(oneOf(c.Anonymous, AnonymousShared, AnonymousIP, AnonymousReject))
		}},
	{name: "IPV6_PREFIX", def: "64", accepts: "an integer from 32 to 128", unread: withoutIP,
		check: func(c Config, _ map[string]bool) error {
			return valid(c.IPv6Prefix >= domain.MinIPv6Prefix && c.IPv6Prefix <= domain.MaxIPv6Prefix)
		}},

	// The store.
	{name: "STORE", def: StoreMemory, accepts: storeNames(),
		check: func(c Config, _ map[string]bool) error {
			_, ok := storeNamed(c.Store)
			return valid(ok)
		}},
	{name: "MEMORY_MAX_KEYS", def: "1000000", accepts: "an integer from 0 (no bound) to 1073741824",
		check: func(c Config, _ map[string]bool) error {
			return valid(c.MemoryMaxKeys >= 0 && c.MemoryMaxKeys <= MaxMemoryKeys)
		}},
	{name: "FAIL_MODE", def: FailOpen, accepts: "open, closed or local",
		check: func(c Config, _ map[string]bool) error {
			return valid(oneOf(c.FailMode, FailOpen, FailClosed, FailLocal))
		}},
	{name: "REPLICAS", def: "0", accepts: "an integer from 0 (count the replicas through the store) to 10000", unread: withoutLocal,
		check: func(c Config, _ map[string]bool) error { return valid(c.Replicas >= 0 && c.Replicas <= MaxReplicas) }},
	{name: "DENY_CACHE", def: "true", accepts: boolean, check: parsed},
	{name: "REDIS_MODE", def: RedisSingle, accepts: "single (one Redis, or a proxy) or cluster (Redis Cluster)", unread: withoutRedis,
		check: func(c Config, _ map[string]bool) error { return valid(oneOf(c.RedisMode, RedisSingle, RedisCluster)) }},
	{name: "REDIS_URL", def: "redis://localhost:6379/0", show: MaskURL, unread: withoutRedis,
		accepts: "a redis://, rediss:// or unix:// URL; with TOLLGATE_REDIS_MODE=cluster a seed list redis://[user:pass@]host:port?addr=host2:port2&addr=host3:port3 (database 0 only)",
		check: func(c Config, _ map[string]bool) error {
			// The adapter says what is wrong (a parameter tollgate
			// refuses, a database number), never the URL's credentials.
			if err := validRedisURL(c); err != nil {
				return invalid{why: strings.ReplaceAll(err.Error(), "redis: ", "")}
			}
			return nil
		}},
	{name: "REDIS_TIMEOUT", def: "250ms", accepts: "a Go duration from 1ms to 1m, such as 250ms", unread: withoutRedis,
		check: func(c Config, _ map[string]bool) error {
			return valid(c.RedisTimeout >= time.Millisecond && c.RedisTimeout <= time.Minute)
		}},
	{name: "KEY_PREFIX", def: "rl:",
		accepts: "any string without { or } (every key's Redis Cluster hash tag is its tenant's, {acme}, which a brace in front would displace), such as rl:",
		check:   func(c Config, _ map[string]bool) error { return valid(!strings.ContainsAny(c.KeyPrefix, "{}")) }},
	{name: "LEASE", def: "10s", accepts: "a Go duration from 1s to 10m, such as 10s", unread: withoutRedis,
		check: func(c Config, _ map[string]bool) error {
			return valid(c.Lease >= domain.MinLease && c.Lease <= domain.MaxLease)
		}},
	{name: "LEASES", def: LeasesAuto, unread: withoutRedis,
		accepts: "auto (a replica takes slices of a hot tenant's budget from Redis and decides from them in memory) or off (every decision at the store)",
		check:   func(c Config, _ map[string]bool) error { return valid(oneOf(c.Leases, LeasesAuto, LeasesOff)) }},

	// Envoy's rate limit service.
	{name: "RLS_ADDR", accepts: "empty (off), or a host:port listen address for Envoy's rate limit service (gRPC; TLS with TOLLGATE_RLS_TLS_CERT)",
		check: func(c Config, _ map[string]bool) error { return valid(c.RLSAddr == "" || validAddr(c.RLSAddr)) }},
	{name: "RLS_CONFIG", unread: withoutRLS,
		accepts: "the directory of envoyproxy/ratelimit YAML files (*.yaml, *.yml), required with TOLLGATE_RLS_ADDR unless TOLLGATE_RLS_XDS is set",
		check: func(c Config, _ map[string]bool) error {
			if c.RLSAddr != "" && c.RLSConfig != "" && c.RLSXDS != "" {
				return invalid{why: "TOLLGATE_RLS_XDS is set too", want: "one source of configuration: empty with TOLLGATE_RLS_XDS"}
			}
			return valid(c.RLSAddr == "" || c.RLSConfig != "" || c.RLSXDS != "")
		}},
	{name: "RLS_COUNT_DENIED", def: "false", accepts: boolean, unread: withoutRLS, check: parsed},
	{name: "RLS_RESPONSE_HEADERS", def: "false", accepts: boolean, unread: withoutRLS, check: parsed},
	{name: "RLS_TLS_CERT", accepts: "empty (no TLS), or the path of a PEM certificate chain, with TOLLGATE_RLS_TLS_KEY", unread: withoutRLS,
		check: func(c Config, _ map[string]bool) error { return valid((c.RLSTLSCert == "") == (c.RLSTLSKey == "")) }},
	{name: "RLS_TLS_KEY", accepts: "empty, or the path of the PEM private key of TOLLGATE_RLS_TLS_CERT", unread: withoutRLS,
		check: func(c Config, _ map[string]bool) error { return valid((c.RLSTLSCert == "") == (c.RLSTLSKey == "")) }},
	{name: "RLS_TLS_CLIENT_CA", accepts: "empty, or the path of a PEM CA bundle that client certificates must be signed by (with TOLLGATE_RLS_TLS_CERT)", unread: withoutRLS,
		check: func(c Config, _ map[string]bool) error { return valid(c.RLSTLSClientCA == "" || c.RLSTLSCert != "") }},
	{name: "RLS_XDS", accepts: "empty, or the host:port of an xDS server serving ratelimit.config.ratelimit.v3.RateLimitConfig", unread: withoutRLS,
		check: func(c Config, _ map[string]bool) error { return valid(c.RLSXDS == "" || validAddr(c.RLSXDS)) }},
	{name: "RLS_XDS_NODE_ID", def: "default", accepts: "the node id presented to the xDS server, not empty", unread: withoutXDS,
		check: func(c Config, _ map[string]bool) error { return valid(c.RLSXDSNodeID != "") }},
	{name: "RLS_XDS_TLS_CA", accepts: "empty (no TLS, unless a client certificate is set: the system's roots), or the path of a PEM CA bundle the xDS server's certificate must be signed by", unread: withoutXDS, check: parsed},
	{name: "RLS_XDS_TLS_CERT", accepts: "empty, or the path of a PEM client certificate for the xDS server, with TOLLGATE_RLS_XDS_TLS_KEY", unread: withoutXDS,
		check: func(c Config, _ map[string]bool) error {
			return valid((c.RLSXDSTLSCert == "") == (c.RLSXDSTLSKey == ""))
		}},
	{name: "RLS_XDS_TLS_KEY", accepts: "empty, or the path of the PEM private key of TOLLGATE_RLS_XDS_TLS_CERT", unread: withoutXDS,
		check: func(c Config, _ map[string]bool) error {
			return valid((c.RLSXDSTLSCert == "") == (c.RLSXDSTLSKey == ""))
		}},

	// Logs and profiling.
	{name: "ACCESS_LOG", def: "false", accepts: boolean, check: parsed},
	{name: "LOG_LEVEL", def: "info", accepts: "debug, info, warn or error",
		check: func(c Config, _ map[string]bool) error {
			_, err := parseLevel(c.LogLevel)
			return valid(err == nil)
		}},
	{name: "PPROF", def: "false", accepts: boolean, check: parsed},
}

// algorithmAliases maps names other rate limiters give an algorithm
// (lower case) to tollgate's name for it: GCRA and the leaky bucket as a
// meter decide as the token bucket does.
var algorithmAliases = map[string]string{
	"gcra":         domain.AlgorithmTokenBucket,
	"leaky_bucket": domain.AlgorithmTokenBucket,
}

// variableNamed returns the row of name (without the prefix).
func variableNamed(name string) (variable, bool) {
	for _, v := range variables {
		if v.name == name {
			return v, true
		}
	}
	return variable{}, false
}

// withDefaults returns vars (the environment, with the prefix) with each
// variable that is unset or empty given its default: an empty value is
// the same as an unset one.
func withDefaults(vars map[string]string) map[string]string {
	out := make(map[string]string, len(vars)+len(variables))
	for k, val := range vars {
		out[k] = val
	}
	for _, v := range variables {
		if out[EnvPrefix+v.name] == "" && v.def != "" {
			out[EnvPrefix+v.name] = v.def
		}
	}
	return out
}

// ConfigError is a setting that does not parse or is out of range. It
// names the variable, the value given and what is accepted; credentials
// in the value are masked.
type ConfigError struct {
	Var   string // full variable name, such as TOLLGATE_LIMIT
	Value string // as given, credentials masked
	Want  string // what is accepted
	Why   string // what is wrong with Value, when more is known than Want says; may be empty
}

// Error names the variable, the value as given, what is wrong with it
// (when known) and what is accepted.
func (e *ConfigError) Error() string {
	if e.Why != "" {
		return fmt.Sprintf("%s=%q is invalid (%s): want %s", e.Var, e.Value, e.Why, e.Want)
	}
	return fmt.Sprintf("%s=%q is invalid: want %s", e.Var, e.Value, e.Want)
}

func configError(name, value string) *ConfigError {
	v, _ := variableNamed(name)
	if v.show != nil {
		value = v.show(value)
	}
	return &ConfigError{Var: EnvPrefix + name, Value: value, Want: v.accepts}
}

// Validate checks every setting and reports all problems as one error of
// joined *ConfigErrors.
func (c Config) Validate() error { return c.validate(nil, nil) }

// validate is Validate, whose errors show a setting as raw (the
// environment) gave it, such as 0 rather than 0s, when it holds one. The
// settings in unparsed did not parse, and hold their defaults: they are
// not reported again, nor does another setting's check hold them against
// it.
func (c Config) validate(raw map[string]string, unparsed map[string]bool) error {
	var errs []error
	for _, v := range variables {
		if unparsed[v.name] {
			continue
		}
		err := v.check(c, unparsed)
		if err == nil {
			continue
		}
		value, set := raw[EnvPrefix+v.name]
		if !set {
			value = fieldValue(c, v.name)
		}
		e := configError(v.name, value)
		if p := (invalid{}); errors.As(err, &p) {
			e.Why = p.why
			if p.want != "" {
				e.Want = p.want
			}
		} else {
			e.Why = err.Error()
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// fieldValue returns c's value of the variable name as the environment
// would give it.
func fieldValue(c Config, name string) string {
	switch f := configField(c, name).(type) {
	case time.Duration:
		return f.String()
	case int:
		return strconv.Itoa(f)
	default:
		return fmt.Sprint(f)
	}
}

// printUsage lists every variable, its default and what it accepts.
func printUsage(w io.Writer) {
	fmt.Fprintln(w, "tollgate: a rate-limiting API gateway. `tollgate -version` prints the version.")
	fmt.Fprintln(w, "Configure it with environment variables:")
	for _, v := range variables {
		fmt.Fprintf(w, "  %s%-20s default %-28q %s\n", EnvPrefix, v.name, v.def, v.accepts)
	}
	fmt.Fprintln(w, "Algorithms (TOLLGATE_ALGORITHM), each on every store:")
	for _, a := range domain.Algorithms {
		fmt.Fprintf(w, "  %-15s %s\n", a.Name, a.Summary)
	}
	fmt.Fprintln(w, "Stores (TOLLGATE_STORE):")
	for _, s := range stores {
		fmt.Fprintf(w, "  %-15s %s\n", s.name, s.summary)
	}
	fmt.Fprintln(w, "Run as ratelimit (/bin/ratelimit) or with "+EnvoyRatelimitFlag+", tollgate reads envoyproxy/ratelimit's variables")
	fmt.Fprintln(w, "(GRPC_PORT, PORT, CONFIG_TYPE, REDIS_URL, ...) for what they name: docs/rls.md, \"Run as envoyproxy/ratelimit\".")
}

// The checks of the table.

func oneOf(s string, options ...string) bool {
	for _, o := range options {
		if s == o {
			return true
		}
	}
	return false
}

func validAddr(a string) bool {
	i := strings.LastIndexByte(a, ':')
	if i < 0 {
		return false
	}
	port, err := strconv.ParseUint(a[i+1:], 10, 16)
	return err == nil && (port > 0 || a[i+1:] == "0")
}

// MinAdminTokenLen is the shortest TOLLGATE_ADMIN_TOKEN accepted: 16
// bytes, so that a token is not guessed (openssl rand -hex 32 gives 64).
const MinAdminTokenLen = 16

// validAdminToken reports whether s can be a bearer token: 16 to 1024
// bytes of RFC 6750's token68 (letters, digits, - . _ ~ + /, then =
// padding), which an Authorization header carries as it is.
func validAdminToken(s string) bool {
	if len(s) < MinAdminTokenLen || len(s) > 1024 {
		return false
	}
	body := strings.TrimRight(s, "=")
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~+/", c) >= 0) {
			return false
		}
	}
	return body != ""
}

// validUpstream reports whether s is an absolute http:// or https:// URL
// with a host, a port (if any) from 1 to 65535, and no fragment: a
// fragment is never sent (a '#' meant for the path must be %23).
func validUpstream(s string) bool {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || strings.Contains(s, "#") {
		return false
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		return err == nil && n >= 1 && n <= 65535
	}
	return true
}

// reservedHeader are the headers that frame, route or hop a request:
// a tenant id in one of them would be read from what the HTTP layer owns
// (Host is also not in r.Header at all, so every request would be
// unknown).
var reservedHeader = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true,
	"Te": true, "Trailer": true, "Upgrade": true, "Keep-Alive": true, "Proxy-Connection": true,
	"Content-Type": true, "Expect": true,
}

// parseLevel parses a LOG_LEVEL value.
func parseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q", s)
}
