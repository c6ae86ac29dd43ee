package httpface

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
)

// Recoverer is middleware that turns a panic in a handler into a 500 and
// one JSON log line on log, instead of a dropped connection and a stack
// trace on stderr. http.ErrAbortHandler is re-panicked: it is how a
// handler aborts a response on purpose (the reverse proxy does, when a
// client goes away).
func Recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("handler panic", "panic", fmt.Sprint(v), "method", r.Method, "path", r.URL.Path,
					"stack", string(debug.Stack()))
				WriteError(w, r, http.StatusInternalServerError, "internal error")
			}()
			next.ServeHTTP(w, r)
		})
	}
}
