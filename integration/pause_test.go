package integration

import (
	"net/http"
	"testing"
	"time"
)

// TestWritesPausedWhileProbed: while Redis holds its writes (CLIENT
// PAUSE WRITE, as a FAILOVER does) it still answers PING; a /readyz
// probe every 100 ms must not keep the decisions waiting for their hard
// bound (2 s here) as if Redis were answering them: with fail mode
// closed the request is answered 503 within about the 100 ms deadline.
// (The probes' PONGs counted as Redis heard from: 5 s with the default
// deadline.)
func TestWritesPausedWhileProbed(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	const timeout = 100 * time.Millisecond
	g := startReplica(t, srv.URL, "TOLLGATE_KEY_PREFIX="+uniquePrefix(t), "TOLLGATE_REDIS_TIMEOUT="+timeout.String(), "TOLLGATE_FAIL_MODE=closed")
	if code, _ := get(t, g, "acme"); code != http.StatusOK {
		t.Fatalf("healthy: %d", code)
	}
	if err := srv.Client.Do(t.Context(), "CLIENT", "PAUSE", 3000, "WRITE").Err(); err != nil {
		t.Fatal(err)
	}
	defer srv.Client.Do(t.Context(), "CLIENT", "UNPAUSE")
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if resp, err := http.Get(g.Admin + "/readyz"); err == nil {
					resp.Body.Close()
				}
			}
		}
	}()
	time.Sleep(300 * time.Millisecond) // a few probes answered
	start := time.Now()
	code, _ := get(t, g, "acme")
	if took := time.Since(start); code != http.StatusServiceUnavailable || took > 1500*time.Millisecond {
		t.Errorf("a decision while writes are paused and /readyz is probed: %d after %v, want 503 within about %v", code, took, timeout)
	}
}
