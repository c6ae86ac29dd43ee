package app_test

import (
	"strings"
	"testing"
)

func TestAccessLog(t *testing.T) {
	t.Parallel()
	path := writeTenants(t, `{"tenants": [{"id": "acme", "api_keys": ["k-acme-SECRET"], "limit": 1}]}`)
	base, logs := startGateway(t, "TOLLGATE_ACCESS_LOG=true", "TOLLGATE_TENANTS_FILE="+path)
	get(t, base+"/v1//x/.?token=q-SECRET", "X-API-Key", "k-acme-SECRET")
	get(t, base+"/v1/x", "Authorization", "Bearer k-acme-SECRET")
	get(t, base+"/v1/x")
	get(t, base+"/%2e%2e/etc")

	want := []map[string]any{
		{"method": "GET", "path": "/v1/x/", "route": "default", "tenant": "acme", "client": "127.0.0.1", "status": 200.0, "outcome": "allowed"},
		{"method": "GET", "path": "/v1/x", "route": "default", "tenant": "acme", "client": "127.0.0.1", "status": 429.0, "outcome": "denied"},
		{"method": "GET", "path": "/v1/x", "route": "default", "tenant": "unknown", "client": "127.0.0.1", "status": 200.0, "outcome": "allowed"},
		{"method": "GET", "path": "/%2e%2e/etc", "route": "default", "tenant": "", "client": "127.0.0.1", "status": 400.0, "outcome": ""},
	}
	var lines []map[string]any
	waitFor(t, "four access lines", func() bool {
		lines = logs.Lines(t, "access")
		return len(lines) >= len(want)
	})
	if len(lines) != len(want) {
		t.Fatalf("%d access lines, want %d:\n%s", len(lines), len(want), logs)
	}
	for i, w := range want {
		for k, v := range w {
			if lines[i][k] != v {
				t.Errorf("line %d: %s = %#v, want %#v (%v)", i, k, lines[i][k], v, lines[i])
			}
		}
		if _, ok := lines[i]["duration_ms"].(float64); !ok {
			t.Errorf("line %d: duration_ms %#v, want a number", i, lines[i]["duration_ms"])
		}
		if _, ok := lines[i]["time"].(string); !ok {
			t.Errorf("line %d: no time", i)
		}
	}
	if strings.Contains(logs.String(), "SECRET") {
		t.Errorf("the log holds a credential or the query:\n%s", logs)
	}
}

func TestAccessLogOffByDefault(t *testing.T) {
	t.Parallel()
	base, logs := startGateway(t)
	get(t, base+"/x")
	if l := logs.Lines(t, "access"); len(l) != 0 {
		t.Errorf("access lines without TOLLGATE_ACCESS_LOG: %v", l)
	}
}
