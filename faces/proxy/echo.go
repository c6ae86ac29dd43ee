package proxy

import (
	"encoding/json"
	"net/http"
)

// echoResponse is what the echo responder answers.
type echoResponse struct {
	Tenant string `json:"tenant"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Query  string `json:"query,omitempty"`
}

// Echo is the upstream when none is configured: it answers 200 with the
// resolved tenant and the request line as JSON, so a fresh gateway is
// useful with nothing else running.
func Echo() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoResponse{
			Tenant: string(TenantFrom(r.Context())),
			Method: r.Method,
			Path:   r.URL.Path,
			Query:  r.URL.RawQuery,
		})
	})
}
