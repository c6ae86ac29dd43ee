package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/rls"
	"github.com/tollgate/tollgate/faces/rls/rlsconf"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/ports"
)

// What the rate limit service's variables accept (see accepted).
func init() {
	accepted["RLS_ADDR"] = "empty (off), or a host:port listen address for Envoy's rate limit service (gRPC without TLS)"
	accepted["RLS_CONFIG"] = "the directory of envoyproxy/ratelimit YAML files (*.yaml, *.yml), required with TOLLGATE_RLS_ADDR"
	accepted["RLS_COUNT_DENIED"] = "true (count denied hits on every descriptor, as envoyproxy/ratelimit) or false (all or nothing) (also 1, 0, t, f)"
	accepted["RLS_RESPONSE_HEADERS"] = "true or false (also 1, 0, t, f)"
}

// rlsReloadInterval is how often TOLLGATE_RLS_CONFIG is read again: a
// change takes effect within it (the contract says 2 s).
const rlsReloadInterval = time.Second

// rlsListener is Envoy's rate limit service (TOLLGATE_RLS_ADDR): the
// face on its gRPC server and listener, and the watcher of its
// configuration directory.
type rlsListener struct {
	face *rls.Server
	srv  *grpc.Server
	ln   net.Listener
	stop context.CancelFunc // ends the watcher
}

// rlsConfig is TOLLGATE_RLS_CONFIG loaded, and the watcher of its
// directory.
type rlsConfig struct {
	watcher *rlsconf.Watcher
	conf    *rlsconf.Config
}

// loadRLS loads TOLLGATE_RLS_CONFIG when TOLLGATE_RLS_ADDR is set (nil
// otherwise). A configuration that envoyproxy/ratelimit would reject is an
// *ExitError of code 2 naming the file.
func loadRLS(cfg Config) (*rlsConfig, error) {
	if cfg.RLSAddr == "" {
		return nil, nil
	}
	w, conf, err := rlsconf.NewWatcher(cfg.RLSConfig)
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %sRLS_CONFIG: %w", EnvPrefix, err)}
	}
	return &rlsConfig{watcher: w, conf: conf}, nil
}

// startRLS builds the face on eng with rc (from loadRLS) and listens on
// TOLLGATE_RLS_ADDR; it returns nil when rc is. From then on the
// directory is watched until ctx ends or the listener stops: a change
// applies within rlsReloadInterval, a rejected one is logged and the old
// configuration stays.
func startRLS(ctx context.Context, cfg Config, rc *rlsConfig, eng *engine.Engine, ready ports.Pinger, m *metrics.Metrics, log *slog.Logger) (*rlsListener, error) {
	if rc == nil {
		return nil, nil
	}
	w := rc.watcher
	face := rls.New(rc.conf, rls.Options{
		Engine:          eng,
		Ready:           ready,
		ReadyTimeout:    cfg.RedisTimeout,
		CountDenied:     cfg.RLSCountDenied,
		ResponseHeaders: cfg.RLSResponseHeaders,
		Metrics:         m,
	})
	ln, err := net.Listen("tcp", cfg.RLSAddr)
	if err != nil {
		return nil, fmt.Errorf("tollgate: rate limit service listener: %w", err)
	}
	wctx, stop := context.WithCancel(ctx)
	go w.Run(wctx, rlsReloadInterval, func(c *rlsconf.Config) {
		face.SetConfig(c)
		log.Info("rate limit service configuration reloaded", "dir", cfg.RLSConfig, "domains", len(c.Domains()))
	}, func(err error) {
		log.Error("rate limit service configuration rejected; keeping the previous one", "dir", cfg.RLSConfig, "err", err)
	})
	return &rlsListener{face: face, srv: face.NewGRPCServer(), ln: ln, stop: stop}, nil
}

// addr returns where l listens, for the start-up log ("off" for nil).
func (l *rlsListener) addr() string {
	if l == nil {
		return "off"
	}
	return l.ln.Addr().String()
}

// serve serves l until it stops.
func (l *rlsListener) serve() error {
	err := l.srv.Serve(l.ln)
	if err == grpc.ErrServerStopped {
		return nil
	}
	return err
}

// close releases what l holds if it never served (start-up failed
// later) and stops the watcher. Safe on nil, and after shutdown.
func (l *rlsListener) close() {
	if l == nil {
		return
	}
	l.stop()
	l.srv.Stop()
	_ = l.ln.Close()
}

// shutdown stops l: no new calls, in-flight ones finish until ctx ends,
// then the rest are cut. It stops the watcher. Safe on nil.
func (l *rlsListener) shutdown(ctx context.Context) {
	if l == nil {
		return
	}
	l.stop()
	done := make(chan struct{})
	go func() {
		l.srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		l.srv.Stop()
		<-done
	}
}
