package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"

	"github.com/tollgate/tollgate/faces/proxy"
)

// TestProxyRateLimitHeadersAroundHintsAndTrailers: an upstream's 103
// Early Hints reaches the client without any rate-limit header, and the
// final answer still carries the gateway's (ReverseProxy cleared them
// with the 1xx, and the 1xx carried the upstream's); the upstream's
// rate-limit trailers, announced or not, and its look-alike headers
// (X_RateLimit_Remaining) never reach the client; its other trailers do.
func TestProxyRateLimitHeadersAroundHintsAndTrailers(t *testing.T) {
	t.Parallel()
	up, _ := recordingUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.Header().Set("X-RateLimit-Remaining", "888888")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("X-RateLimit-Remaining")
		w.Header()["X_RateLimit_Remaining"] = []string{"999"}
		w.Header().Set("Trailer", "X-RateLimit-Limit, X-Checksum")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "body")
		w.(http.Flusher).Flush()
		w.Header().Set("X-RateLimit-Limit", "424242")
		w.Header().Set("X-Checksum", "abc")
		w.Header().Set(http.TrailerPrefix+"Ratelimit", `"default";r=555`)
	})
	gw, _ := proxyGateway(t, up.URL, nil, proxy.UpstreamOptions{})
	var hints []textproto.MIMEHeader
	trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
		hints = append(hints, h)
		return nil
	}}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodGet, gw+"/", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "body" {
		t.Fatalf("answer %d %q", resp.StatusCode, body)
	}
	if len(hints) != 1 || hints[0].Get("Link") == "" {
		t.Fatalf("1xx answers %v, want the 103 with its Link", hints)
	}
	rateLimit := func(name string) bool {
		return strings.Contains(strings.ReplaceAll(strings.ToLower(name), "_", "-"), "ratelimit")
	}
	for name := range hints[0] {
		if rateLimit(name) {
			t.Errorf("the 103 carries %s: %q", name, hints[0][name])
		}
	}
	for _, h := range []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		if got := resp.Header.Values(h); len(got) != 1 || got[0] == "888888" {
			t.Errorf("final answer: %s = %q, want the gateway's one value", h, got)
		}
	}
	if got := resp.Header.Values("X_Ratelimit_Remaining"); len(got) != 0 {
		t.Errorf("final answer: the upstream's look-alike X_RateLimit_Remaining %q reached the client", got)
	}
	for name := range resp.Trailer {
		if rateLimit(name) {
			t.Errorf("trailer %s: %q reached the client", name, resp.Trailer[name])
		}
	}
	if got := resp.Trailer.Get("X-Checksum"); got != "abc" {
		t.Errorf("trailer X-Checksum %q, want abc (the upstream's own)", got)
	}
}
