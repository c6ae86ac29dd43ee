package app_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/internal/logtest"
)

// writeTenants writes content to a fresh file and returns its path.
func writeTenants(t *testing.T, content string) string {
	t.Helper()
	return writeFile(t, "tenants.json", content)
}

// writeFile writes content to a fresh file called name and returns its
// path.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// waitFor polls cond every few milliseconds for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// gatewayLog reads a running gateway's log.
type gatewayLog struct{ g *apptest.Gateway }

func (l gatewayLog) String() string { return l.g.Logs() }

// Lines returns the log lines whose msg is msg, decoded.
func (l gatewayLog) Lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	return logtest.Lines(t, l.g.Logs(), msg)
}

// startGateway runs the gateway in process with environ added (see
// [apptest.Start]) and returns its public base URL and its log.
func startGateway(t *testing.T, environ ...string) (string, gatewayLog) {
	t.Helper()
	g := apptest.Start(t, environ...)
	return g.Public, gatewayLog{g}
}
