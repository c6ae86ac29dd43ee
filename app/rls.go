package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/rls"
	"github.com/tollgate/tollgate/faces/rls/rlsconf"
	"github.com/tollgate/tollgate/faces/rls/rlsxds"
	"github.com/tollgate/tollgate/internal/tlsfiles"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/ports"
)

// rlsReloadInterval is how often TOLLGATE_RLS_CONFIG is read again: a
// change applies once two reads agree, within two of them plus a read
// (about 1 s), inside the 2 s docs/rls.md promises.
const rlsReloadInterval = 500 * time.Millisecond

// rlsConfig is where the rate limit service's configuration comes from
// (TOLLGATE_RLS_CONFIG's directory, or the xDS server of
// TOLLGATE_RLS_XDS), what it held at start-up, and the TLS of its
// listener.
type rlsConfig struct {
	// conf is the configuration at start-up: nil over xDS, until the
	// first snapshot.
	conf *rlsconf.Config
	// source names where it comes from in logs: "dir" or "xds", and
	// the directory or the server's address.
	source []any
	// run follows the source until ctx ends, calling apply with each
	// new configuration and reject with each refused one.
	run func(ctx context.Context, apply func(*rlsconf.Config), reject func(error))
	// tls serves the listener's certificates; nil: no TLS.
	tls *tlsfiles.Source
}

// loadRLS loads the rate limit service's configuration when
// TOLLGATE_RLS_ADDR is set (nil otherwise): TOLLGATE_RLS_CONFIG's
// directory, or, with TOLLGATE_RLS_XDS, nothing until the xDS server
// sends it; and the listener's TLS files. A configuration that
// envoyproxy/ratelimit would reject, or a TLS file that cannot be read
// or does not hold what it should, is an *ExitError of code 2 naming
// the variable and the file.
func loadRLS(cfg Config, log *slog.Logger) (*rlsConfig, error) {
	if cfg.RLSAddr == "" {
		return nil, nil
	}
	rc := &rlsConfig{}
	if cfg.RLSTLSCert != "" {
		src, err := loadTLS(tlsfiles.Files{Cert: cfg.RLSTLSCert, Key: cfg.RLSTLSKey, CA: cfg.RLSTLSClientCA}, log, "RLS_TLS_CERT", "RLS_TLS_KEY", "RLS_TLS_CLIENT_CA")
		if err != nil {
			return nil, err
		}
		rc.tls = src
	}
	if cfg.RLSXDS != "" {
		o := rlsxds.Options{Addr: cfg.RLSXDS, NodeID: cfg.RLSXDSNodeID, Log: log}
		if cfg.RLSXDSTLSCA != "" || cfg.RLSXDSTLSCert != "" {
			src, err := loadTLS(tlsfiles.Files{Cert: cfg.RLSXDSTLSCert, Key: cfg.RLSXDSTLSKey, CA: cfg.RLSXDSTLSCA}, log, "RLS_XDS_TLS_CERT", "RLS_XDS_TLS_KEY", "RLS_XDS_TLS_CA")
			if err != nil {
				return nil, err
			}
			o.Creds = src.ClientCredentials("")
		}
		rc.source = []any{"xds", cfg.RLSXDS, "node", cfg.RLSXDSNodeID}
		rc.run = func(ctx context.Context, apply func(*rlsconf.Config), reject func(error)) {
			o.Apply, o.Reject = apply, reject
			if err := rlsxds.Run(ctx, o); err != nil {
				log.Error("rate limit service: no xDS subscription", "err", err)
			}
		}
		return rc, nil
	}
	w, conf, err := rlsconf.NewWatcher(cfg.RLSConfig)
	if err != nil {
		return nil, &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %sRLS_CONFIG: %w", EnvPrefix, err)}
	}
	rc.conf, rc.source = conf, []any{"dir", cfg.RLSConfig}
	rc.run = func(ctx context.Context, apply func(*rlsconf.Config), reject func(error)) {
		w.Run(ctx, rlsReloadInterval, apply, reject)
	}
	return rc, nil
}

// loadTLS loads files, whose variables are cert, key and ca (without
// the prefix). An error is an *ExitError of code 2 naming the variable
// of the file at fault.
func loadTLS(files tlsfiles.Files, log *slog.Logger, cert, key, ca string) (*tlsfiles.Source, error) {
	src, err := tlsfiles.Load(files, 0, log)
	if err == nil {
		return src, nil
	}
	name := cert
	if fe := (*tlsfiles.FileError)(nil); errors.As(err, &fe) {
		switch fe.Path {
		case files.Key:
			name = key
		case files.CA:
			name = ca
		}
	}
	return nil, &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %s%s: %w", EnvPrefix, name, err)}
}

// withRLS returns ls with Envoy's rate limit service's listener
// (TOLLGATE_RLS_ADDR, the face on eng with rc from loadRLS, over TLS
// when rc has it) when rc is not nil, and that face (nil otherwise),
// whose configuration the reloader keeps up with rc's source: a change
// applies within two rlsReloadIntervals from a directory, at once over
// xDS; a rejected one is logged and the old configuration stays.
func withRLS(ls []*listener, cfg Config, rc *rlsConfig, eng *engine.Engine, ready ports.Pinger, m *metrics.Metrics, log *slog.Logger) ([]*listener, *rls.Server) {
	if rc == nil {
		return ls, nil
	}
	face := rls.New(rc.conf, rls.Options{
		Engine:          eng,
		Ready:           ready,
		ReadyTimeout:    cfg.RedisTimeout,
		ResponseHeaders: cfg.RLSResponseHeaders,
		Shadow:          cfg.Shadow,
		Metrics:         m,
		Log:             log,
	})
	if rc.conf != nil {
		log.Info("rate limit service configuration loaded", append(rc.source, "domains", len(rc.conf.Domains()))...)
		warnUnconfigured(log, cfg.RLSConfig, rc.conf)
	} else {
		log.Info("rate limit service: awaiting its configuration; until then every call is answered an error", rc.source...)
	}
	var opts []grpc.ServerOption
	if rc.tls != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(rc.tls.ServerConfig())))
	}
	return append(ls, &listener{name: "rls", addr: cfg.RLSAddr, variable: EnvPrefix + "RLS_ADDR", srv: rlsServer{face.NewGRPCServer(opts...), face}}), face
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
