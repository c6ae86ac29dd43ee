package app

import (
	"context"
	"errors"
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

// rlsReloadInterval is how often TOLLGATE_RLS_CONFIG is read again: a
// change applies once two reads agree, within two of them plus a read
// (about 1 s), inside the 2 s docs/rls.md promises.
const rlsReloadInterval = 500 * time.Millisecond

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

// withRLS returns ls with Envoy's rate limit service's listener
// (TOLLGATE_RLS_ADDR, the face on eng with rc from loadRLS) when rc is
// not nil, and that face (nil otherwise), whose configuration the
// reloader keeps up with rc's directory: a change applies within two
// rlsReloadIntervals, a rejected one is logged and the old configuration
// stays.
func withRLS(ls []*listener, cfg Config, rc *rlsConfig, eng *engine.Engine, ready ports.Pinger, m *metrics.Metrics, log *slog.Logger) ([]*listener, *rls.Server) {
	if rc == nil {
		return ls, nil
	}
	face := rls.New(rc.conf, rls.Options{
		Engine:          eng,
		Ready:           ready,
		ReadyTimeout:    cfg.RedisTimeout,
		ResponseHeaders: cfg.RLSResponseHeaders,
		Metrics:         m,
		Log:             log,
	})
	log.Info("rate limit service configuration loaded", "dir", cfg.RLSConfig, "domains", len(rc.conf.Domains()))
	warnUnconfigured(log, cfg.RLSConfig, rc.conf)
	return append(ls, &listener{name: "rls", addr: cfg.RLSAddr, variable: EnvPrefix + "RLS_ADDR", srv: rlsServer{face.NewGRPCServer(), face}}), face
}

// warnUnconfigured logs the names in dir that c was not read from, if
// any: envoyproxy/ratelimit reads every file below its directory, and a
// user switching from it would otherwise lose those limits without a
// word. It also says when c holds no domain at all (an empty directory,
// or one whose files are elsewhere), as every request is then OK.
func warnUnconfigured(log *slog.Logger, dir string, c *rlsconf.Config) {
	if names := c.Skipped(); len(names) > 0 {
		log.Warn("rate limit service: not read (only *.yaml and *.yml files directly in the directory are)", "dir", dir, "names", names)
	}
	if len(c.Domains()) == 0 {
		log.Warn("rate limit service: no domain configured; every request is answered OK", "dir", dir)
	}
}

// rlsServer is the rate limit service's gRPC server as a listener's
// server, and the face it serves (drained before a stop).
type rlsServer struct {
	*grpc.Server
	face *rls.Server
}

// Serve serves ln until the server stops; a stop is no error.
func (s rlsServer) Serve(ln net.Listener) error {
	if err := s.Server.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Shutdown stops accepting calls, ends the health watches (NOT_SERVING),
// lets in-flight calls finish until ctx ends, then cuts the rest.
func (s rlsServer) Shutdown(ctx context.Context) error {
	s.face.Drain()
	done := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.Stop()
		<-done
		return ctx.Err()
	}
}
