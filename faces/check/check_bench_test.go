package check_test

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/memory"
	"github.com/tollgate/tollgate/domain"
)

// BenchmarkCheck is one check as nginx's auth_request sends it (the
// original URI and method, a tenant among 1000) through the check
// handler over the memory store, answered to a ResponseWriter that
// keeps nothing: the face's own cost, without the HTTP server's.
func BenchmarkCheck(b *testing.B) {
	store, err := memory.New(domain.AlgorithmFixedWindow, memory.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	h, _, _ := newCheck(b, setup{lim: store, policy: domain.DefaultPolicy(domain.Rule{Limit: 1e9, Window: 24 * time.Hour}, false)})
	reqs := make([]*http.Request, 1000)
	for i := range reqs {
		r, _ := http.NewRequest(http.MethodGet, "http://tollgate/.tollgate", nil)
		r.RequestURI = "/.tollgate"
		r.RemoteAddr = "127.0.0.1:40000"
		r.Header.Set("X-Tenant-ID", "tenant-"+strconv.Itoa(i))
		r.Header.Set("X-Original-URI", "/v1/items?q=1")
		r.Header.Set("X-Original-Method", "GET")
		reqs[i] = r
	}
	w := &discardWriter{header: http.Header{}}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		clear(w.header)
		h.ServeHTTP(w, reqs[i%len(reqs)])
		i++
	}
	if w.code != http.StatusOK {
		b.Fatalf("status %d", w.code)
	}
}

// discardWriter is a ResponseWriter that keeps only the status.
type discardWriter struct {
	header http.Header
	code   int
}

func (w *discardWriter) Header() http.Header         { return w.header }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
