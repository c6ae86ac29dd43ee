package httpface_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/faces/httpface"
)

// TestWriteErrorNegotiates: the error body is JSON exactly when the
// request's Accept lists application/json, in any case, and not with
// q=0 (not acceptable); plain text otherwise, */* included. Both carry
// X-Content-Type-Options: nosniff.
func TestWriteErrorNegotiates(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		accept []string
		json   bool
	}{
		{nil, false},
		{[]string{"*/*"}, false},
		{[]string{"text/html"}, false},
		{[]string{"application/json"}, true},
		{[]string{"APPLICATION/JSON"}, true},
		{[]string{"text/html, application/json;q=0.5"}, true},
		{[]string{"text/html", "application/json"}, true},
		{[]string{"application/json; charset=utf-8"}, true},
		{[]string{"application/json;q=0"}, false},
		{[]string{"application/json; Q=0.000"}, false},
		{[]string{"application/json;q=0.001"}, true},
		{[]string{"application/jsonx"}, false},
		{[]string{"application/problem+json"}, false},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header["Accept"] = tt.accept
		w := httptest.NewRecorder()
		httpface.WriteError(w, r, http.StatusTooManyRequests, "rate limit exceeded")
		body, ct := w.Body.String(), w.Header().Get("Content-Type")
		want, wantCT := "rate limit exceeded\n", "text/plain; charset=utf-8"
		if tt.json {
			want, wantCT = `{"error":"rate limit exceeded"}`+"\n", "application/json"
		}
		if w.Code != http.StatusTooManyRequests || body != want || ct != wantCT || w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("Accept %q: %d %q %q %v, want %q as %s", tt.accept, w.Code, body, ct, w.Header(), want, wantCT)
		}
	}
}
