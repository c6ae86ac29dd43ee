package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/proxy"
)

// TestStreamedAnswersToPostsComplete: a streamed answer to a POST with
// a body reaches the client whole, every time. http.Transport used to
// drop the upstream connection mid-answer when its check for more body
// ran after the server had closed the client's body (about one request
// in a hundred or two here, golang/go#40747).
func TestStreamedAnswersToPostsComplete(t *testing.T) {
	t.Parallel()
	event := "data: " + strings.Repeat("x", 100) + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range 500 {
			io.WriteString(w, event)
			w.(http.Flusher).Flush()
		}
	}))
	defer up.Close()
	gw, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	for i := range 300 {
		resp, err := http.Post(gw+"/events", "application/json", strings.NewReader(`{"a":1}`))
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != int64(500*len(event)) {
			t.Fatalf("request %d: %d bytes of %d, %v", i, n, 500*len(event), err)
		}
	}
}
