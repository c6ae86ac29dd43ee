package app

import (
	"reflect"
	"strings"
	"testing"

	"github.com/caarlos0/env/v11"
)

// egEnviron is the environment Envoy Gateway gives its rate limit
// service's container, with a Redis backend and Prometheus on.
var egEnviron = []string{
	"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true", "RUNTIME_WATCH_ROOT=false",
	"LOG_LEVEL=info", "USE_STATSD=false",
	"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=envoy-gateway:18001", "CONFIG_GRPC_XDS_NODE_ID=envoy-ratelimit",
	"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=/certs/tls.crt", "GRPC_SERVER_TLS_KEY=/certs/tls.key", "GRPC_SERVER_TLS_CA_CERT=/certs/ca.crt",
	"CONFIG_GRPC_XDS_SERVER_USE_TLS=true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT=/certs/tls.crt", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY=/certs/tls.key",
	"CONFIG_GRPC_XDS_SERVER_TLS_CACERT=/certs/ca.crt", "FORCE_START_WITHOUT_INITIAL_CONFIG=true",
	"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=redis.redis-system.svc.cluster.local:6379",
	"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=:19001", "PROMETHEUS_MAPPER_YAML=/etc/statsd-exporter/conf.yaml",
	"PATH=/usr/bin",
}

func TestFromEnvoy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		environ  []string
		want     map[string]string // TOLLGATE_* variables (without the prefix); "" for unset
		http     string
		metrics  string
		ignored  []string
		replaced []string
	}{
		{
			name:    "Envoy Gateway's Deployment",
			environ: egEnviron,
			want: map[string]string{
				"LISTEN_ADDR": "off", "RLS_ADDR": "0.0.0.0:8081", "ADMIN_ADDR": "0.0.0.0:8080",
				"RLS_TLS_CERT": "/certs/tls.crt", "RLS_TLS_KEY": "/certs/tls.key", "RLS_TLS_CLIENT_CA": "",
				"RLS_XDS": "envoy-gateway:18001", "RLS_XDS_NODE_ID": "envoy-ratelimit", "RLS_CONFIG": "",
				"RLS_XDS_TLS_CA": "/certs/ca.crt", "RLS_XDS_TLS_CERT": "/certs/tls.crt", "RLS_XDS_TLS_KEY": "/certs/tls.key",
				"STORE": "redis", "REDIS_URL": "redis://redis.redis-system.svc.cluster.local:6379/0", "REDIS_MODE": "",
				"LOG_LEVEL": "info", "SHADOW": "", "RLS_RESPONSE_HEADERS": "",
			},
			http: "0.0.0.0:8080", metrics: ":19001",
			ignored: []string{"PROMETHEUS_MAPPER_YAML"},
		},
		{
			name:    "defaults: files, no Redis",
			environ: nil,
			want: map[string]string{
				"LISTEN_ADDR": "off", "RLS_ADDR": "0.0.0.0:8081", "ADMIN_ADDR": "0.0.0.0:8080",
				"RLS_CONFIG": "/srv/runtime_data/current/config", "RLS_XDS": "", "STORE": "", "RLS_TLS_CERT": "",
			},
			http: "0.0.0.0:8080",
		},
		{
			name: "files, a cluster over TLS, mutual TLS, headers, shadow",
			environ: []string{"RUNTIME_ROOT=/srv", "RUNTIME_SUBDIRECTORY=rl", "RUNTIME_APPDIRECTORY=conf",
				"REDIS_SOCKET_TYPE=TCP", "REDIS_TYPE=cluster", "REDIS_URL=a:1, b:2,c:3", "REDIS_AUTH=user:s3cret", "REDIS_TLS=true",
				"GRPC_SERVER_USE_TLS=1", "GRPC_SERVER_TLS_CERT=c", "GRPC_SERVER_TLS_KEY=k", "GRPC_CLIENT_TLS_CACERT=ca",
				"LIMIT_RESPONSE_HEADERS_ENABLED=true", "SHADOW_MODE=true", "LOG_LEVEL=TRACE",
				"GRPC_HOST=127.0.0.1", "GRPC_PORT=9000", "HOST=::1", "PORT=9001"},
			want: map[string]string{
				"RLS_CONFIG": "/srv/rl/conf", "STORE": "redis", "REDIS_MODE": "cluster", "REDIS_URL": "rediss://user:s3cret@a:1?addr=b:2&addr=c:3",
				"RLS_TLS_CERT": "c", "RLS_TLS_KEY": "k", "RLS_TLS_CLIENT_CA": "ca", "RLS_RESPONSE_HEADERS": "true", "SHADOW": "true",
				"LOG_LEVEL": "debug", "RLS_ADDR": "127.0.0.1:9000", "ADMIN_ADDR": "[::1]:9001",
			},
			http: "[::1]:9001",
		},
		{
			name:    "a unix socket, a password alone",
			environ: []string{"REDIS_URL=/var/run/redis.sock", "REDIS_AUTH=s3cret", "CACHE_KEY_PREFIX=edge:", "MERGE_DOMAIN_CONFIG=true"},
			want:    map[string]string{"STORE": "redis", "REDIS_URL": "unix://:s3cret@/var/run/redis.sock", "KEY_PREFIX": "edge:"},
			http:    "0.0.0.0:8080",
		},
		{
			name:    "a URL already",
			environ: []string{"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=redis://:pw@r:6379/2"},
			want:    map[string]string{"STORE": "redis", "REDIS_URL": "redis://:pw@r:6379/2"},
			http:    "0.0.0.0:8080",
		},
		{
			name: "what tollgate does not honour is named; its own listeners win",
			environ: []string{"USE_STATSD=true", "STATSD_HOST=statsd", "GRPC_CLIENT_TLS_SAN=envoy", "RUNTIME_IGNOREDOTFILES=false",
				"LOG_FORMAT=text", "MERGE_DOMAIN_CONFIG=false", "TRACING_ENABLED=false", "BACKEND_TYPE=redis", "DEBUG_PORT=6070",
				"TOLLGATE_ADMIN_ADDR=:9090", "TOLLGATE_LISTEN_ADDR=:8000", "TOLLGATE_RLS_ADDR=:7000", "TOLLGATE_ALGORITHM=sliding_window"},
			want:     map[string]string{"ADMIN_ADDR": ":9090", "LISTEN_ADDR": ":8000", "RLS_ADDR": "0.0.0.0:8081", "ALGORITHM": "sliding_window"},
			http:     "0.0.0.0:8080",
			ignored:  []string{"DEBUG_PORT", "GRPC_CLIENT_TLS_SAN", "LOG_FORMAT", "MERGE_DOMAIN_CONFIG", "RUNTIME_IGNOREDOTFILES", "STATSD_HOST", "USE_STATSD"},
			replaced: []string{"TOLLGATE_RLS_ADDR"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, e, err := fromEnvoy(tc.environ)
			if err != nil {
				t.Fatal(err)
			}
			got := env.ToMap(out)
			for name, want := range tc.want {
				if got[EnvPrefix+name] != want {
					t.Errorf("%s%s = %q, want %q", EnvPrefix, name, got[EnvPrefix+name], want)
				}
			}
			if e.httpAddr != tc.http || e.metricsAddr != tc.metrics {
				t.Errorf("http %q, prometheus %q; want %q, %q", e.httpAddr, e.metricsAddr, tc.http, tc.metrics)
			}
			if !reflect.DeepEqual(e.ignored, tc.ignored) || !reflect.DeepEqual(e.replaced, tc.replaced) {
				t.Errorf("ignored %v, replaced %v; want %v, %v", e.ignored, e.replaced, tc.ignored, tc.replaced)
			}
			if _, err := LoadConfig(out); err != nil {
				t.Errorf("LoadConfig(%v): %v", out, err)
			}
		})
	}
}

func TestFromEnvoyRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		environ []string
		want    string // the variable named
	}{
		{[]string{"GRPC_PORT=grpc"}, "GRPC_PORT"},
		{[]string{"PORT=70000"}, "PORT"},
		{[]string{"CONFIG_TYPE=grpc_xds_sotw"}, "CONFIG_TYPE"},
		{[]string{"REDIS_URL=a:1", "REDIS_TYPE=sentinel"}, "REDIS_TYPE"},
		{[]string{"REDIS_URL=a:1,b:2"}, "REDIS_URL"},
		{[]string{"REDIS_URL=a:1", "REDIS_SOCKET_TYPE=udp"}, "REDIS_SOCKET_TYPE"},
		{[]string{"REDIS_URL=/s.sock", "REDIS_TLS=true"}, "REDIS_SOCKET_TYPE"},
		{[]string{"REDIS_TLS=maybe"}, "REDIS_TLS"},
		{[]string{"LOG_LEVEL=loud"}, "LOG_LEVEL"},
		{[]string{"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=c"}, "GRPC_SERVER_USE_TLS"},
		{[]string{"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_USE_TLS=true"}, "CONFIG_GRPC_XDS_SERVER_USE_TLS"},
		{[]string{"USE_PROMETHEUS=yes"}, "USE_PROMETHEUS"},
	} {
		_, _, err := fromEnvoy(tc.environ)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want+"=") {
			t.Errorf("fromEnvoy(%v) = %v, want an error naming %s", tc.environ, err, tc.want)
		}
	}
	// A password in the addresses is never printed.
	_, _, err := fromEnvoy([]string{"REDIS_URL=redis://:s3cret@h1:6379,redis://:s3cret@h2:6379"})
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("two URLs with a password: %v, want an error without it", err)
	}
}

func TestEnvoyMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args     []string
		on       bool
		wantArgs []string
	}{
		{[]string{"/bin/ratelimit"}, true, []string{"/bin/ratelimit"}},
		{[]string{"ratelimit"}, true, []string{"ratelimit"}},
		{[]string{"tollgate", "-envoy-ratelimit"}, true, []string{"tollgate"}},
		{[]string{"tollgate"}, false, []string{"tollgate"}},
		{[]string{"/bin/ratelimit-x"}, false, []string{"/bin/ratelimit-x"}},
		{[]string{"tollgate", "-h"}, false, []string{"tollgate", "-h"}},
	} {
		on, args := envoyMode(tc.args)
		if on != tc.on || !reflect.DeepEqual(args, tc.wantArgs) {
			t.Errorf("envoyMode(%v) = %v, %v; want %v, %v", tc.args, on, args, tc.on, tc.wantArgs)
		}
	}
}
