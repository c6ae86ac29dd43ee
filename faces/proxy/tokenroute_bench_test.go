package proxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/adapters/keys"
	"github.com/tollgate/tollgate/domain"
	"github.com/tollgate/tollgate/engine"
	"github.com/tollgate/tollgate/faces/httpface"
	"github.com/tollgate/tollgate/faces/proxy"
)

// BenchmarkTokenStream measures a streamed answer of 2000 events (an
// OpenAI chat completion streamed token by token, usage asked) through
// the whole proxy face over loopback: on a route metered in tokens (the
// body read and rewritten, every event framed and read for usage, the
// reservation settled) and on the same route metered in requests, from
// an upstream that writes the events encoded once. The two alternate
// stream by stream (each first every other time), so that both see the
// same load of a busy machine; it reports each one's MB/s (the stream's bytes the
// client read per second) and tokens/requests, the ratio of their
// totals (the bar: at least 0.9). go test -run X -bench
// TokenStream -count 5 ./faces/proxy/
func BenchmarkTokenStream(b *testing.B) {
	// The upstream writes events encoded once, flushing each: the
	// gateway's work, not the upstream's encoding, is what differs.
	chunk := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}],"usage":null}` + "\n\n"
	last := `data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":2000,"total_tokens":2010}}` + "\n\ndata: [DONE]\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for range 2000 {
			_, _ = io.WriteString(w, chunk)
			f.Flush()
		}
		_, _ = io.WriteString(w, last)
	}))
	defer up.Close()
	target, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"Tell me a story."}],"max_completion_tokens":2000,"stream":true,"stream_options":{"include_usage":true}}`
	gateway := func(limit domain.PolicyLimit, route domain.Route) string {
		policy, err := domain.NewPolicy([]domain.PolicyLimit{limit}, []domain.Route{route})
		if err != nil {
			b.Fatal(err)
		}
		store := newTokenStore()
		e := engine.New(&engine.Snapshot{Policy: policy}, engine.Options{Limiter: store, Settler: store, Keys: keys.Layout{Prefix: "rl:"}})
		gw := httptest.NewServer(proxy.New(proxy.Options{
			Engine:    e,
			Upstream:  proxy.NewUpstream(target, proxy.UpstreamOptions{}),
			Describer: httpface.Describer{TenantHeader: "X-Tenant-ID"},
		}))
		b.Cleanup(gw.Close)
		return gw.URL
	}
	requests := gateway(domain.PolicyLimit{Name: "rpm", Rule: domain.Rule{Limit: 1_000_000_000, Window: time.Hour}},
		domain.Route{Name: "chat", Path: "/v1/chat/completions", Cost: 1})
	tokens := gateway(domain.PolicyLimit{Name: "tpm", Rule: domain.Rule{Limit: 1_000_000_000, Window: time.Hour}, Tokens: true},
		domain.Route{Name: "chat", Path: "/v1/chat/completions", Cost: 1, Tokens: "openai"})
	stream := func(gw string) (int64, time.Duration) {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodPost, gw+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Tenant-ID", "acme")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("%d, %v", resp.StatusCode, err)
		}
		return n, time.Since(start)
	}
	var bytesR, bytesT int64
	var timeR, timeT time.Duration
	for i := 0; b.Loop(); i++ {
		// Each goes first every other time: the first of two streams in
		// a row runs on a machine the other has not yet loaded.
		for k := range 2 {
			if (i+k)%2 == 0 {
				n, d := stream(requests)
				bytesR, timeR = bytesR+n, timeR+d
			} else {
				n, d := stream(tokens)
				bytesT, timeT = bytesT+n, timeT+d
			}
		}
	}
	mbps := func(n int64, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(bytesR, timeR), "requests-MB/s")
	b.ReportMetric(mbps(bytesT, timeT), "tokens-MB/s")
	b.ReportMetric(mbps(bytesT, timeT)/mbps(bytesR, timeR), "tokens/requests")
}
