// Package apptest runs a whole gateway in process for tests: [app.Run] in
// a goroutine on loopback ports, stopped at the end of the test.
package apptest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tollgate/tollgate/app"
)

// Gateway is a running gateway.
type Gateway struct {
	// Public, Check and Admin are the listeners' base URLs, such as
	// http://127.0.0.1:41234; Public and Check are empty for a listener
	// that is off (TOLLGATE_LISTEN_ADDR=off; TOLLGATE_CHECK_ADDR unset).
	Public, Check, Admin string
	// RLS is the address (host:port) of Envoy's rate limit service, ""
	// when it is off (TOLLGATE_RLS_ADDR unset).
	RLS string

	logs *logBuffer
	stop context.CancelFunc
	done chan error
}

// Start runs app.Run with environ plus loopback listeners on free ports
// (pass TOLLGATE_CHECK_ADDR=127.0.0.1:0 for a check listener), waits
// until /healthz answers, and stops the gateway when t ends (the
// test fails if Run then returns an error). Values in environ win.
func Start(t testing.TB, environ ...string) *Gateway {
	t.Helper()
	return StartArgs(t, []string{"tollgate"}, environ...)
}

// StartArgs is Start with the command line args, such as
// []string{"/bin/ratelimit"} for envoyproxy/ratelimit's environment.
func StartArgs(t testing.TB, args []string, environ ...string) *Gateway {
	t.Helper()
	env := append([]string{
		"TOLLGATE_LISTEN_ADDR=127.0.0.1:0",
		"TOLLGATE_ADMIN_ADDR=127.0.0.1:0",
		"TOLLGATE_LOG_LEVEL=debug",
	}, environ...)
	addrs := make(chan [4]string, 1)
	g := &Gateway{done: make(chan error, 1)}
	g.logs = &logBuffer{listening: addrs}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	go func() {
		// Lines are recorded as they are written, so that whatever the
		// gateway logged before it answered is in Logs once it answers.
		g.done <- app.Run(ctx, args, env, io.Discard, g.logs)
	}()

	select {
	case a := <-addrs:
		g.Public, g.Check, g.Admin = baseURL(a[0]), baseURL(a[1]), baseURL(a[2])
		if a[3] != app.ListenOff {
			g.RLS = a[3]
		}
	case err := <-g.done:
		cancel()
		t.Fatalf("apptest: Run returned before listening: %v\nlogs:\n%s", err, g.Logs())
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("apptest: gateway not listening after 30s\nlogs:\n%s", g.Logs())
	}
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Errorf("apptest: Run returned %v\nlogs:\n%s", err, g.Logs())
		}
	})
	g.waitHealthy(t)
	return g
}

// baseURL returns the base URL of a listener the start-up log names
// addr, "" for one that is off.
func baseURL(addr string) string {
	if addr == "" || addr == app.ListenOff {
		return ""
	}
	return "http://" + addr
}

// Stop cancels Run's context and returns what Run returned. It is
// idempotent.
func (g *Gateway) Stop() error {
	g.stop()
	err, ok := <-g.done
	if ok {
		close(g.done)
	}
	return err
}

func (g *Gateway) waitHealthy(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(g.Admin + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("apptest: /healthz not OK after 10s\nlogs:\n%s", g.Logs())
}

// Logs returns every log line so far.
func (g *Gateway) Logs() string { return g.logs.String() }

// logBuffer records the gateway's log lines as they are written, and
// sends the listeners' addresses of the start-up line to listening.
type logBuffer struct {
	mu        sync.Mutex // guards lines and partial
	lines     []string
	partial   []byte // a line not yet ended
	listening chan<- [4]string
}

// Write records every whole line of p (slog writes one a call).
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.partial = append(b.partial, p...)
	for {
		i := bytes.IndexByte(b.partial, '\n')
		if i < 0 {
			break
		}
		line := string(b.partial[:i])
		b.partial = b.partial[i+1:]
		b.lines = append(b.lines, line)
		var m struct{ Msg, Public, Check, Admin, RLS string }
		if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "tollgate listening" {
			select {
			case b.listening <- [4]string{m.Public, m.Check, m.Admin, m.RLS}:
			default: // a restart's second line: the addresses are known
			}
		}
	}
	return len(p), nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}
