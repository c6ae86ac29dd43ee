package app_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
)

func TestLoadConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := app.LoadConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := app.Config{
		ListenAddr:      ":8080",
		CheckDenyStatus: 429,
		AdminAddr:       ":9090",
		TopTenants:      20,
		UpstreamTimeout: 30 * time.Second,
		Algorithm:       "fixed_window",
		Store:           "memory",
		Limit:           100,
		Window:          time.Minute,
		FailMode:        "open",
		DenyCache:       true,
		MemoryMaxKeys:   1_000_000,
		TenantHeader:    "X-Tenant-ID",
		Anonymous:       "shared",
		IPv6Prefix:      64,
		RedisMode:       "single",
		RedisURL:        "redis://localhost:6379/0",
		RedisTimeout:    250 * time.Millisecond,
		KeyPrefix:       "rl:",
		LogLevel:        "info",
		Lease:           10 * time.Second,
		Leases:          "auto",
		RLSXDSNodeID:    "default",
	}
	if cfg != want {
		t.Errorf("LoadConfig(nil) =\n%+v\nwant\n%+v", cfg, want)
	}
}

func TestLoadConfigOverrides(t *testing.T) {
	t.Parallel()
	cfg, err := app.LoadConfig([]string{
		"TOLLGATE_LIMIT=5", "TOLLGATE_WINDOW=1500ms", "TOLLGATE_ALGORITHM=token_bucket",
		"TOLLGATE_STORE=redis", "TOLLGATE_FAIL_MODE=local", "TOLLGATE_REPLICAS=3", "TOLLGATE_KEY_PREFIX=gw:", "TOLLGATE_DENY_CACHE=false",
		"TOLLGATE_UPSTREAM_URL=http://svc:8000/api", "TOLLGATE_REDIS_URL=rediss://u:p@redis:6380/2",
		"UNRELATED=1", "LIMIT=7",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Limit != 5 || cfg.Window != 1500*time.Millisecond || cfg.Algorithm != "token_bucket" ||
		cfg.Store != "redis" || cfg.FailMode != "local" || cfg.Replicas != 3 || cfg.KeyPrefix != "gw:" || cfg.DenyCache ||
		cfg.UpstreamURL != "http://svc:8000/api" {
		t.Errorf("LoadConfig = %+v", cfg)
	}
}

func TestLoadConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env     string
		wantVar string
		wantIn  string // also in the message
	}{
		{"TOLLGATE_LIMIT=0", "TOLLGATE_LIMIT", `"0"`},
		{"TOLLGATE_LIMIT=-3", "TOLLGATE_LIMIT", "integer from 1"},
		{"TOLLGATE_LIMIT=1000000001", "TOLLGATE_LIMIT", "1000000000"},
		{"TOLLGATE_WINDOW=8785h", "TOLLGATE_WINDOW", "366 days"},
		{"TOLLGATE_LIMIT=ten", "TOLLGATE_LIMIT", `"ten"`},
		{"TOLLGATE_LIMIT=1.5", "TOLLGATE_LIMIT", "integer"},
		{"TOLLGATE_WINDOW=0s", "TOLLGATE_WINDOW", "from 1ms"},
		// The value as given, not as parsed (0s, 500ns).
		{"TOLLGATE_WINDOW=0", "TOLLGATE_WINDOW", `TOLLGATE_WINDOW="0" is invalid`},
		{"TOLLGATE_REDIS_TIMEOUT=0.5us", "TOLLGATE_REDIS_TIMEOUT", `TOLLGATE_REDIS_TIMEOUT="0.5us" is invalid`},
		{"TOLLGATE_LIMIT=+0", "TOLLGATE_LIMIT", `TOLLGATE_LIMIT="+0" is invalid`},
		{"TOLLGATE_WINDOW=999us", "TOLLGATE_WINDOW", "from 1ms"},
		{"TOLLGATE_WINDOW=60", "TOLLGATE_WINDOW", `"60"`},
		{"TOLLGATE_WINDOW=-1m", "TOLLGATE_WINDOW", "duration"},
		{"TOLLGATE_ALGORITHM=leaky", "TOLLGATE_ALGORITHM", "sliding_log"},
		{"TOLLGATE_STORE=etcd", "TOLLGATE_STORE", "memory or redis"},
		{"TOLLGATE_FAIL_MODE=maybe", "TOLLGATE_FAIL_MODE", "open, closed or local"},
		{"TOLLGATE_LEASES=on", "TOLLGATE_LEASES", "auto (a replica takes slices"},
		{"TOLLGATE_REPLICAS=-1", "TOLLGATE_REPLICAS", `"-1"`},
		{"TOLLGATE_REPLICAS=10001", "TOLLGATE_REPLICAS", "to 10000"},
		{"TOLLGATE_REPLICAS=two", "TOLLGATE_REPLICAS", `"two"`},
		{"TOLLGATE_DENY_CACHE=maybe", "TOLLGATE_DENY_CACHE", "true or false"},
		{"TOLLGATE_LOG_LEVEL=loud", "TOLLGATE_LOG_LEVEL", "debug"},
		{"TOLLGATE_LISTEN_ADDR=8080", "TOLLGATE_LISTEN_ADDR", "host:port"},
		{"TOLLGATE_ADMIN_ADDR=:99999", "TOLLGATE_ADMIN_ADDR", "host:port"},
		{"TOLLGATE_UPSTREAM_URL=svc:8000", "TOLLGATE_UPSTREAM_URL", "http://"},
		{"TOLLGATE_UPSTREAM_URL=ftp://svc", "TOLLGATE_UPSTREAM_URL", "http://"},
		{"TOLLGATE_UPSTREAM_URL=http://svc:99999/api", "TOLLGATE_UPSTREAM_URL", "port from 1 to 65535"},
		{"TOLLGATE_UPSTREAM_URL=http://svc:0", "TOLLGATE_UPSTREAM_URL", "port from 1 to 65535"},
		{"TOLLGATE_UPSTREAM_URL=http://:8000", "TOLLGATE_UPSTREAM_URL", "http://"},
		// A fragment is never sent: the proxy dropped it (and a '#' meant
		// for the path, unescaped, cut the path), and the error printed it.
		{"TOLLGATE_UPSTREAM_URL=http://svc/api#v2", "TOLLGATE_UPSTREAM_URL", "no fragment"},
		{"TOLLGATE_UPSTREAM_URL=http://svc/api#?token=s3cret", "TOLLGATE_UPSTREAM_URL", `"http://svc/api#…"`},
		{"TOLLGATE_UPSTREAM_TIMEOUT=0s", "TOLLGATE_UPSTREAM_TIMEOUT", "from 1ms"},
		{"TOLLGATE_UPSTREAM_TIMEOUT=1ns", "TOLLGATE_UPSTREAM_TIMEOUT", "from 1ms"},
		{"TOLLGATE_REDIS_TIMEOUT=1ns", "TOLLGATE_REDIS_TIMEOUT", "from 1ms"},
		{"TOLLGATE_REDIS_TIMEOUT=1000h", "TOLLGATE_REDIS_TIMEOUT", "to 1m"},
		{"TOLLGATE_TENANT_HEADER=Host", "TOLLGATE_TENANT_HEADER", "not one that frames"},
		{"TOLLGATE_TENANT_HEADER=content-length", "TOLLGATE_TENANT_HEADER", "not one that frames"},
		{"TOLLGATE_REDIS_URL=redis://h:6379/0?dial_timeout=-1s", "TOLLGATE_REDIS_URL", "redis://"},
		{"TOLLGATE_REDIS_URL=localhost:6379", "TOLLGATE_REDIS_URL", "redis://"},
		// What the adapter found wrong is said, once prefixed, without
		// the credentials.
		{"TOLLGATE_REDIS_URL=redis://u:S3cret@h:6379/0?max_retries=3", "TOLLGATE_REDIS_URL", `(max_retries="3": tollgate never retries`},
		{"TOLLGATE_REDIS_URL=redis://u:S3cret@h:6379/9x", "TOLLGATE_REDIS_URL", `is invalid (invalid database number: "9x"): want`},
		{"TOLLGATE_REDIS_TIMEOUT=-5ms", "TOLLGATE_REDIS_TIMEOUT", "from 1ms"},
		{"TOLLGATE_REDIS_TIMEOUT=soon", "TOLLGATE_REDIS_TIMEOUT", "duration"},
		{"TOLLGATE_TENANT_HEADER=X Tenant", "TOLLGATE_TENANT_HEADER", "header name"},
		{"TOLLGATE_CHECK_ADDR=8081", "TOLLGATE_CHECK_ADDR", "host:port"},
		{"TOLLGATE_CHECK_ADDR=off", "TOLLGATE_CHECK_ADDR", "empty (off)"},
		{"TOLLGATE_CHECK_DENY_STATUS=401", "TOLLGATE_CHECK_DENY_STATUS", "429, or 403"},
		{"TOLLGATE_CHECK_DENY_STATUS=200", "TOLLGATE_CHECK_DENY_STATUS", `"200"`},
		{"TOLLGATE_CHECK_DENY_STATUS=too-many", "TOLLGATE_CHECK_DENY_STATUS", "429, or 403"},
		{"TOLLGATE_LISTEN_ADDR=OFF", "TOLLGATE_LISTEN_ADDR", "or off"},
		{"TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_LISTEN_ADDR", "with TOLLGATE_CHECK_ADDR or TOLLGATE_RLS_ADDR set"},
		{"TOLLGATE_TRUSTED_PROXIES=10.0.0.0/33", "TOLLGATE_TRUSTED_PROXIES", "CIDRs"},
		{"TOLLGATE_TRUSTED_PROXIES=10.0.0.0/8,,::1", "TOLLGATE_TRUSTED_PROXIES", `"10.0.0.0/8,,::1"`},
		{"TOLLGATE_TRUSTED_PROXIES=proxy.internal", "TOLLGATE_TRUSTED_PROXIES", "CIDRs"},
		{"TOLLGATE_ANONYMOUS=ipv4", "TOLLGATE_ANONYMOUS", "shared"},
		{"TOLLGATE_IPV6_PREFIX=31", "TOLLGATE_IPV6_PREFIX", "from 32 to 128"},
		{"TOLLGATE_IPV6_PREFIX=129", "TOLLGATE_IPV6_PREFIX", "from 32 to 128"},
		{"TOLLGATE_IPV6_PREFIX=/64", "TOLLGATE_IPV6_PREFIX", `"/64"`},
		// A brace in the prefix makes it the keys' hash tag, not the
		// tenant: "{gw}" puts every tenant in one slot, "{}" splits one
		// decision's keys over slots (CROSSSLOT on a cluster).
		{"TOLLGATE_KEY_PREFIX={gw}:", "TOLLGATE_KEY_PREFIX", "without { or }"},
		{"TOLLGATE_KEY_PREFIX={}", "TOLLGATE_KEY_PREFIX", `"{}"`},
		{"TOLLGATE_KEY_PREFIX=rl}", "TOLLGATE_KEY_PREFIX", "hash tag"},
	}
	for _, tt := range tests {
		_, err := app.LoadConfig([]string{tt.env})
		var ce *app.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("LoadConfig(%s) error = %v, want a *ConfigError", tt.env, err)
			continue
		}
		if ce.Var != tt.wantVar || !strings.Contains(err.Error(), tt.wantIn) {
			t.Errorf("LoadConfig(%s) = %q, want one naming %s and containing %s", tt.env, err, tt.wantVar, tt.wantIn)
		}
		if strings.Contains(err.Error(), "S3cret") || strings.Contains(err.Error(), "redis: ") {
			t.Errorf("LoadConfig(%s) = %q: a password, or the adapter's prefix", tt.env, err)
		}
	}
}

// The check listener and the listeners that may be off: the proxy off
// with a check listener is a valid gateway; the check listener's deny
// status and the client-address settings parse.
func TestLoadConfigListenersAndClients(t *testing.T) {
	t.Parallel()
	cfg, err := app.LoadConfig([]string{
		"TOLLGATE_LISTEN_ADDR=off", "TOLLGATE_CHECK_ADDR=127.0.0.1:8081", "TOLLGATE_CHECK_DENY_STATUS=403",
		"TOLLGATE_TRUSTED_PROXIES=10.0.0.0/8, ::1", "TOLLGATE_ANONYMOUS=ip", "TOLLGATE_IPV6_PREFIX=56",
	})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ListenAddr != app.ListenOff || cfg.CheckAddr != "127.0.0.1:8081" || cfg.CheckDenyStatus != 403 ||
		cfg.TrustedProxies != "10.0.0.0/8, ::1" || cfg.Anonymous != app.AnonymousIP || cfg.IPv6Prefix != 56 {
		t.Errorf("LoadConfig = %+v", cfg)
	}
}

// TOLLGATE_REDIS_MODE=cluster takes a seed list: one seed, or several as
// addr= parameters, with credentials and go-redis's cluster options.
func TestLoadConfigRedisCluster(t *testing.T) {
	t.Parallel()
	for _, url := range []string{
		"redis://a:7000",
		"redis://a:7000/0",
		"rediss://user:pw@a:7000?addr=b:7001&addr=c:7002",
		"redis://:pw@10.0.0.1:7000?addr=10.0.0.2:7000&max_redirects=5&read_timeout=1s",
	} {
		cfg, err := app.LoadConfig([]string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_MODE=cluster", "TOLLGATE_REDIS_URL=" + url})
		if err != nil {
			t.Errorf("cluster URL %s: %v", url, err)
			continue
		}
		if cfg.RedisMode != app.RedisCluster {
			t.Errorf("RedisMode = %q, want cluster", cfg.RedisMode)
		}
	}
}

// An empty value is the same as an unset one: the default applies.
func TestLoadConfigEmptyMeansDefault(t *testing.T) {
	t.Parallel()
	cfg, err := app.LoadConfig([]string{"TOLLGATE_TENANT_HEADER=", "TOLLGATE_KEY_PREFIX=", "TOLLGATE_LIMIT="})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TenantHeader != "X-Tenant-ID" || cfg.KeyPrefix != "rl:" || cfg.Limit != 100 {
		t.Errorf("LoadConfig with empty values = %+v, want the defaults", cfg)
	}
}

// A limit and window that are each in range but together ask for more
// than a request per microsecond are refused, naming the limit.
func TestLoadConfigRateTooHigh(t *testing.T) {
	t.Parallel()
	_, err := app.LoadConfig([]string{"TOLLGATE_LIMIT=5000", "TOLLGATE_WINDOW=1ms"})
	var ce *app.ConfigError
	if !errors.As(err, &ce) || ce.Var != "TOLLGATE_LIMIT" || !strings.Contains(err.Error(), "microsecond") {
		t.Errorf("LoadConfig(5000 per 1ms) = %v, want a TOLLGATE_LIMIT error about the rate", err)
	}
	if _, err := app.LoadConfig([]string{"TOLLGATE_LIMIT=1000", "TOLLGATE_WINDOW=1ms"}); err != nil {
		t.Errorf("LoadConfig(1000 per 1ms) = %v, want ok", err)
	}
}

func TestLoadConfigReportsEveryProblem(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		env  []string
		want []string
	}{
		{[]string{"TOLLGATE_LIMIT=0", "TOLLGATE_STORE=etcd", "TOLLGATE_FAIL_MODE=x"},
			[]string{"TOLLGATE_LIMIT", "TOLLGATE_STORE", "TOLLGATE_FAIL_MODE"}},
		// Variables that do not parse, and the others still checked.
		{[]string{"TOLLGATE_LIMIT=abc", "TOLLGATE_ALGORITHM=x", "TOLLGATE_REPLICAS=two", "TOLLGATE_STORE=y"},
			[]string{`TOLLGATE_LIMIT="abc"`, `TOLLGATE_ALGORITHM="x"`, `TOLLGATE_REPLICAS="two"`, `TOLLGATE_STORE="y"`}},
	} {
		_, err := app.LoadConfig(tt.env)
		for _, v := range tt.want {
			if err == nil || strings.Count(err.Error(), v) != 1 {
				t.Errorf("LoadConfig(%v): error %v does not name %s once", tt.env, err, v)
			}
		}
	}
	// A window that does not parse is not held against a valid limit: it
	// is reported alone.
	_, err := app.LoadConfig([]string{"TOLLGATE_WINDOW=1 hour", "TOLLGATE_LIMIT=1000000000"})
	if err == nil || !strings.Contains(err.Error(), "TOLLGATE_WINDOW") || strings.Contains(err.Error(), "TOLLGATE_LIMIT") {
		t.Errorf("a bad window and a limit too high for the default one: %v, want TOLLGATE_WINDOW alone", err)
	}
}

func TestLoadConfigMasksRedisPassword(t *testing.T) {
	t.Parallel()
	for _, env := range []string{
		"TOLLGATE_REDIS_URL=http://user:hunter2@redis:6379",
		"TOLLGATE_REDIS_URL=redis://user:hunter2@redis:6379:x:/%zz",
		"TOLLGATE_REDIS_URL=redis://:hunter2@",
	} {
		_, err := app.LoadConfig([]string{env})
		if err == nil {
			t.Errorf("LoadConfig(%s) = nil error", env)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("LoadConfig(%s) error leaks the password: %v", env, err)
		}
	}
	// A cluster seed given user-info of its own is refused, unprinted.
	env := []string{"TOLLGATE_STORE=redis", "TOLLGATE_REDIS_MODE=cluster",
		"TOLLGATE_REDIS_URL=redis://u:hunter2@a:7000?addr=u:hunter2@b:7001"}
	if _, err := app.LoadConfig(env); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("LoadConfig(%v) = %v, want an error without the password", env, err)
	}
}

func TestMaskURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"redis://localhost:6379/0", "redis://localhost:6379/0"},
		{"redis://:secret@redis:6379/0", "redis://:xxxxx@redis:6379/0"},
		{"rediss://user:secret@redis:6380", "rediss://user:xxxxx@redis:6380"},
		// go-redis reads a lone user-info field as the password.
		{"redis://s3cret@host:6379/0", "redis://xxxxx@host:6379/0"},
		// go-redis reads a password query parameter too, in any case.
		{"redis://host:6379/0?password=s3cret&pool_size=8", "redis://host:6379/0?password=xxxxx&pool_size=8"},
		{"redis://host:6379/0?PassWord=s3cret", "redis://host:6379/0?PassWord=xxxxx"},
		// A pair that does not parse: the whole query.
		{"redis://host:6379/0?password=s3cret;x=1", "redis://host:6379/0?xxxxx"},
		{"redis://host:6379/0?x=1;password=s3cret", "redis://host:6379/0?xxxxx"},
		{"redis://host:6379/0?password=s3cret%zz", "redis://host:6379/0?xxxxx"},
		{"redis://host:6379/0?pool_size=8;x=1", "redis://host:6379/0?pool_size=8;x=1"},
		// A cluster seed with user-info of its own: masked as the URL's.
		{"redis://u:s3cret@a:7000?addr=u:s3cret@b:7001&addr=c:7002", "redis://u:xxxxx@a:7000?addr=u%3Axxxxx%40b%3A7001&addr=c%3A7002"},
		{"redis://a:7000?addr=s3cret@b:7001", "redis://a:7000?addr=xxxxx%40b%3A7001"},
		{"redis://a:7000?addr=b:7001", "redis://a:7000?addr=b:7001"},
		{"redis://a:7000?Addr=u:s3cret@b:7001", "redis://a:7000?Addr=u%3Axxxxx%40b%3A7001"},
		{"redis://a:7000?addr=u:s3cret@b:7001;x=1", "redis://a:7000?xxxxx"},
		// Escaped, in a query that does not parse: the '@' (or a
		// "password") is only seen once unescaped.
		{"redis://a:7000?addr=u:s3cret%40b:7001;x=1", "redis://a:7000?xxxxx"},
		{"redis://host:6379/0?pass%77ord=s3cret;x=1", "redis://host:6379/0?xxxxx"},
	}
	for _, tt := range tests {
		if got := app.MaskURL(tt.in); got != tt.want || strings.Contains(got, "s3cret") {
			t.Errorf("MaskURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
