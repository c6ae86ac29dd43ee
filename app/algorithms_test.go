package app_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/tollgate/tollgate/app/apptest"
	"github.com/tollgate/tollgate/domain"
)

// TestGatewayEveryAlgorithm runs the whole gateway on the memory store
// with each TOLLGATE_ALGORITHM: a burst gets the limit, then a 429 whose
// Retry-After is a whole number of seconds.
func TestGatewayEveryAlgorithm(t *testing.T) {
	t.Parallel()
	for _, algo := range domain.AlgorithmNames() {
		t.Run(algo, func(t *testing.T) {
			t.Parallel()
			g := apptest.Start(t, "TOLLGATE_ALGORITHM="+algo, "TOLLGATE_LIMIT=3", "TOLLGATE_WINDOW=1h")
			wants := []struct {
				status    int
				remaining string
			}{{200, "2"}, {200, "1"}, {200, "0"}, {429, "0"}}
			for i, want := range wants {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, g.Public+"/", nil)
				req.Header.Set("X-Tenant-ID", "acme")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if got := resp.StatusCode; got != want.status {
					t.Fatalf("request %d: status %d, want %d", i+1, got, want.status)
				}
				if got := resp.Header.Get("X-RateLimit-Remaining"); got != want.remaining {
					t.Errorf("request %d: X-RateLimit-Remaining = %q, want %q", i+1, got, want.remaining)
				}
				if want.status == 429 {
					if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 {
						t.Errorf("request %d: Retry-After = %q, want whole seconds >= 1", i+1, resp.Header.Get("Retry-After"))
					}
				}
			}
		})
	}
}
