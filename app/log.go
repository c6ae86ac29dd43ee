package app

import (
	"fmt"
	"io"
	"log/slog"
)

// parseLevel parses a LOG_LEVEL value.
func parseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q", s)
}

// newLogger returns a JSON-lines logger on w at level, a LOG_LEVEL value
// (validated).
func newLogger(w io.Writer, level string) *slog.Logger {
	l, _ := parseLevel(level)
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: l}))
}
