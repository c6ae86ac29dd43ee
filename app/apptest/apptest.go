// Package apptest runs a whole gateway in process for tests: [app.Run] in
// a goroutine on loopback ports, stopped at the end of the test.
package apptest

import (
	"bufio"
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
	// Public and Admin are the listeners' base URLs, such as
	// http://127.0.0.1:41234.
	Public, Admin string
	// RLS is the address (host:port) of Envoy's rate limit service, or
	// "off" (TOLLGATE_RLS_ADDR empty).
	RLS string

	logs *logBuffer
	stop context.CancelFunc
	done chan error
}

// Start runs app.Run with environ plus loopback listeners on free ports,
// waits until /healthz answers, and stops the gateway when t ends (the
// test fails if Run then returns an error). Values in environ win.
func Start(t testing.TB, environ ...string) *Gateway {
	t.Helper()
	env := append([]string{
		"TOLLGATE_LISTEN_ADDR=127.0.0.1:0",
		"TOLLGATE_ADMIN_ADDR=127.0.0.1:0",
		"TOLLGATE_LOG_LEVEL=debug",
	}, environ...)
	pr, pw := io.Pipe()
	g := &Gateway{logs: &logBuffer{}, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	g.stop = cancel
	go func() {
		err := app.Run(ctx, []string{"tollgate"}, env, io.Discard, pw)
		pw.CloseWithError(io.EOF)
		g.done <- err
	}()

	addrs := make(chan [3]string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			g.logs.add(line)
			var m struct{ Msg, Public, Admin, RLS string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "tollgate listening" {
				addrs <- [3]string{m.Public, m.Admin, m.RLS}
			}
		}
		io.Copy(io.Discard, pr)
	}()

	select {
	case a := <-addrs:
		g.Public, g.Admin, g.RLS = "http://"+a[0], "http://"+a[1], a[2]
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

type logBuffer struct {
	mu    sync.Mutex // guards lines
	lines []string
}

func (b *logBuffer) add(l string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, l)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}
