package httpface

import (
	"net/http"
	"net/url"
	"strings"
)

// methodOverrideHeaders are the headers through which frameworks let a
// client name the method a request is served as: Flask's documented
// middleware, Rack, Express's method-override, gorilla's handler and
// Symfony read X-HTTP-Method-Override; others X-HTTP-Method or
// X-Method-Override.
var methodOverrideHeaders = [...]string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override"}

// methodParam is the query (or form) parameter Symfony, Laravel and
// Spring's HiddenHttpMethodFilter read as the method of a POST.
const methodParam = "_method"

// MethodOverrides returns the methods a request with header h and query
// rawQuery names for the upstream to serve it as instead of its own:
// the comma-separated values of the method-override headers, in any
// case or with '_' for '-' (a WSGI or CGI server reads X_HTTP_Method_Override
// as the header), and the values of the query's "_method" parameters,
// its name and value percent-decoded (PHP also reads "." and " " in a
// name as "_"). Nil when there are none, as for nearly every request: it
// then does not allocate. A form body's "_method" is not seen: the
// gateway does not read bodies.
func MethodOverrides(h http.Header, rawQuery string) []string {
	var ms []string
	for name, vs := range h {
		if !isMethodOverrideHeader(name) {
			continue
		}
		for _, v := range vs {
			for m := range strings.SplitSeq(v, ",") {
				if m = strings.TrimSpace(m); m != "" {
					ms = append(ms, m)
				}
			}
		}
	}
	for rest := rawQuery; rest != ""; {
		var pair string
		pair, rest, _ = strings.Cut(rest, "&")
		name, value, _ := strings.Cut(pair, "=")
		if !isMethodParam(name) {
			continue
		}
		if v, err := url.QueryUnescape(value); err == nil {
			value = v
		}
		if value = strings.TrimSpace(value); value != "" {
			ms = append(ms, value)
		}
	}
	return ms
}

func isMethodOverrideHeader(name string) bool {
	for _, h := range methodOverrideHeaders {
		if LooksLike(name, h) {
			return true
		}
	}
	return false
}

// isMethodParam reports whether name, a query parameter's name as sent,
// is "_method" once decoded, as PHP reads it too ("." or " " for "_").
func isMethodParam(name string) bool {
	if strings.ContainsAny(name, "%+") {
		n, err := url.QueryUnescape(name)
		if err != nil {
			return false
		}
		name = n
	}
	if len(name) != len(methodParam) {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '.' || c == ' ' {
			c = '_'
		}
		if c != methodParam[i] {
			return false
		}
	}
	return true
}
