package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/internal/throttle"
)

// bearer answers 401 to a call without the admin token, the same way on
// every admin API.
type bearer struct {
	digest  [sha256.Size]byte // of the token: compared digests take the same time whatever is presented
	log     *slog.Logger
	count   func(action string)
	refused throttle.Log // calls refused for their token
}

// newBearer returns the check of token, logging through log and counting
// through count (neither nil).
func newBearer(token string, log *slog.Logger, count func(string)) *bearer {
	b := &bearer{digest: sha256.Sum256([]byte(token)), log: log, count: count}
	b.refused.Interval = time.Second
	return b
}

// authorize answers 401 to a call without the token, before anything
// about the call is looked at, and logs at most one line a second.
func (b *bearer) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		presented := sha256.Sum256([]byte(httpface.BearerToken(r.Header)))
		if subtle.ConstantTimeCompare(presented[:], b.digest[:]) != 1 {
			b.count("unauthorized")
			b.refused.Do(func(n int64) {
				b.log.Warn("usage API: call refused: no or a wrong bearer token",
					"client", peer(r), "path", r.URL.Path, "refused_since_last_line", n)
			})
			w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate"`)
			writeJSON(w, http.StatusUnauthorized, errorBody{"unauthorized: Authorization: Bearer <TOLLGATE_ADMIN_TOKEN> required"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// apiDefaults fills what an admin API's options leave out: the store
// timeout UsageTimeout, a log that discards, a count that counts nothing.
func apiDefaults(timeout time.Duration, log *slog.Logger, count func(string)) (time.Duration, *slog.Logger, func(string)) {
	if timeout <= 0 {
		timeout = UsageTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if count == nil {
		count = func(string) {}
	}
	return timeout, log, count
}
