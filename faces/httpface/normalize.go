package httpface

import (
	"net/http"
	"net/url"

	"github.com/tollgate/tollgate/domain"
)

// The 400 answers to a path [domain.NormalizePath] refuses, and to a
// method override on another route ([domain.ErrAmbiguousMethod]).
const (
	invalidPathBody     = "invalid path"
	ambiguousMethodBody = "ambiguous method"
)

// Normalize is middleware that replaces the request's path with its
// normal form ([domain.NormalizePath]) before anything meters, routes or
// forwards it, so that what the upstream sees is what was metered: with
// the upstream at http://svc/api, GET /a/../b reaches http://svc/api/b,
// and GET /../admin, /%2e%2e/admin and /..%2fadmin are answered 400
// without spending any budget.
//
// URL.Path (decoded) and URL.RawPath (the normal form, escapes kept) are
// set together, so URL.EscapedPath, which the reverse proxy joins to the
// upstream's path, is the normal form: an encoded slash (%2F) stays
// encoded on the way upstream. A request whose path is already normal is
// passed on as it is, without allocating. A 400 counts in metrics on the
// route "default" (it matched no route), told to m if not nil.
func Normalize(m Metrics) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			escaped := r.URL.EscapedPath()
			norm, err := domain.NormalizePath(escaped)
			if err != nil {
				WriteInvalidPath(w, r, m)
				return
			}
			if norm != escaped {
				r = withPath(r, norm)
			}
			SetLogPath(r.Context(), norm)
			next.ServeHTTP(w, r)
		})
	}
}

// WriteInvalidPath answers a path that cannot be metered: 400, counted
// on the route "default" by m if not nil. Nothing was spent.
func WriteInvalidPath(w http.ResponseWriter, r *http.Request, m Metrics) {
	writeUnrouted(w, r, m, invalidPathBody)
}

// WriteAmbiguousMethod answers a request whose method override would
// have the upstream serve another route than the one its method matches
// ([domain.ErrAmbiguousMethod]): 400, counted on the route "default" by
// m if not nil. Nothing was spent.
func WriteAmbiguousMethod(w http.ResponseWriter, r *http.Request, m Metrics) {
	writeUnrouted(w, r, m, ambiguousMethodBody)
}

// writeUnrouted answers 400 with msg a request that was not decided,
// counted on the route "default" by m if not nil.
func writeUnrouted(w http.ResponseWriter, r *http.Request, m Metrics, msg string) {
	AbandonBody(w, r)
	WriteError(w, r, http.StatusBadRequest, msg)
	if m != nil {
		m.Unrouted(http.StatusBadRequest)
	}
}

// pathUnescaped returns the decoded form of norm, whose escapes are valid.
func pathUnescaped(norm string) string {
	p, err := url.PathUnescape(norm)
	if err != nil {
		return norm // cannot happen: NormalizePath escapes validly
	}
	return p
}

// withPath returns a shallow copy of r whose URL has the path norm, a
// normal form.
func withPath(r *http.Request, norm string) *http.Request {
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.Path = pathUnescaped(norm)
	u.RawPath = norm
	r2.URL = &u
	return r2
}
