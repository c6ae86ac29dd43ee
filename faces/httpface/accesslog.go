package httpface

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/domain"
)

// accessMsg is the msg of every access-log line.
const accessMsg = "access"

// requestRecord is what the access log learns about one request from the
// handlers beneath it. Those handlers run on the request's goroutine, and
// the access log reads the record after they return, so it needs no lock.
type requestRecord struct {
	method  string // the request's, or the one a check describes
	path    string // escaped and normalised, without the query
	route   string
	tenant  domain.TenantID
	client  string
	outcome string
}

type recordKey struct{}

// recordFrom returns the request's record, or nil when the access log is
// off.
func recordFrom(ctx context.Context) *requestRecord {
	rec, _ := ctx.Value(recordKey{}).(*requestRecord)
	return rec
}

// OutcomeUnmetered is the access log's outcome of a request on a route
// that is not metered (cost 0, or no limits).
const OutcomeUnmetered = "unmetered"

// OutcomeRejected is the access log's outcome of a request refused for
// naming no tenant (TOLLGATE_ANONYMOUS=reject).
const OutcomeRejected = "rejected"

// SetOutcome tells the access log, if any, the tenant a request was
// metered as, its route and the decision's outcome (domain.Outcome's
// names; [OutcomeUnmetered] on a route of cost 0; "" for a request
// refused before the limiter, such as a 400 for its path). It is a
// face's one hook into the access log.
func SetOutcome(ctx context.Context, tenant domain.TenantID, route string, outcome string) {
	if rec := recordFrom(ctx); rec != nil {
		rec.tenant, rec.route, rec.outcome = tenant, route, outcome
	}
}

// SetLogPath tells the access log, if any, the request's normalised path.
func SetLogPath(ctx context.Context, path string) {
	if rec := recordFrom(ctx); rec != nil {
		rec.path = path
	}
}

// SetLogRequest tells the access log, if any, the method and normalised
// path of the request a check describes, which the log shows instead of
// the check request's own.
func SetLogRequest(ctx context.Context, method, path string) {
	if rec := recordFrom(ctx); rec != nil {
		rec.method, rec.path = method, path
	}
}

// AccessLog is middleware that writes one JSON line per request to h,
// with the flat keys time, method, path (normalised, without the query),
// route, tenant, client (the client address of docs/edge.md, as d reads
// it, on every line: a request refused for its path too), status,
// outcome and duration_ms. It writes whatever the handler's level
// (TOLLGATE_LOG_LEVEL does not hide access lines), and never a header:
// no API key, no Authorization, no query string, which may hold a
// credential. A face mounts it only when TOLLGATE_ACCESS_LOG is set, so
// it costs nothing when off.
func AccessLog(h slog.Handler, now func() time.Time, d Describer) func(http.Handler) http.Handler {
	if now == nil {
		now = time.Now
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := now()
			rec := &requestRecord{method: r.Method, path: r.URL.EscapedPath(), route: domain.DefaultRoute}
			if c := d.ClientAddr(r); c.IsValid() {
				rec.client = c.String()
			}
			sw := &StatusWriter{ResponseWriter: w}
			next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), recordKey{}, rec)))
			end := now()
			status := sw.Final(r.Context())
			line := slog.NewRecord(end, slog.LevelInfo, accessMsg, 0)
			line.AddAttrs(
				slog.String("method", rec.method),
				slog.String("path", rec.path),
				slog.String("route", rec.route),
				slog.String("tenant", string(rec.tenant)),
				slog.String("client", rec.client),
				slog.Int("status", status),
				slog.String("outcome", rec.outcome),
				slog.Float64("duration_ms", float64(end.Sub(start).Microseconds())/1000),
			)
			// Handle, not a Logger: a Logger would drop the line below
			// the handler's level.
			_ = h.Handle(r.Context(), line)
		})
	}
}

// StatusWriter records the status a handler answers. Unwrap lets
// http.ResponseController reach the connection beneath (flushes for
// streaming, read deadlines, hijacking for upgrades).
type StatusWriter struct {
	http.ResponseWriter
	status int // 0 until the header is written
}

// Status returns the status answered: 200 when the handler wrote nothing.
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// StatusClientClosed is the status counted and logged for a request
// whose client went away before anything was answered (nginx's 499,
// "client closed request"): no client ever reads it.
const StatusClientClosed = 499

// Final returns the status to count and log for a request whose handler
// has returned, ctx being the request's: [StatusClientClosed] when
// nothing was written and the client is gone (ctx done: net/http's 200
// would reach nobody), else [StatusWriter.Status].
func (w *StatusWriter) Final(ctx context.Context) int {
	if w.status == 0 && ctx.Err() != nil {
		return StatusClientClosed
	}
	return w.Status()
}

// WriteHeader records code (the first final one) and writes it.
func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records a 200 when nothing was written before, and writes p.
func (w *StatusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher, for handlers that assert it.
func (w *StatusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = Flush(w.ResponseWriter)
}

// Flush flushes w as http.ResponseController's Flush does, unwrapping
// it until a writer flushes, without allocating a controller (a stream
// of events flushes at every event). It returns the connection's error,
// or http.ErrNotSupported when no writer flushes.
func Flush(w http.ResponseWriter) error {
	for {
		switch x := w.(type) {
		case interface{ FlushError() error }:
			return x.FlushError()
		case http.Flusher:
			x.Flush()
			return nil
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return http.ErrNotSupported
		}
	}
}

// Unwrap returns the wrapped ResponseWriter, for http.ResponseController.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
