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
	"github.com/tollgate/tollgate/internal/fakellm"
)

// BenchmarkTokenStream measures a streamed answer of 2000 events (an
// OpenAI chat completion streamed token by token, usage asked) through
// the whole proxy face over loopback: on a route metered in tokens (the
// body read and rewritten, every event framed and read for usage, the
// reservation settled) and on the same route metered in requests. Its
// MB/s are the stream's bytes the client read per second; the issue's
// bar is tokens ≥ 0.9 × requests. go test -run X -bench TokenStream
// -count 5 ./faces/proxy/
func BenchmarkTokenStream(b *testing.B) {
	up := httptest.NewServer(&fakellm.Server{Answer: 2000})
	defer up.Close()
	target, err := url.Parse(up.URL)
	if err != nil {
		b.Fatal(err)
	}
	body := `{"model":"m","messages":[{"role":"user","content":"Tell me a story."}],"stream":true,"stream_options":{"include_usage":true}}`
	for _, tc := range []struct {
		name  string
		limit domain.PolicyLimit
		route domain.Route
	}{
		{name: "meter=requests", limit: domain.PolicyLimit{Name: "rpm", Rule: domain.Rule{Limit: 1_000_000_000, Window: time.Hour}},
			route: domain.Route{Name: "chat", Path: "/v1/chat/completions", Cost: 1}},
		{name: "meter=tokens", limit: domain.PolicyLimit{Name: "tpm", Rule: domain.Rule{Limit: 1_000_000_000, Window: time.Hour}, Tokens: true},
			route: domain.Route{Name: "chat", Path: "/v1/chat/completions", Cost: 1, Tokens: "openai"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			policy, err := domain.NewPolicy([]domain.PolicyLimit{tc.limit}, []domain.Route{tc.route})
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
			defer gw.Close()
			var n int64
			for b.Loop() {
				req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("X-Tenant-ID", "acme")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != 200 {
					b.Fatalf("%d, %v", resp.StatusCode, err)
				}
			}
			b.SetBytes(n)
		})
	}
}
