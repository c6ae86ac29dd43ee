// Command tollgate is a rate-limiting API gateway. It is configured with
// TOLLGATE_* environment variables; run it with -h to list them.
package main

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/app"
)

func main() {
	// The standard logger, which net/http's client writes to when an
	// upstream misbehaves ("Unsolicited response received on idle HTTP
	// channel"), writes JSON lines as the gateway's own log does, at warn.
	log.SetFlags(0)
	log.SetOutput(slog.NewLogLogger(slog.NewJSONHandler(os.Stderr, nil), slog.LevelWarn).Writer())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := app.Run(ctx, os.Args, os.Environ(), os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop()
		os.Exit(app.ExitCode(err))
	}
}
