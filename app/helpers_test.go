package app_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
)

// writeTenants writes content to a fresh file and returns its path.
func writeTenants(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tenants.json")
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
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
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

// startGateway runs app.Run in-process on loopback ports with environ
// added, waits until it listens, and returns the public base URL and its
// log. The gateway stops, and Run's error is checked, at cleanup.
func startGateway(t *testing.T, environ ...string) (string, *syncBuffer) {
	t.Helper()
	logs := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	env := append([]string{"TOLLGATE_LISTEN_ADDR=127.0.0.1:0", "TOLLGATE_ADMIN_ADDR=127.0.0.1:0"}, environ...)
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runErr = app.Run(ctx, []string{"tollgate"}, env, &bytes.Buffer{}, logs)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		if runErr != nil {
			t.Errorf("Run: %v", runErr)
		}
	})
	var public string
	waitFor(t, "the gateway to listen", func() bool {
		select {
		case <-done:
			t.Fatalf("Run returned early; log:\n%s", logs)
		default:
		}
		if l := logs.lines(t, "tollgate listening"); len(l) > 0 {
			public, _ = l[0]["public"].(string)
			return true
		}
		return false
	})
	return "http://" + public, logs
}
