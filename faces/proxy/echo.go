package proxy

import (
	"encoding/json"
	"io"
	"net/http"

	"github.com/tollgate/tollgate/faces/httpface"
)

// echoResponse is what the echo responder answers.
type echoResponse struct {
	Tenant string `json:"tenant"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
}

// echoBodyMax is as much of a request body as the echo responder reads;
// net/http closes the connection after a longer one.
const echoBodyMax = 1 << 20

// Echo is the upstream when none is configured: it answers 200 with the
// resolved tenant and the request line as JSON, so a fresh gateway is
// useful with nothing else running. It reads the request's body first (up
// to 1 MiB; net/http closes the connection after a longer one), as an
// upstream would: a body that stalls for [BodyIdleTimeout] is answered
// 408, as through a real upstream, and one that does not parse (a bad
// chunk) 400.
func Echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil {
			if _, err := io.Copy(io.Discard, io.LimitReader(r.Body, echoBodyMax)); err != nil {
				switch {
				case bodyTimedOut(r):
					writeBodyTimedOut(w, r)
				case r.Context().Err() == nil: // the client is there: its body is bad
					w.Header().Set("Connection", "close")
					httpface.WriteError(w, r, http.StatusBadRequest, "invalid request body")
				}
				return // or the client went away
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoResponse{
			Tenant: string(TenantFrom(r.Context())),
			Method: r.Method,
			Path:   r.URL.Path,
			Query:  r.URL.RawQuery,
		})
	})
}
