package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app/apptest"
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

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lines returns the log lines whose msg is msg, decoded.
func (b *syncBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	return logLines(t, b.String(), msg)
}

// logLines returns the JSON log lines of text whose msg is msg, decoded.
func logLines(t *testing.T, text, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
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

func (l gatewayLog) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	return logLines(t, l.g.Logs(), msg)
}

// startGateway runs the gateway in process with environ added (see
// [apptest.Start]) and returns its public base URL and its log.
func startGateway(t *testing.T, environ ...string) (string, gatewayLog) {
	t.Helper()
	g := apptest.Start(t, environ...)
	return g.Public, gatewayLog{g}
}

// do sends one request to url and returns the response and its body.
func do(t *testing.T, method, url, body string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		req.Header[k] = vs // as given: no canonicalization
	}
	if h := header.Get("Host"); h != "" {
		req.Host = h
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}
