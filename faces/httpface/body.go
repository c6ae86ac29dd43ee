package httpface

import "net/http"

// IgnoreBodies is middleware for handlers that read no request body (the
// admin listener): every body is abandoned ([AbandonBody]) before the
// handler runs, so a request whose body stalls is answered at once, and
// its connection closed, rather than after net/http has waited for the
// body forever. A request for which reads (when not nil) reports true
// keeps its body: its handler reads it, under a deadline of its own.
func IgnoreBodies(next http.Handler, reads func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if reads == nil || !reads(r) {
			AbandonBody(w, r)
		}
		next.ServeHTTP(w, r)
	})
}
