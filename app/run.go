package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// ShutdownTimeout is how long in-flight requests may run after a stop
// signal.
const ShutdownTimeout = 10 * time.Second

// ExitError is an error with the process exit status it calls for.
type ExitError struct {
	Code int   // the exit status: 2 for bad configuration
	Err  error // what to print, one line
}

// Error is the wrapped error's message.
func (e *ExitError) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode returns the exit status for err, as returned by [Run]: 0 for
// nil, 2 for bad configuration or usage, 1 otherwise.
func ExitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	return 1
}

// Run is the gateway's main: it parses the command line and the config
// from environ, builds the store and the engine, serves the listeners
// (the proxy, the check endpoint when TOLLGATE_CHECK_ADDR is set, Envoy's
// rate limit service when TOLLGATE_RLS_ADDR is, admin) over that one
// engine, and on ctx's end stops accepting connections, lets in-flight
// requests finish (up to ShutdownTimeout), closes the store and returns
// nil. Logs are JSON lines on stderr. A bad setting, a bad tenants,
// policy or rate limit service file, or a listen address that cannot be
// listened on returns an *ExitError with Code 2 whose message is one line
// naming the variable or file.
//
// Run as ratelimit (args[0]'s base name) or with -envoy-ratelimit, it
// reads envoyproxy/ratelimit's variables for what they name, and serves
// its /healthcheck (see envoyEnviron).
//
// Run handles SIGHUP for as long as it runs: with a tenants or policy
// file it reloads both (see reloader) and logs the outcome, a bad file
// leaving the tenants and the policy as they were; without either it
// logs the signal and ignores it.
func Run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) error {
	args, environ, envoy, err := envoyEnviron(args, environ)
	if err != nil {
		return err
	}
	cfg, done, err := parse(args, environ, stdout)
	if done || err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel)
	warnIgnored(log, cfg, environ)
	if envoy != nil {
		envoy.warn(log)
	}
	// Notified before serving: from here on SIGHUP reloads, or is logged
	// and ignored, and never kills the process (its default action).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	g, err := build(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer g.close()
	if envoy != nil {
		g.withEnvoy(envoy)
	}
	return g.serve(ctx, hup)
}

// parse reads the command line and the config from environ. It returns
// done when there is nothing to serve: -h and -version, printed on
// stdout, and every error, an *ExitError with Code 2.
func parse(args, environ []string, stdout io.Writer) (cfg Config, done bool, err error) {
	if len(args) > 1 {
		switch args[1] {
		case "-h", "-help", "--help":
			printUsage(stdout)
			return Config{}, true, nil
		case "-version", "--version":
			fmt.Fprintln(stdout, BuildVersion())
			return Config{}, true, nil
		}
		return Config{}, true, &ExitError{Code: 2, Err: fmt.Errorf("tollgate: unexpected argument %q: configure tollgate with TOLLGATE_* variables (tollgate -h lists them; tollgate -version prints the version)", args[1])}
	}
	if cfg, err = LoadConfig(environ); err != nil {
		return Config{}, true, &ExitError{Code: 2, Err: fmt.Errorf("tollgate: %s", strings.ReplaceAll(err.Error(), "\n", "; "))}
	}
	return cfg, false, nil
}

// newLogger returns a JSON-lines logger on w at level, a LOG_LEVEL value
// (validated).
func newLogger(w io.Writer, level string) *slog.Logger {
	l, _ := parseLevel(level)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
