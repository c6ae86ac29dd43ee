package app

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"github.com/tollgate/tollgate/domain"
)

// Validate, its checks, and the errors it reports.

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

// accepted says, per variable (without the prefix), what values it
// accepts. Error messages quote it.
var accepted = map[string]string{
	"LISTEN_ADDR":       "a host:port listen address, or off (no proxy listener: with TOLLGATE_CHECK_ADDR or TOLLGATE_RLS_ADDR set, a gateway that only answers checks or Envoy's rate limit service)",
	"CHECK_ADDR":        "empty (off), or a host:port listen address",
	"CHECK_DENY_STATUS": "429, or 403 (for nginx auth_request)",
	"ADMIN_ADDR":        "a host:port listen address",
	"UPSTREAM_URL":      "empty, or an absolute http:// or https:// URL with a host (and a port from 1 to 65535, if any) and no fragment (a # in the path is %23)",
	"UPSTREAM_TIMEOUT":  "a Go duration from 1ms to 24h, such as 30s",
	"ALGORITHM":         strings.Join(domain.AlgorithmNames(), ", "),
	"STORE":             storeNames(),
	"LIMIT":             "an integer from 1 to 1000000000, at most one request per microsecond of TOLLGATE_WINDOW",
	"WINDOW":            "a Go duration from 1ms to 8784h (366 days), such as 1m",
	"FAIL_MODE":         "open, closed or local",
	"REPLICAS":          "an integer from 0 (count the replicas through the store) to 10000",
	"DENY_CACHE":        "true or false (also 1, 0, t, f)",
	"ADMIN_TOKEN":       "empty (no usage API), or 16 to 1024 bytes of A-Z a-z 0-9 - . _ ~ + / then = padding, such as the output of openssl rand -hex 32",
	"MEMORY_MAX_KEYS":   "an integer from 0 (no bound) to 1073741824",
	"TRUSTED_PROXIES":   "empty, or comma-separated CIDRs or addresses, such as 10.0.0.0/8, 192.168.1.7",
	"ANONYMOUS":         "shared (one tenant, unknown) or ip (per client address)",
	"IPV6_PREFIX":       "an integer from 32 to 128",
	"TENANT_HEADER":     "an HTTP header name, not one that frames or routes the request (Host, Content-Length, Transfer-Encoding, Connection, ...)",
	"TENANTS_FILE":      "empty, or the path of a JSON tenants file",
	"POLICY_FILE":       "empty, or the path of a JSON policy file of limits and routes",
	"SHADOW":            "true or false (also 1, 0, t, f)",
	"REDIS_MODE":        "single (one Redis, or a proxy) or cluster (Redis Cluster)",
	"REDIS_URL":         "a redis://, rediss:// or unix:// URL; with TOLLGATE_REDIS_MODE=cluster a seed list redis://[user:pass@]host:port?addr=host2:port2&addr=host3:port3 (database 0 only)",
	"REDIS_TIMEOUT":     "a Go duration from 1ms to 1m, such as 250ms",
	"KEY_PREFIX":        "any string without { or } (every key's Redis Cluster hash tag is its tenant's, {acme}, which a brace in front would displace), such as rl:",
	"LEASE":             "a Go duration from 1s to 10m, such as 10s",
	"ACCESS_LOG":        "true or false (also 1, 0, t, f)",
	"LOG_LEVEL":         "debug, info, warn or error",
	"PPROF":             "true or false (also 1, 0, t, f)",
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
	switch name {
	case "REDIS_URL":
		value = MaskURL(value)
	case "UPSTREAM_URL":
		value = upstreamForLog(value)
	case "ADMIN_TOKEN":
		value = fmt.Sprintf("(%d bytes, not shown)", len(value))
	}
	return &ConfigError{Var: EnvPrefix + name, Value: value, Want: accepted[name]}
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
	check := func(ok bool, name, value string) {
		if !ok && !unparsed[name] {
			if v, set := raw[EnvPrefix+name]; set {
				value = v
			}
			errs = append(errs, configError(name, value))
		}
	}
	dur := func(d time.Duration) string { return d.String() }
	check(c.ListenAddr == ListenOff || validAddr(c.ListenAddr), "LISTEN_ADDR", c.ListenAddr)
	check(c.CheckAddr == "" || validAddr(c.CheckAddr), "CHECK_ADDR", c.CheckAddr)
	check(c.CheckDenyStatus == http.StatusTooManyRequests || c.CheckDenyStatus == http.StatusForbidden,
		"CHECK_DENY_STATUS", strconv.Itoa(c.CheckDenyStatus))
	if c.ListenAddr == ListenOff && c.CheckAddr == "" && c.RLSAddr == "" {
		errs = append(errs, &ConfigError{Var: EnvPrefix + "LISTEN_ADDR", Value: ListenOff,
			Want: "a host:port listen address, or off only with TOLLGATE_CHECK_ADDR or TOLLGATE_RLS_ADDR set: with every listener but the admin one off, nothing would be rate-limited"})
	}
	check(validAddr(c.AdminAddr), "ADMIN_ADDR", c.AdminAddr)
	check(c.AdminToken == "" || validAdminToken(c.AdminToken), "ADMIN_TOKEN", c.AdminToken)
	check(c.UpstreamURL == "" || validUpstream(c.UpstreamURL), "UPSTREAM_URL", c.UpstreamURL)
	check(c.UpstreamTimeout >= time.Millisecond && c.UpstreamTimeout <= 24*time.Hour, "UPSTREAM_TIMEOUT", dur(c.UpstreamTimeout))
	check(domain.ValidAlgorithm(c.Algorithm), "ALGORITHM", c.Algorithm)
	_, knownStore := storeNamed(c.Store)
	check(knownStore, "STORE", c.Store)
	windowOK := c.Window >= domain.MinWindow && c.Window <= domain.MaxWindow
	check(windowOK, "WINDOW", dur(c.Window))
	check(c.Limit >= 1 && c.Limit <= domain.MaxLimit && (!windowOK || unparsed["WINDOW"] || c.Rule().Validate() == nil),
		"LIMIT", strconv.FormatInt(c.Limit, 10))
	check(oneOf(c.FailMode, FailOpen, FailClosed, FailLocal), "FAIL_MODE", c.FailMode)
	check(c.Replicas >= 0 && c.Replicas <= MaxReplicas, "REPLICAS", strconv.Itoa(c.Replicas))
	check(c.MemoryMaxKeys >= 0 && c.MemoryMaxKeys <= MaxMemoryKeys, "MEMORY_MAX_KEYS", strconv.Itoa(c.MemoryMaxKeys))
	_, proxiesErr := domain.ParseTrustedProxies(c.TrustedProxies)
	check(proxiesErr == nil, "TRUSTED_PROXIES", c.TrustedProxies)
	check(oneOf(c.Anonymous, AnonymousShared, AnonymousIP), "ANONYMOUS", c.Anonymous)
	check(c.IPv6Prefix >= domain.MinIPv6Prefix && c.IPv6Prefix <= domain.MaxIPv6Prefix, "IPV6_PREFIX", strconv.Itoa(c.IPv6Prefix))
	check(domain.ValidToken(c.TenantHeader) && !reservedHeader[http.CanonicalHeaderKey(c.TenantHeader)], "TENANT_HEADER", c.TenantHeader)
	check(oneOf(c.RedisMode, RedisSingle, RedisCluster), "REDIS_MODE", c.RedisMode)
	if err := validRedisURL(c); err != nil && !unparsed["REDIS_URL"] {
		// The adapter says what is wrong (a parameter tollgate refuses,
		// a database number), never the URL's credentials.
		e := configError("REDIS_URL", c.RedisURL)
		e.Why = strings.ReplaceAll(err.Error(), "redis: ", "")
		errs = append(errs, e)
	}
	check(c.RedisTimeout >= time.Millisecond && c.RedisTimeout <= time.Minute, "REDIS_TIMEOUT", dur(c.RedisTimeout))
	check(!strings.ContainsAny(c.KeyPrefix, "{}"), "KEY_PREFIX", c.KeyPrefix)
	check(c.Lease >= domain.MinLease && c.Lease <= domain.MaxLease, "LEASE", dur(c.Lease))
	_, levelErr := parseLevel(c.LogLevel)
	check(levelErr == nil, "LOG_LEVEL", c.LogLevel)
	check(c.RLSAddr == "" || validAddr(c.RLSAddr), "RLS_ADDR", c.RLSAddr)
	check(c.RLSAddr == "" || c.RLSConfig != "", "RLS_CONFIG", c.RLSConfig)
	if c.RLSAddr != "" && c.RLSCountDenied && c.Algorithm != domain.AlgorithmFixedWindow && !unparsed["RLS_COUNT_DENIED"] && !unparsed["ALGORITHM"] {
		// Only the fixed window counts a denied hit; the store refuses it.
		value := "true"
		if v, set := raw[EnvPrefix+"RLS_COUNT_DENIED"]; set {
			value = v
		}
		e := configError("RLS_COUNT_DENIED", value)
		e.Why = "only " + domain.AlgorithmFixedWindow + " counts denied hits; TOLLGATE_ALGORITHM is " + c.Algorithm
		e.Want = "false, or TOLLGATE_ALGORITHM=" + domain.AlgorithmFixedWindow
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// unknownVariable is a TOLLGATE_* variable tollgate does not read, and
// the one it most likely meant ("" when none is close).
type unknownVariable struct {
	name, meant string
}

// unknownVariables returns the TOLLGATE_* variables of environ that no
// setting reads, in environ's order: a misspelt one (TOLLGATE_LIMT)
// leaves its setting at the default, which the start-up log then says.
func unknownVariables(environ []string) []unknownVariable {
	known := envDefaults()
	var out []unknownVariable
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		short, ok := strings.CutPrefix(name, EnvPrefix)
		if !ok {
			continue
		}
		if _, ok := known[short]; ok {
			continue
		}
		u := unknownVariable{name: name}
		best := 3 // at most 2 edits away
		for k := range known {
			if d := editDistance(strings.ToUpper(short), k); d < best || (d == best && EnvPrefix+k < u.meant) {
				best, u.meant = d, EnvPrefix+k
			}
		}
		out = append(out, u)
	}
	return out
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ineffectiveVariable is a TOLLGATE_* variable set to a value that the
// other settings make moot, and what it applies with.
type ineffectiveVariable struct {
	name, appliesWith string
}

// ineffectiveVariables returns the variables of environ, in a fixed
// order, that are set to a value other than empty and their default but
// that cfg's other settings leave unread: a TOLLGATE_REDIS_URL without
// TOLLGATE_STORE=redis runs each replica on its own in-memory budget,
// and a TOLLGATE_LIMIT beside a policy file meters nothing. The start-up
// log says so, as it does of unknown variables; neither stops the
// process. (A default, as docker-compose.yml passes TOLLGATE_REPLICAS=0,
// changes nothing either way.)
func ineffectiveVariables(cfg Config, environ []string) []ineffectiveVariable {
	defaults, vars := envDefaults(), env.ToMap(environ) // the last one wins, as in LoadConfig
	set := func(short string) bool {
		v := vars[EnvPrefix+short]
		return v != "" && v != defaults[short]
	}
	rules := []struct {
		moot        bool
		appliesWith string
		names       []string
	}{
		{cfg.Store != StoreRedis, EnvPrefix + "STORE=" + StoreRedis, []string{"REDIS_URL", "REDIS_MODE", "REDIS_TIMEOUT", "LEASE"}},
		{cfg.Store != StoreRedis || cfg.FailMode != FailLocal,
			EnvPrefix + "FAIL_MODE=" + FailLocal + " and " + EnvPrefix + "STORE=" + StoreRedis, []string{"REPLICAS"}},
		{cfg.PolicyFile != "", "no " + EnvPrefix + "POLICY_FILE (the policy file's limits replace it)", []string{"LIMIT", "WINDOW"}},
		{cfg.TenantsFile != "", "no " + EnvPrefix + "TENANTS_FILE (tenants present API keys)", []string{"TENANT_HEADER"}},
		{cfg.Anonymous != AnonymousIP, EnvPrefix + "ANONYMOUS=" + AnonymousIP, []string{"IPV6_PREFIX"}},
		{cfg.CheckAddr == "", EnvPrefix + "CHECK_ADDR", []string{"CHECK_DENY_STATUS"}},
		{cfg.RLSAddr == "", EnvPrefix + "RLS_ADDR", []string{"RLS_CONFIG", "RLS_COUNT_DENIED", "RLS_RESPONSE_HEADERS"}},
		{cfg.ListenAddr == ListenOff, "the proxy listener (" + EnvPrefix + "LISTEN_ADDR other than off)", []string{"UPSTREAM_URL", "UPSTREAM_TIMEOUT"}},
	}
	var out []ineffectiveVariable
	for _, r := range rules {
		for _, n := range r.names {
			if r.moot && set(n) {
				out = append(out, ineffectiveVariable{name: EnvPrefix + n, appliesWith: r.appliesWith})
			}
		}
	}
	return out
}
