package app

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/internal/logtest"
	"github.com/tollgate/tollgate/metrics"
)

// TestReloaderRunsOneMoreForASignalDuringAReload drives a reloader with
// a channel of its own, no process signal: a signal that arrives while a
// reload waits on its file (a FIFO nobody has written yet) runs exactly
// one more reload after it, however many arrive; each reload's policy is
// handed to routes; the end of ctx ends run.
func TestReloaderRunsOneMoreForASignalDuringAReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	const doc = `{"limits": [{"name": "per-minute", "limit": 5, "window": "1m"}]}`
	if err := os.WriteFile(policy, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig([]string{"TOLLGATE_POLICY_FILE=" + policy})
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	snap, err := loadSnapshot(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(prometheus.NewRegistry(), cfg.Algorithm)
	be, err := newBackend(t.Context(), cfg, func(error) {}, m, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	// From here on the policy file is a FIFO: each reload waits until
	// a write gives it the document.
	if err := os.Remove(policy); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(policy, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	routes := make(chan *domain.Policy, 4)
	r := &reloader{cfg: cfg, eng: newEngine(cfg, snap, be, nil, nil, m, log), log: log, routes: func(p *domain.Policy) { routes <- p }}
	hup := make(chan os.Signal)
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() {
		r.run(ctx, hup)
		close(stopped)
	}()

	for range 3 { // the first starts a reload; the others, during it, ask for one more
		hup <- syscall.SIGHUP
	}
	for i := range 2 {
		if err := os.WriteFile(policy, []byte(doc), 0o600); err != nil { // blocks until a reload opens the FIFO
			t.Fatal(err)
		}
		select {
		case p := <-routes:
			if _, ok := p.Limit("per-minute"); !ok {
				t.Errorf("reload %d handed routes a policy without per-minute", i+1)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("reload %d: no policy handed to routes", i+1)
		}
	}
	// A third reload would be waiting on the FIFO: a writer that does
	// not wait finds a reader.
	time.Sleep(100 * time.Millisecond)
	if fd, err := syscall.Open(policy, syscall.O_WRONLY|syscall.O_NONBLOCK, 0); err != syscall.ENXIO {
		if err == nil {
			syscall.Close(fd)
		}
		t.Errorf("a third reload is reading the file (open for writing: %v): the signals during the first ask for one more, not one each", err)
	}
	if n := len(logs.Lines(t, "policy file reloaded")); n != 2 {
		t.Errorf("%d reload lines, want 2:\n%s", n, logs.String())
	}
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("run did not return at the end of ctx")
	}
}
