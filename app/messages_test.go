package app_test

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/tollgate/tollgate/app"
	"github.com/tollgate/tollgate/app/apptest"
)

// Messages that name the fix: what a newcomer met as an exit 1 without a
// variable, a masked URL or a name tollgate does not use.

// TestRunBusyPortNamesTheVariable: a listen address another process
// holds is a setting to change: exit 2, naming the variable, the address
// and what to do.
func TestRunBusyPortNamesTheVariable(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()
	for _, variable := range []string{"TOLLGATE_LISTEN_ADDR", "TOLLGATE_ADMIN_ADDR", "TOLLGATE_CHECK_ADDR"} {
		environ := []string{"TOLLGATE_LISTEN_ADDR=127.0.0.1:0", "TOLLGATE_ADMIN_ADDR=127.0.0.1:0", variable + "=" + addr}
		err := app.Run(t.Context(), []string{"tollgate"}, environ, io.Discard, io.Discard)
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		if app.ExitCode(err) != 2 || !strings.Contains(msg, variable+`="`+addr+`"`) ||
			!strings.Contains(msg, "in use") || !strings.Contains(msg, "free") || strings.Contains(msg, "\n") {
			t.Errorf("%s busy: Run = %q (exit %d), want exit 2 and one line naming %s, the address, and the fix", variable, msg, app.ExitCode(err), variable)
		}
	}
}

// TestUpstreamWithoutScheme: an upstream given as host:port or a bare
// host says that it needs http://, showing the value (masked), rather
// than "<unparsable URL, masked>".
func TestUpstreamWithoutScheme(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ value, want string }{
		{"localhost:8080", `"localhost:8080"`},
		{"127.0.0.1:8080", `"127.0.0.1:8080"`},
		{"svc.internal/api", `"svc.internal/api"`},
		{"user:s3cret@svc:8080", `"user:xxxxx@svc:8080"`},
	} {
		_, err := app.LoadConfig([]string{"TOLLGATE_UPSTREAM_URL=" + tt.value})
		var ce *app.ConfigError
		if !errors.As(err, &ce) || ce.Var != "TOLLGATE_UPSTREAM_URL" {
			t.Errorf("UPSTREAM_URL=%s: %v, want a ConfigError", tt.value, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, tt.want) || !strings.Contains(ce.Why, "http://") || strings.Contains(msg, "unparsable") || strings.Contains(msg, "s3cret") {
			t.Errorf("UPSTREAM_URL=%s: %q, want the value %s shown and why: it needs http://", tt.value, msg, tt.want)
		}
	}
}

// TestAlgorithmOtherNames: a name other gateways use for one of the
// algorithms points to tollgate's.
func TestAlgorithmOtherNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"gcra", "GCRA", "leaky_bucket"} {
		_, err := app.LoadConfig([]string{"TOLLGATE_ALGORITHM=" + name})
		var ce *app.ConfigError
		if !errors.As(err, &ce) || !strings.Contains(ce.Why, "TOLLGATE_ALGORITHM=token_bucket") {
			t.Errorf("ALGORITHM=%s: %v, want a ConfigError whose why points to token_bucket", name, err)
		}
	}
}

// TestTenantsOverridesWithoutPolicyFile: a tenants file that overrides
// named limits, run without a policy file, names the fix: the policy is
// then the one limit "default".
func TestTenantsOverridesWithoutPolicyFile(t *testing.T) {
	t.Parallel()
	path := writeTenants(t, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limits": [{"name": "per-day", "limit": 500}]}]}`)
	err := app.Run(t.Context(), []string{"tollgate"}, []string{"TOLLGATE_TENANTS_FILE=" + path}, io.Discard, io.Discard)
	if app.ExitCode(err) != 2 || !strings.Contains(err.Error(), "set TOLLGATE_POLICY_FILE") ||
		!strings.Contains(err.Error(), `"default"`) {
		t.Errorf("overrides without a policy file: %v (exit %d), want exit 2 naming TOLLGATE_POLICY_FILE as the fix", err, app.ExitCode(err))
	}
}

// TestRunLogsAPolicyReloadAsOne: with a policy file and a tenants file, a
// reload says both were reloaded, not "tenants file reloaded"; with a
// policy file alone, "policy file reloaded".
func TestRunLogsAPolicyReloadAsOne(t *testing.T) {
	t.Parallel()
	policy := writeFile(t, "policy.json", `{"limits": [{"name": "per-day", "limit": 20, "window": "24h"}]}`)
	tenants := writeTenants(t, `{"tenants": [{"id": "acme", "api_keys": ["k-acme"], "limits": [{"name": "per-day", "limit": 5}]}]}`)
	both := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy, "TOLLGATE_TENANTS_FILE="+tenants)
	alone := apptest.Start(t, "TOLLGATE_POLICY_FILE="+policy)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload lines", func() bool {
		return len(gatewayLog{both}.Lines(t, "tenants and policy files reloaded")) > 0 &&
			len(gatewayLog{alone}.Lines(t, "policy file reloaded")) > 0
	})
	if strings.Contains(both.Logs()+alone.Logs(), "tenants file reloaded") {
		t.Errorf("a policy reload logged as the tenants file's:\n%s\n%s", both.Logs(), alone.Logs())
	}
}
